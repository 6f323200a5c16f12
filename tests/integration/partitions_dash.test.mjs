// partitions_dash.test.mjs - the dashboard stream of a deployment with STATUSRELAY_PARTITIONS=3
// on one Redis (relay/dash/follow_parts.c, docs/partitions.md step 6b): a client subscribed to
// everything gets the events of every partition, each frame's streamId being the vector of
// stream ids after it; it resumes from the last streamId it saw with exactly the missed events,
// then "resumed", then live; a cursor whose component was trimmed is a gap, a single stream id
// (a 1-partition cursor) is refused; a broad snapshot by status covers every partition; an
// anonymous subscription of an id in partition 2 gets its snapshot and live events; the stats
// frame counts the events of every partition; a cursor from one daemon resumes on another at
// once (often ahead of that daemon's follower: the subscription waits, then replays again),
// exactly once; on a 3-master cluster with one partition per master; the page resumes from
// the newest vector it saw after its websocket is cut.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { ingest, upstreamPayload, rid } from './lib/hooks.mjs';
import { client, sub, subscribed } from './lib/dash_client.mjs';
import { partitionOf, partTag, ridsOverPartitions, ingestLifecycles } from './lib/partitions.mjs';
import { haveChromium, openBrowser } from './lib/browser.mjs';
import { startSim } from './lib/sim.mjs';
import { startCluster } from './lib/cluster.mjs';

const KEY = 'pdash-key';
const TOK = 'pdash-stream-token-0123456789';
const N = 3;

async function stack(prefix, upstream = {}) {
  const redis = await startRedis();
  const d = await startDaemon({
    redisUrl: redis.url, apiKey: KEY, name: `pdash-${prefix}`, ...upstream,
    env: { STATUSRELAY_REDIS_PREFIX: prefix, STATUSRELAY_PARTITIONS: String(N), STATUSRELAY_STREAM_TOKEN: TOK },
  });
  return {
    redis, d, tokUrl: `${d.wsUrl}?token=${TOK}`,
    async stop() {
      const r = await d.stop();
      try {
        assert.doesNotMatch(d.proc.log(), /Sanitizer|runtime error|level=error/, `${d.proc.logPath}`);
        assert.equal(r.code, 0, `${d.proc.logPath}: exit ${r.code ?? r.signal}`);
      } finally {
        await redis.stop();
      }
    },
  };
}

/** "<ms>-<seq>,..." -> [[ms, seq], ...] as BigInts. */
const vec = (s) => s.split(',').map((x) => x.split('-').map(BigInt));
const later = (a, b) => a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);
const VEC_RE = /^\d+-\d+,\d+-\d+,\d+-\d+$/;

/** Frames in order: each streamId is a vector of N that moves exactly its event's partition
 *  forward from the one before (start: the first frame's base, or `from`). */
function assertVectorWalk(frames, from) {
  let prev = from ? vec(from) : null;
  for (const f of frames) {
    const sid = f.statusrelay.streamId;
    assert.match(sid, VEC_RE);
    const v = vec(sid), k = partitionOf(f.data.requestId, N);
    if (prev)
      for (let p = 0; p < N; p++)
        if (p === k) assert.ok(later(v[p], prev[p]), `${sid} moves partition ${p} after ${prev.join(',')}`);
        else assert.deepEqual(v[p], prev[p], `${sid} keeps partition ${p}`);
    prev = v;
  }
}

/** Every id's statuses in this order among frames (per-request order kept). */
function assertPerRequest(frames, ids, statuses) {
  for (const id of ids)
    assert.deepEqual(frames.filter((f) => f.data.requestId === id).map((f) => f.data.status), statuses, id);
}

test('3 partitions: everything followed, resumed from the last streamId with exactly the missed events, then live', async () => {
  const s = await stack('pda');
  try {
    const ids = ridsOverPartitions('pda', 2, N); // 2 ids in each partition
    const c1 = client(s.tokUrl);
    await c1.ready;
    assert.equal((await subscribed(c1, sub(null, { snapshotLimit: 0 }))).status, 'success');
    await ingestLifecycles(s.d, KEY, ids, ['waiting', 'pending']);
    await until(() => c1.events().length >= 12, { msg: '12 live events', timeoutMs: 15000 });
    await sleep(200);
    const seen = c1.events();
    assert.equal(seen.length, 12);
    assert.deepEqual(new Set(seen.map((f) => partitionOf(f.data.requestId, N))), new Set([0, 1, 2]), 'every partition');
    assertPerRequest(seen, ids, ['waiting', 'pending']);
    assertVectorWalk(seen);
    const last = seen.at(-1).statusrelay.streamId, mid = seen[4].statusrelay.streamId;
    c1.close();
    await until(() => c1.closed, { msg: 'c1 closed' });

    await ingestLifecycles(s.d, KEY, ids, ['submitted', 'success']); // missed: 12, 4 per partition
    const missed = (await s.d.get(`/v1/events?after=${encodeURIComponent(last)}&limit=100`)).body.events;
    assert.equal(missed.length, 12);

    const c2 = client(s.tokUrl);
    await c2.ready;
    assert.equal((await subscribed(c2, sub(null, { lastEventId: last }))).status, 'success');
    const resumed = await c2.wait((f) => f.type === 'resumed', 'resumed');
    assert.equal(resumed.data.lastEventId, last);
    assert.equal(resumed.data.replayed, 12);
    assert.match(resumed.data.streamId, VEC_RE);
    const replay = c2.events();
    assert.deepEqual(replay.map((f) => f.statusrelay.eventId), missed.map((e) => e.eventId), 'exactly the missed events, merged as the REST API merges them');
    assert.deepEqual(replay.map((f) => f.statusrelay.streamId), missed.map((e) => e.streamId), 'the same vectors as GET /v1/events');
    assertVectorWalk(replay, last);
    assertPerRequest(replay, ids, ['submitted', 'success']);
    assert.equal(c2.snapshots().length, 0, 'no snapshot on resume');
    assert.ok(replay.every((f) => c2.frames.indexOf(f) < c2.frames.indexOf(resumed)));
    assert.equal(resumed.data.streamId, replay.at(-1).statusrelay.streamId, 'live from where the replay ended');

    // from the middle of what c1 saw: the rest of c1's events and the missed ones
    const c3 = client(s.tokUrl);
    await c3.ready;
    await subscribed(c3, sub(null, { lastEventId: mid }));
    const r3 = await c3.wait((f) => f.type === 'resumed', 'resumed c3');
    assert.equal(r3.data.replayed, 7 + 12);
    assert.deepEqual(new Set(c3.events().map((f) => f.statusrelay.eventId)),
      new Set([...seen.slice(5).map((f) => f.statusrelay.eventId), ...missed.map((e) => e.eventId)]));
    assertVectorWalk(c3.events(), mid);

    // then live: one event in every partition, once each, after "resumed"
    const more = ids.filter((_, i) => i % 2 === 0); // one id per partition
    for (const id of more) assert.equal(await ingest(s.d, KEY, upstreamPayload({ rid: id, status: 'refund' })), 200);
    await until(() => c2.events().length >= 15 && c3.events().length >= 22, { msg: 'live after resume' });
    await sleep(300);
    for (const [c, n, from] of [[c2, 15, last], [c3, 22, mid]]) {
      const evs = c.events();
      assert.equal(evs.length, n);
      assert.equal(new Set(evs.map((f) => f.statusrelay.eventId)).size, n, 'no duplicate');
      assert.deepEqual(evs.slice(-3).map((f) => f.data.requestId).sort(), [...more].sort());
      assertVectorWalk(evs, from);
    }
    c2.close();
    c3.close();
  } finally {
    await s.stop();
  }
});

test('3 partitions: a trimmed component is a gap, an unknown one too; a 1-partition cursor is refused', async () => {
  const s = await stack('pdg');
  try {
    const ids = ridsOverPartitions('pdg', 1, N);
    const c1 = client(s.tokUrl);
    await c1.ready;
    await subscribed(c1, sub(null, { snapshotLimit: 0 }));
    await ingestLifecycles(s.d, KEY, ids, ['waiting']);
    await until(() => c1.events().length >= 3, { msg: 'first events' });
    const cursor = c1.events().at(-1).statusrelay.streamId;
    c1.close();
    // partition 1 moves on and its stream is trimmed past the cursor; the others are intact
    await ingestLifecycles(s.d, KEY, [ids[1]], ['pending', 'submitted', 'success']);
    assert.ok(await s.redis.cmd('XTRIM', `${partTag('pdg', 1, N)}:events`, 'MAXLEN', '1') >= 1);

    const c2 = client(s.tokUrl);
    await c2.ready;
    await subscribed(c2, sub({ status: ['success', 'waiting'] }, { lastEventId: cursor }));
    const gap = await c2.wait((f) => f.type === 'gap', 'gap');
    assert.equal(gap.data.reason, 'trimmed');
    assert.equal(gap.data.lastEventId, cursor);
    assert.match(gap.data.oldestStreamId, VEC_RE);
    const snaps = await c2.waitN((f) => f.statusrelay?.snapshot, 3, 'fresh snapshots after the gap');
    assert.ok(snaps.every((f) => c2.frames.indexOf(gap) < c2.frames.indexOf(f)));
    assert.deepEqual(snaps.map((f) => f.data.requestId).sort(), [...ids].sort());
    assert.equal(c2.events().length, 0, 'nothing replayed');

    // a component this stream never had (a reset Redis): gap "unknown"
    const c3 = client(s.tokUrl);
    await c3.ready;
    const v = cursor.split(',');
    v[2] = '99999999999999-0';
    await subscribed(c3, sub(null, { lastEventId: v.join(','), snapshotLimit: 2 }));
    const g3 = await c3.wait((f) => f.type === 'gap', 'gap unknown');
    assert.equal(g3.data.reason, 'unknown');
    await c3.waitN((f) => f.statusrelay?.snapshot, 2, 'snapshots after the gap');

    // a single stream id, or a vector of another length: the malformed-cursor refusal
    for (const bad of [cursor.split(',')[0], cursor.split(',').slice(0, 2).join(','), `${cursor},0-0`]) {
      const c = client(s.tokUrl);
      await c.ready;
      const e = await subscribed(c, sub(null, { lastEventId: bad }));
      assert.equal(e.type, 'error', JSON.stringify(e));
      assert.equal(e.request, 'subscribe');
      assert.equal(e.error.code, 'bad_cursor');
      assert.match(e.error.message, /cursor of another partition count/);
      await until(() => c.closed, { msg: 'closed after bad_cursor' });
      assert.deepEqual(c.closed, { code: 4400, reason: 'subscription refused: bad_cursor' });
    }
    c2.close();
    c3.close();
  } finally {
    await s.stop();
  }
});

test('3 partitions: broad snapshots merge every partition, newest first; stats count every partition', async () => {
  const s = await stack('pds');
  try {
    const ids = ridsOverPartitions('pds', 2, N);
    const st = client(s.tokUrl);
    await st.ready;
    st.send({ type: 'subscribe', event: 'statusrelay.stats' });
    await st.wait((f) => f.type === 'stats', 'first stats frame');
    const order = [0, 2, 4, 1, 3, 5].map((i) => ids[i]); // partitions 0 1 2 0 1 2
    for (const id of order) { // one by one: first-seen times differ
      await ingestLifecycles(s.d, KEY, [id], ['waiting', 'success']);
      await sleep(5);
    }
    const c = client(s.tokUrl);
    await c.ready;
    await subscribed(c, sub({ status: 'success' }, { snapshotLimit: 100 }));
    const snaps = await c.waitN((f) => f.statusrelay?.snapshot, 6, 'a snapshot per request');
    await sleep(300);
    assert.equal(c.snapshots().length, 6);
    assert.deepEqual(new Set(snaps.map((f) => f.data.requestId)), new Set(ids), 'requests of all 3 partitions');
    for (const f of snaps) assert.match(f.statusrelay.streamId, VEC_RE, 'the follower\'s vector');
    // a limit takes the newest first-seen across partitions
    const l = client(s.tokUrl);
    await l.ready;
    await subscribed(l, sub({ status: ['success'] }, { snapshotLimit: 2 }));
    await l.waitN((f) => f.statusrelay?.snapshot, 2, 'two snapshots');
    await sleep(300);
    assert.deepEqual(l.snapshots().map((f) => f.data.requestId).sort(), order.slice(-2).sort(), 'the newest two: partitions 1 and 2');
    // the stats frame: events of every partition counted
    const total = ids.length * 2;
    await until(() => st.ofType('stats').at(-1)?.data.events.total >= total, { msg: `events.total ${total}`, timeoutMs: 5000 });
    assert.equal(st.ofType('stats').at(-1).data.events.total, total);
    for (const x of [c, l, st]) x.close();
  } finally {
    await s.stop();
  }
});

test('3 partitions: an anonymous subscription of an id in partition 2 gets its snapshot, then live events', async () => {
  const s = await stack('pdn');
  try {
    const X = ridsOverPartitions('pdn', 1, N)[2]; // an id of partition 2
    assert.equal(await ingest(s.d, KEY, upstreamPayload({ rid: X, status: 'waiting' })), 200);
    const c = client(s.d.wsUrl); // no token: anonymous
    await c.ready;
    assert.equal((await subscribed(c, sub({ id: X }))).status, 'success');
    const snap = await c.wait((f) => f.statusrelay?.snapshot, 'snapshot');
    assert.equal(snap.data.requestId, X);
    assert.equal(snap.data.status, 'waiting');
    assert.match(snap.statusrelay.streamId, VEC_RE);
    assert.equal(await ingest(s.d, KEY, upstreamPayload({ rid: X, status: 'pending' })), 200);
    const ev = await c.wait((f) => f.event === 'request.status.updated' && !f.statusrelay.snapshot, 'live event');
    assert.equal(ev.data.status, 'pending');
    // the subscribe was held until the follower had read the snapshot's event: it never
    // arrives live too (no live frame with seq <= the snapshot's)
    await sleep(100);
    assert.deepEqual(c.events().map((f) => [f.data.status, f.statusrelay.seq]), [['pending', ev.statusrelay.seq]]);
    assert.ok(ev.statusrelay.seq > snap.statusrelay.seq, `live after the snapshot: ${JSON.stringify(ev.statusrelay)}`);
    assert.match(ev.statusrelay.streamId, VEC_RE);
    assert.ok(later(vec(ev.statusrelay.streamId)[2], vec(snap.statusrelay.streamId)[2]), 'partition 2 moved');
    c.close();
  } finally {
    await s.stop();
  }
});

test('3 partitions, two daemons: a cursor from one resumes on the other at once (ahead of its follower or not), exactly once', async () => {
  const redis = await startRedis();
  const env = { STATUSRELAY_REDIS_PREFIX: 'pdw', STATUSRELAY_PARTITIONS: String(N), STATUSRELAY_STREAM_TOKEN: TOK };
  const a = await startDaemon({ redisUrl: redis.url, apiKey: KEY, name: 'pdash-pdw-a', env });
  const b = await startDaemon({ redisUrl: redis.url, apiKey: KEY, name: 'pdash-pdw-b', env });
  try {
    const ids = ridsOverPartitions('pdw', 1, N);
    const ca = client(`${a.wsUrl}?token=${TOK}`);
    await ca.ready;
    await subscribed(ca, sub(null, { snapshotLimit: 0 }));
    const flow = ['waiting', 'pending', 'submitted', 'success', 'refund', 'failure'];
    for (let i = 0; i < 6; i++) {
      // an event through A, seen by A's client; its streamId resumed on B right away (B's
      // follower may not have read it yet: the subscription waits, then replays again),
      // while the next event, of another partition, goes in through B
      const n = ca.events().length;
      assert.equal(await ingest(a, KEY, upstreamPayload({ rid: ids[i % N], status: flow[i] })), 200);
      await until(() => ca.events().length > n, { msg: `A's event ${i}`, stepMs: 1 });
      const v = ca.events().at(-1).statusrelay.streamId;
      const cb = client(`${b.wsUrl}?token=${TOK}`);
      await cb.ready;
      cb.send(sub(null, { lastEventId: v }));
      const next = ids[(i + 1) % N];
      assert.equal(await ingest(b, KEY, upstreamPayload({ rid: next, status: flow[i] })), 200);
      await cb.wait((f) => f.type === 'resumed', `resumed ${i}`);
      await until(() => cb.events().length >= 1, { msg: `B's event ${i}` });
      await sleep(200);
      assert.deepEqual(cb.events().map((f) => [f.data.requestId, f.data.status]), [[next, flow[i]]], `round ${i}: exactly the event after the cursor`);
      assertVectorWalk(cb.events(), v);
      cb.close();
    }
    ca.close();
  } finally {
    for (const d of [a, b]) {
      const r = await d.stop();
      assert.doesNotMatch(d.proc.log(), /Sanitizer|runtime error|level=error/, d.proc.logPath);
      assert.equal(r.code, 0);
    }
    await redis.stop();
  }
});

test('3 partitions on a 3-master Redis Cluster, one partition per master: followed, resumed exactly', async () => {
  const cl = await startCluster({ masters: 3, replicas: 0 });
  let d;
  try {
    // a prefix whose three partition tags hash to slots of three different masters
    let prefix, owners;
    for (let i = 0; i < 500 && !prefix; i++) {
      const p = `pdc${i}`;
      const o = [];
      for (let k = 0; k < N; k++) o.push(await cl.ownerOf(await cl.slotOf(partTag(p, k, N))));
      if (new Set(o.map((x) => x.id)).size === N) [prefix, owners] = [p, o];
    }
    assert.ok(prefix, 'a prefix spreading its partitions over the masters');
    d = await startDaemon({
      redisUrl: cl.url(owners[0].port), apiKey: KEY, name: `pdash-${prefix}`,
      env: { STATUSRELAY_REDIS_PREFIX: prefix, STATUSRELAY_PARTITIONS: String(N), STATUSRELAY_STREAM_TOKEN: TOK },
    });
    const url = `${d.wsUrl}?token=${TOK}`;
    const ids = ridsOverPartitions(prefix, 1, N);
    const c1 = client(url);
    await c1.ready;
    await subscribed(c1, sub(null, { snapshotLimit: 0 }));
    await ingestLifecycles(d, KEY, ids, ['waiting', 'pending']);
    await until(() => c1.events().length >= 6, { msg: '6 live events', timeoutMs: 15000 });
    assertVectorWalk(c1.events());
    assertPerRequest(c1.events(), ids, ['waiting', 'pending']);
    for (let k = 0; k < N; k++) // each partition's events on its own master
      assert.equal(await cl.cmd(owners[k].port, 'XLEN', `${partTag(prefix, k, N)}:events`), 2);
    const last = c1.events().at(-1).statusrelay.streamId;
    c1.close();
    await ingestLifecycles(d, KEY, ids, ['success']);
    const c2 = client(url);
    await c2.ready;
    await subscribed(c2, sub(null, { lastEventId: last }));
    const r = await c2.wait((f) => f.type === 'resumed', 'resumed', 15000);
    // the subscribe was held until the follower had read every event written before it:
    // all three are replayed, none comes live after "resumed"
    assert.equal(r.data.replayed, 3);
    assert.equal(c2.events().length, 3);
    assert.ok(c2.events().every((f) => c2.frames.indexOf(f) < c2.frames.indexOf(r)), 'replayed before resumed');
    assert.deepEqual(c2.events().map((f) => f.data.requestId).sort(), [...ids].sort());
    assertVectorWalk(c2.events(), last);
    assert.equal(await ingest(d, KEY, upstreamPayload({ rid: ids[2], status: 'refund' })), 200);
    await until(() => c2.events().length >= 4, { msg: 'live after resume' });
    await sleep(300);
    assert.equal(c2.events().length, 4);
    c2.close();
  } finally {
    if (d) {
      const r = await d.stop();
      assert.doesNotMatch(d.proc.log(), /Sanitizer|runtime error|level=error/, d.proc.logPath);
      assert.equal(r.code, 0);
    }
    await cl.stop();
  }
});

test('3 partitions: the page shows events of every partition and resumes from the newest vector after its websocket is cut', { timeout: 120000 }, async (t) => {
  if (!haveChromium()) { t.skip('chromium not installed'); return; }
  const sim = await startSim({ apiKey: KEY, seed: 7 }); // the page reads its chain list
  const s = await stack('pdp', { apiUrl: sim.url, wsUrl: sim.wsUrl });
  let b;
  try {
    b = await openBrowser();
    const { page, problems } = b;
    const sent = [], got = [];
    page.on('websocket', (ws) => {
      ws.on('framesent', (f) => { try { sent.push(JSON.parse(String(f.payload))); } catch {} });
      ws.on('framereceived', (f) => { try { got.push(JSON.parse(String(f.payload))); } catch {} });
    });
    await page.goto(`http://127.0.0.1:${s.d.wsPort}/?token=${TOK}`);
    await page.waitForSelector('#conn.pill-ok', { timeout: 10000 });
    const ids = ridsOverPartitions('pdp', 1, N);
    await ingestLifecycles(s.d, KEY, ids, ['waiting']);
    await page.waitForFunction((n) => document.querySelectorAll('#rows tr[data-id]').length >= n, ids.length, { timeout: 15000 });
    for (const id of ids) assert.ok(await page.$(`#rows tr[data-id="${id}"]`), `row ${id}`);
    await until(() => got.filter((f) => f.event === 'request.status.updated' && !f.statusrelay.snapshot).length >= 3, { msg: '3 events on the wire' });
    const newest = got.filter((f) => f.event === 'request.status.updated').at(-1).statusrelay.streamId;
    assert.match(newest, VEC_RE);
    // cut the page's websocket; it reconnects after 2-4 s (retry 3), events happen meanwhile
    await page.evaluate(() => { state.retry = 3; state.ws.close(); });
    await ingestLifecycles(s.d, KEY, ids, ['pending']);
    const resumed = await until(() => got.find((f) => f.type === 'resumed'), { msg: 'resumed', timeoutMs: 20000 });
    const again = sent.filter((m) => m.type === 'subscribe' && m.event === 'request.status.updated' && !m.filters?.id); // the broad one
    assert.equal(again.length, 2);
    assert.equal(again[1].lastEventId, newest, 'resumed from the newest vector it saw');
    assert.equal(resumed.data.replayed, 3, 'exactly the 3 missed events');
    await page.waitForFunction((ids) => ids.every((id) => document.querySelector(`#rows tr[data-id="${id}"]`)?.innerText.includes('pending')), ids, { timeout: 10000 });
    assert.deepEqual(problems, []);
  } finally {
    if (b) await b.close();
    await s.stop();
    await sim.stop();
  }
});
