// facts_events.test.mjs - request facts in event bodies (issue 24 (d), DESIGN "Request facts",
// docs/facts.md "Facts in event bodies"): a request followed over the upstream websocket (the
// simulator, with an API key so reads by id happen) ends with its facts - fees.actual, outTxs
// with explorer links - in GET /v1/requests/{id}, in a delivered webhook body (verified with
// the official standardwebhooks package) and in a dashboard frame, as "statusrelay.request".
// Facts learned after a status event go out on one follow-up event of the same status flagged
// "facts" (at most one per status change). Every event keeps the facts version of its seq:
// a replay after the facts changed is byte-identical, also once its body key is gone.
// Fails on 52c16ea: no "statusrelay.request" in bodies or frames, no follow-up events.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { Webhook } from 'standardwebhooks';
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';
import { startReceiver } from './lib/hooks.mjs';
import { client, sub, subscribed } from './lib/dash_client.mjs';

const KEY = 'facts-events-key';
const cleanup = [];
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });
let prefixN = 0;

async function stopDaemon(d) {
  const r = await d.stop();
  const log = d.proc.log();
  assert.doesNotMatch(log, /Sanitizer|runtime error/, `${d.proc.logPath}: ${log.slice(-3000)}`);
  assert.equal(r.code, 0, `${d.proc.logPath}: exit ${r.code ?? r.signal}`);
}

function explorerTx(c, hash) {
  return c.explorerUrl.replace(/\/+$/, '') + c.explorerPaths.transaction.replace('{TX_HASH}', hash);
}

/** The deliveries of one request to path, first attempt of each event (by webhook-id). */
function firstBodies(rx, path, rid) {
  const m = new Map();
  for (const x of rx.records()) {
    if (x.path !== path || x.status !== 204 && x.status !== 200) continue;
    const b = JSON.parse(x.body);
    if (b.data.requestId !== rid || m.has(x.headers['webhook-id'])) continue;
    m.set(x.headers['webhook-id'], x);
  }
  return [...m.values()].sort((a, b) => JSON.parse(a.body).statusrelay.seq - JSON.parse(b.body).statusrelay.seq);
}

/** A simulator request tracked by d and followed to success: its first-seen facts known
 * before the status moves on (else both reads may follow one status change, whose one
 * follow-up then carries only the first), then the settled facts. */
async function trackToSettled(d, sim) {
  const r = await sim.control('/requests', { path: ['waiting', 'pending', 'success'], stepMs: 0, autoHashes: true,
    originChainId: 8453, destinationChainId: 42161 });
  assert.equal((await d.post('/v1/requests', { requestId: r.id })).status, 201);
  await until(async () => (await d.get(`/v1/requests/${r.id}`)).body?.request,
    { msg: 'first-seen facts', timeoutMs: 15000 });
  for (const step of ['pending', 'success']) {
    await sim.control(`/requests/${r.id}/advance`, {});
    await until(async () => (await d.get(`/v1/requests/${r.id}`)).body?.status === step,
      { msg: `${step}`, timeoutMs: 15000 });
  }
  await until(async () => (await d.get(`/v1/requests/${r.id}`)).body?.request?.fees?.actual,
    { msg: 'settled facts', timeoutMs: 20000 });
  return r;
}

for (const parts of [1, 3]) {
  test(`facts reach GET, a signed webhook body and a dashboard frame; one follow-up per status change; replays stay byte-identical (partitions=${parts})`, async () => {
    const sim = await startSim({ apiKey: KEY, seed: 24 });
    const redis = await startRedis();
    const prefix = `fe${prefixN++}`;
    const d = await startDaemon({
      redisUrl: redis.url, apiKey: KEY, apiUrl: sim.url, wsUrl: sim.wsUrlWithKey, name: `facts-events-p${parts}`,
      args: ['--retry-schedule', '0s,200ms,400ms'],
      env: { STATUSRELAY_REDIS_PREFIX: prefix, STATUSRELAY_PARTITIONS: String(parts) },
    });
    const rx = await startReceiver();
    cleanup.push(() => rx.stop());
    let dash;
    try {
      const chains = (await fetch(`${sim.url}/_sim/chains`).then((x) => x.json())).chains;
      const wh = (await d.post('/v1/webhooks', { url: rx.url('/std') })).body;
      assert.ok(wh.secret, JSON.stringify(wh));
      // filters.users matches the facts' wallets (0x addresses in any case): one endpoint for
      // the request's user written in upper case, one for another wallet
      const user = `0x${'ab12'.repeat(10)}`;
      assert.equal((await d.post('/v1/webhooks', { url: rx.url('/user'), filters: { users: [`0x${user.slice(2).toUpperCase()}`] } })).status, 201);
      assert.equal((await d.post('/v1/webhooks', { url: rx.url('/other'), filters: { users: [`0x${'cd34'.repeat(10)}`] } })).status, 201);
      const r = await sim.control('/requests', { path: ['waiting', 'pending', 'success'], stepMs: 0, autoHashes: true,
        originChainId: 8453, destinationChainId: 42161, user });
      dash = client(d.wsUrl);
      await dash.ready;
      assert.equal((await subscribed(dash, sub({ id: r.id }))).status, 'success');
      assert.equal((await d.post('/v1/requests', { requestId: r.id })).status, 201);
      // the quote-time facts: on the first event when known by then, else on its follow-up
      await until(() => firstBodies(rx, '/std', r.id).some((x) => JSON.parse(x.body).statusrelay.request),
        { msg: 'a waiting event with facts', timeoutMs: 20000 });
      for (const step of ['pending', 'success']) {
        await sim.control(`/requests/${r.id}/advance`, {});
        await until(async () => (await d.get(`/v1/requests/${r.id}`)).body?.status === step,
          { msg: `${step} over the websocket`, timeoutMs: 15000 });
      }
      // settled: the read by id brings fees.actual and the fill; a follow-up carries them
      const settled = await until(() => firstBodies(rx, '/std', r.id).find((x) => {
        const f = JSON.parse(x.body).statusrelay.request;
        return f?.fees?.actual && f.outTxs.length > 0;
      }), { msg: 'a delivery with the settled facts', timeoutMs: 20000 });
      new Webhook(wh.secret).verify(settled.body, settled.headers);
      const body = JSON.parse(settled.body);
      const facts = body.statusrelay.request;
      assert.equal(body.data.status, 'success');
      assert.equal(facts.outTxs[0].txHash, body.data.txHashes[0]);
      assert.equal(facts.outTxs[0].chainId, 42161);
      assert.equal(facts.outTxs[0].explorerUrl, explorerTx(chains.find((c) => c.id === 42161), facts.outTxs[0].txHash));
      assert.equal(facts.inTxs[0].explorerUrl, explorerTx(chains.find((c) => c.id === 8453), facts.inTxs[0].txHash));
      assert.deepEqual(Object.keys(body.statusrelay).slice(0, 5), ['eventId', 'seq', 'previousStatus', 'source', 'observedAt']);
      // the same object in GET /v1/requests/{id}
      const g = await d.get(`/v1/requests/${r.id}`);
      assert.deepEqual(g.body.request, facts);
      // and in a dashboard frame of that event
      const frame = await dash.wait((f) => f.statusrelay?.eventId === body.statusrelay.eventId,
        'the dashboard frame of the settled facts', 15000);
      assert.deepEqual(frame.statusrelay.request, facts);
      assert.deepEqual(frame.data, body.data, 'upstream-shaped data unchanged');
      // the request's history: each event's frame with the facts of its seq, as delivered
      dash.send({ type: 'history', filters: { id: r.id } });
      const hist = await dash.wait((f) => f.type === 'history' && f.status === 'success', 'history', 15000);
      const delivered = new Map(firstBodies(rx, '/std', r.id).map((x) => [x.headers['webhook-id'], JSON.parse(x.body)]));
      assert.ok(hist.data.events.length >= 3);
      for (const e of hist.data.events) {
        const b = delivered.get(e.statusrelay.eventId);
        if (b) assert.deepEqual(e.statusrelay.request, b.statusrelay.request, `history seq ${e.statusrelay.seq}`);
      }
      // a new subscription's snapshot: the request's newest facts
      const snap = client(d.wsUrl);
      await snap.ready;
      await subscribed(snap, sub({ id: r.id }));
      const s0 = await snap.wait((f) => f.statusrelay?.snapshot, 'snapshot', 15000);
      assert.deepEqual(s0.statusrelay.request, facts);
      snap.close();
      // one follow-up per status change at most, flagged "facts", the same status as the event
      // it follows; the status events themselves are not flagged
      await new Promise((res) => setTimeout(res, 1000)); // anything late would show now
      const evs = firstBodies(rx, '/std', r.id).map((x) => JSON.parse(x.body));
      const seqs = evs.map((e) => e.statusrelay.seq);
      assert.deepEqual(seqs, seqs.map((_, i) => i + 1), `every event delivered once, in order: ${seqs}`);
      const perChange = new Map();
      let change = 0;
      for (const e of evs) {
        const flagged = (e.statusrelay.flags ?? []).includes('facts');
        if (e.statusrelay.previousStatus !== e.data.status) change++;
        if (flagged) {
          assert.equal(e.statusrelay.previousStatus, e.data.status, 'a follow-up keeps the status');
          assert.ok(e.statusrelay.request, 'a follow-up carries facts');
          perChange.set(change, (perChange.get(change) ?? 0) + 1);
        }
      }
      for (const [c, n] of perChange) assert.equal(n, 1, `status change ${c}: ${n} follow-ups`);
      // the users filter: exactly the events that carried the user's facts, none elsewhere
      assert.equal(facts.user.toLowerCase(), user);
      const withFacts = evs.filter((e) => e.statusrelay.request?.user).map((e) => e.statusrelay.eventId);
      await until(() => firstBodies(rx, '/user', r.id).length === withFacts.length,
        { msg: 'the users endpoint got every event with facts', timeoutMs: 10000 });
      assert.deepEqual(firstBodies(rx, '/user', r.id).map((x) => x.headers['webhook-id']), withFacts);
      assert.equal(firstBodies(rx, '/other', r.id).length, 0, 'another wallet gets nothing');
      assert.ok(perChange.size >= 1, 'the settled facts came on a follow-up');
      // the stream entries did not grow: no facts in any stored event
      const tag = parts === 1 ? `{${prefix}}` : null;
      if (tag) {
        const ents = await redis.cmd('XRANGE', `${tag}:events`, '-', '+');
        for (const e of ents) assert.doesNotMatch(String(e[1]), /"fees"/);
      }
      // replays: byte-identical bodies after the facts changed, also with the body keys gone
      const firsts = new Map(firstBodies(rx, '/std', r.id).map((x) => [x.headers['webhook-id'], x.body]));
      for (const round of ['kept', 'deleted']) {
        if (round === 'deleted') {
          const keys = await redis.cmd('KEYS', `{${prefix}*}:body:*`);
          assert.ok(keys.length >= 1, 'body keys to delete');
          for (const k of keys) await redis.cmd('DEL', k);
        }
        const before = rx.records().length;
        const rp = await d.post('/v1/replay', { requestId: r.id, webhookId: wh.id });
        assert.equal(rp.status, 202, rp.text);
        assert.equal(rp.body.count, firsts.size);
        const again = await until(() => {
          const got = rx.records().slice(before).filter((x) => x.path === '/std' && x.headers['statusrelay-replay'] === '1');
          return got.length >= firsts.size && got;
        }, { msg: `replayed (${round})`, timeoutMs: 15000 });
        for (const x of again) {
          assert.equal(x.body, firsts.get(x.headers['webhook-id']), `${round}: body of ${x.headers['webhook-id']}`);
          new Webhook(wh.secret).verify(x.body, x.headers);
        }
      }
    } finally {
      dash?.close();
      await stopDaemon(d);
      await sim.stop();
      await redis.stop();
    }
  });
}

test('facts versions: at most 4 kept in the request hash, a hash written before versions still serves', async () => {
  const sim = await startSim({ apiKey: KEY, seed: 24 });
  const redis = await startRedis();
  const prefix = `fe${prefixN++}`;
  const d = await startDaemon({
    redisUrl: redis.url, apiKey: KEY, apiUrl: sim.url, wsUrl: sim.wsUrlWithKey, name: 'facts-versions',
    env: { STATUSRELAY_REDIS_PREFIX: prefix },
  });
  try {
    const r = await trackToSettled(d, sim);
    const key = `{${prefix}}:req:${r.id}`;
    const h = await redis.cmd('HGETALL', key);
    const fields = [];
    for (let i = 0; i < h.length; i += 2) fields.push(h[i]);
    const versions = fields.filter((f) => /^fx\d*$/.test(f));
    assert.ok(versions.length >= 2 && versions.length <= 4, `versions ${versions}`);
    for (const f of versions.filter((v) => v !== 'fx')) {
      // an older version is a delta against the next newer one: a fraction of the newest
      const v = await redis.cmd('HGET', key, f);
      assert.equal(v[0], 'd', f);
      assert.ok(v.length < (await redis.cmd('HSTRLEN', key, 'fx')) / 2, `${f}: ${v.length} B`);
    }
    const fxs = Number(await redis.cmd('HGET', key, 'fxs'));
    const seq = Number(await redis.cmd('HGET', key, 'seq'));
    assert.ok(fxs >= 1 && fxs <= seq + 1, `fxs ${fxs} seq ${seq}`);
    // a hash of an older version: only fx (no fxs, fxo): one version covering every event
    const want = (await d.get(`/v1/requests/${r.id}`)).body.request;
    const fx = await redis.cmd('HGET', key, 'fx');
    await redis.cmd('HDEL', key, 'fxs', 'fxo', 'fxf', ...fields.filter((f) => /^fx\d+$/.test(f)));
    assert.deepEqual((await d.get(`/v1/requests/${r.id}`)).body.request, want);
    const rx = await startReceiver();
    cleanup.push(() => rx.stop());
    await d.post('/v1/webhooks', { url: rx.url('/old') });
    const rp = await d.post('/v1/replay', { requestId: r.id, webhookId: undefined });
    assert.equal(rp.status, 202);
    const got = await until(() => rx.records().length >= rp.body.count && rx.records(), { msg: 'replayed', timeoutMs: 15000 });
    for (const x of got) assert.deepEqual(JSON.parse(x.body).statusrelay.request, want, 'the one version');
    assert.equal(await redis.cmd('HGET', key, 'fx'), fx);
  } finally {
    await stopDaemon(d);
    await sim.stop();
    await redis.stop();
  }
});

test('a retry whose body key expired is encoded again with the facts of its seq: the same bytes', async () => {
  const sim = await startSim({ apiKey: KEY, seed: 24 });
  const redis = await startRedis();
  const prefix = `fe${prefixN++}`;
  const d = await startDaemon({
    redisUrl: redis.url, apiKey: KEY, apiUrl: sim.url, wsUrl: sim.wsUrlWithKey, name: 'facts-retry',
    args: ['--retry-schedule', '0s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s'],
    env: { STATUSRELAY_REDIS_PREFIX: prefix },
  });
  const rx = await startReceiver({ def: 500 });
  cleanup.push(() => rx.stop());
  try {
    const wh = (await d.post('/v1/webhooks', { url: rx.url('/late') })).body;
    const r = await trackToSettled(d, sim);
    // every event's body is stored (the first one retries, the others wait behind it), the
    // settled facts' follow-up among them
    let seq = 0, last = '';
    const bodies = await until(async () => {
      seq = (await d.get(`/v1/requests/${r.id}`)).body.seq;
      const keys = await redis.cmd('KEYS', `{${prefix}}:body:*`);
      if (keys.length < seq) return false;
      const m = new Map();
      for (const k of keys) m.set(k.slice(k.lastIndexOf(':') + 1), await redis.cmd('GET', k));
      const ok = [...m.values()].some((x) => JSON.parse(x).statusrelay.request?.fees?.actual);
      last = `seq ${seq}, ${keys.length} bodies, settled facts in one: ${ok}`;
      return ok && m;
    }, { msg: 'a body per event', timeoutMs: 20000 }).catch((e) => { throw new Error(`${e.message} (${last})`); });
    for (const k of bodies.keys()) await redis.cmd('DEL', `{${prefix}}:body:${k}`);
    await rx.setScript(`/late=${Array(40).fill(200).join(',')}`);
    const ok = await until(() => {
      const got = rx.records().filter((x) => x.status === 200);
      return new Set(got.map((x) => x.headers['webhook-id'])).size >= seq && got;
    }, { msg: 'every event delivered', timeoutMs: 30000 });
    for (const x of ok) {
      assert.equal(x.body, bodies.get(x.headers['webhook-id']), `body of ${x.headers['webhook-id']}`);
      new Webhook(wh.secret).verify(x.body, x.headers);
    }
  } finally {
    await stopDaemon(d);
    await sim.stop();
    await redis.stop();
  }
});
