// rec_compress.test.mjs - the request record deflated once its watch has ended (issue 24,
// STATUSRELAY_COMPRESS_RECORDS, store/rec.h): the hash's rec becomes 'r' + a zlib stream
// (checked in Redis) and GET /v1/requests/{id}, the listing, search results, webhook replays
// and the dashboard snapshot answer the same bytes as with the plain record (an old plain rec
// is still read: written back by hand); a typed event due on a deflated record (a watch
// started again by tracking) waits for the pass and goes out built on the same record; a new
// status event on a compacted request writes a plain record and its watch ends as before; the
// pass's compare-and-set (store/rec_put.lua) loses to an apply, a new seq or a watch started
// in between. Real redis-server, the simulator, a daemon and a webhook receiver on loopback;
// windows of 2 s and a pass every 5 s, so the test takes some 30 s.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';
import { trackScripted, waitStatus, countDeflated } from './lib/requests.mjs';
import { startReceiver } from './lib/hooks.mjs';
import { client, sub, subscribed } from './lib/dash_client.mjs';

const KEY = 'rec-compress-key';
const TYPES = ['request.status.updated', 'request.watch.ended', 'request.stuck'];
let redis, sim;
const cleanup = [];

before(async () => {
  redis = await startRedis();
  sim = await startSim({ apiKey: KEY, seed: 24, rateLimit: 0 });
});
after(async () => {
  for (const f of cleanup.reverse()) { try { await f(); } catch {} }
  await sim?.stop();
  await redis?.stop();
});

async function daemon(prefix) {
  const d = await startDaemon({
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrl, apiKey: KEY,
    env: {
      STATUSRELAY_REDIS_PREFIX: prefix, STATUSRELAY_COMPRESS_RECORDS: 'true',
      STATUSRELAY_RETRY_SCHEDULE: '0s,200ms,400ms',
      STATUSRELAY_SETTLED_WATCH: '2s', STATUSRELAY_WAITING_TTL: '30s',
      STATUSRELAY_FAILURE_TAIL: '2s', STATUSRELAY_STUCK_AFTER: '4s',
    },
    name: `rec-${prefix}`,
  });
  cleanup.push(() => d.stop());
  return d;
}

async function hook(d) {
  const rx = await startReceiver();
  cleanup.push(() => rx.stop());
  const r = await d.post('/v1/webhooks', { url: rx.url('/h'), filters: { events: TYPES } });
  assert.equal(r.status, 201, r.text);
  return { rx, id: r.body.id };
}

const received = (rx) => rx.records().filter((x) => x.body)
  .map((x) => ({ ...JSON.parse(x.body), headers: x.headers, raw: x.body }));
const ofReq = (rx, id, event) => {
  const m = new Map();
  for (const b of received(rx)) {
    if (b.data?.requestId === id && (!event || b.event === event) && !m.has(b.headers['webhook-id'])) m.set(b.headers['webhook-id'], b);
  }
  return [...m.values()];
};

async function advanceTo(d, id, status) {
  await sim.control(`/requests/${id}/advance`, {});
  return waitStatus(d, id, status);
}

// deflated: 'r' + zlib, or its first part in a packed hash ("\0", then 'r':
// store/chunk_lib.lua)
const isDeflated = async (k) => (await countDeflated(redis, [k])) === 1;
const waitDeflated = (k, msg) => until(() => isDeflated(k), { timeoutMs: 30000, msg });

/** The newest stream entry of request id: its fields as an object. */
async function lastEntry(prefix, id) {
  const all = await redis.cmd('XRANGE', `{${prefix}}:events`, '-', '+');
  let last = null;
  for (const [, f] of all) {
    const o = {};
    for (let i = 0; i < f.length; i += 2) o[f[i]] = f[i + 1];
    if (o.rid === id) last = o;
  }
  return last;
}

test('an ended watch\'s record is stored deflated and every reader serves the same bytes', async () => {
  const prefix = 'rz1';
  const d = await daemon(prefix);
  const h = await hook(d);
  const id = await scripted(d, ['waiting', 'pending', 'success']);
  await waitStatus(d, id, 'waiting');
  await advanceTo(d, id, 'pending');
  await advanceTo(d, id, 'success');
  const k = `{${prefix}}:req:${id}`;
  // the watch ends (settled 2 s: a request.watch.ended, the newest record), then the pass
  await until(() => ofReq(h.rx, id, 'request.watch.ended').length === 1, { timeoutMs: 15000, msg: 'watch.ended' });
  await waitDeflated(k, 'rec deflated in Redis');
  const plain = (await lastEntry(prefix, id)).rec; // the record the hash held before
  const seq = Number(await redis.cmd('HGET', k, 'seq'));
  const zlen = await redis.cmd('HSTRLEN', k, 'rec');
  assert.ok(zlen < plain.length / 2, `deflated ${zlen} B of ${plain.length} B`);
  assert.equal(await redis.cmd('HGET', k, 'watch'), 'ended');

  const c = client(d.wsUrl);
  cleanup.push(() => c.close());
  await c.ready;
  const inTx = (await d.get(`/v1/requests/${id}`)).body.inTxHashes[0];
  async function views() {
    const snapAt = c.frames.length;
    assert.equal((await subscribed(c, sub({ id }))).status, 'success');
    const snap = await c.wait((f) => c.frames.indexOf(f) >= snapAt && f.statusrelay?.snapshot, `snapshot ${JSON.stringify(c.frames.slice(snapAt))}`);
    const { _at, publishedAt, ...frame } = snap; // publishedAt: when the frame went out
    c.send({ type: 'unsubscribe', event: 'request.status.updated', filters: { id } });
    return {
      get: (await d.get(`/v1/requests/${id}`)).text,
      list: (await d.get('/v1/requests?limit=50')).text,
      search: (await d.get(`/v1/requests?q=${inTx}`)).text,
      frame: JSON.stringify(frame),
    };
  }
  const deflated = await views();
  const got = JSON.parse(deflated.get);
  const rec = JSON.parse(plain);
  assert.equal(got.status, 'success');
  assert.equal(got.updatedAt, rec.updatedAt);
  assert.equal(got.seq, seq);
  assert.equal(rec.requestId, id);
  assert.ok(JSON.parse(deflated.search).requests.some((r) => r.requestId === id), deflated.search);
  // replay: the same bodies as delivered
  const before = ofReq(h.rx, id);
  const rp = await d.post('/v1/replay', { webhookId: h.id, requestId: id });
  assert.equal(rp.status, 202, rp.text);
  await until(() => received(h.rx).filter((b) => b.data?.requestId === id && b.headers['statusrelay-replay'] === '1').length >= before.length,
    { msg: 'replayed' });
  for (const b of received(h.rx).filter((x) => x.data?.requestId === id && x.headers['statusrelay-replay'] === '1')) {
    assert.equal(b.raw, before.find((o) => o.headers['webhook-id'] === b.headers['webhook-id']).raw);
  }
  // an old plain record (as a version before this one wrote it) reads the same
  await redis.cmd('HSET', k, 'rec', plain);
  assert.deepEqual(await views(), deflated);
});

test('typed events due on a deflated record wait for the pass; a new status writes a plain one', async () => {
  const prefix = 'rz2';
  const d = await daemon(prefix);
  const h = await hook(d);
  const rFinal = await scripted(d, ['waiting', 'pending', 'success', 'failure']);
  const rStuck = await scripted(d, ['waiting', 'pending', 'success']);
  for (const id of [rFinal, rStuck]) await waitStatus(d, id, 'waiting');
  await advanceTo(d, rFinal, 'pending');
  await advanceTo(d, rFinal, 'success');
  await advanceTo(d, rStuck, 'pending');
  // rStuck: untracked at once (watch.ended "untracked"), before it is stuck (4 s)
  assert.equal((await d.del(`/v1/requests/${rStuck}`)).status, 204);
  await until(() => ofReq(h.rx, rStuck, 'request.watch.ended').length === 1, { timeoutMs: 15000, msg: 'untracked' });
  assert.equal(ofReq(h.rx, rStuck, 'request.stuck').length, 0);
  await until(() => ofReq(h.rx, rFinal, 'request.watch.ended').length === 1, { timeoutMs: 15000, msg: 'watch.ended' });
  const kF = `{${prefix}}:req:${rFinal}`, kS = `{${prefix}}:req:${rStuck}`;
  await waitDeflated(kF, 'rFinal deflated');
  await waitDeflated(kS, 'rStuck deflated');
  const plainF = (await lastEntry(prefix, rFinal)).rec;
  const plainS = (await lastEntry(prefix, rStuck)).rec;
  const chgS = Number(await redis.cmd('HGET', kS, 'chg'));
  const seqF = Number(await redis.cmd('HGET', kF, 'seq'));
  const seqS = Number(await redis.cmd('HGET', kS, 'seq'));

  // tracked again: watches start on deflated records, nothing new upstream
  for (const id of [rFinal, rStuck]) assert.ok([200, 201].includes((await d.post('/v1/requests', { requestId: id })).status));
  // rFinal's settled window (2 s) ends again; rStuck (pending since long) is stuck now:
  // both typed events wait for the pass, then go out on the record as it was
  const ended = await until(() => ofReq(h.rx, rFinal, 'request.watch.ended')[1], { timeoutMs: 20000, msg: 'second watch.ended' });
  const stuck = await until(() => ofReq(h.rx, rStuck, 'request.stuck')[0], { timeoutMs: 20000, msg: 'stuck' });
  const base = (p) => { const r = JSON.parse(p); delete r.event; return r; };
  assert.equal(ended.data.status, 'success');
  assert.equal(ended.data.reason, 'final');
  assert.equal(ended.statusrelay.seq, seqF + 1);
  const stored = JSON.parse(await until(async () => {
    const e = await lastEntry(prefix, rFinal);
    return e.type === 'request.watch.ended' && JSON.parse(e.rec).event.seq === seqF + 1 && e.rec;
  }, { msg: 'stream entry' }));
  assert.deepEqual(base(JSON.stringify(stored)), base(plainF));
  assert.equal(stuck.data.status, 'pending');
  assert.equal(stuck.data.stuckSince, chgS);
  assert.equal(stuck.statusrelay.seq, seqS + 1);
  assert.equal(stuck.data.requestId, JSON.parse(plainS).requestId);
  for (const k of [kF, kS]) {
    assert.equal(await redis.cmd('HEXISTS', k, 'rzev'), 0);
  }
  await until(async () => await redis.cmd('ZCARD', `{${prefix}}:rzq`) === 0, { timeoutMs: 15000, msg: 'rzq empty' });

  // a new status on a compacted request: the apply writes a plain record, the watch ends as
  // before, and the pass deflates it again
  await waitDeflated(kF, 'rFinal deflated again');
  await sim.control(`/requests/${rFinal}/advance`, {});
  assert.ok([200, 201].includes((await d.post('/v1/requests', { requestId: rFinal })).status));
  const fail = await until(() => ofReq(h.rx, rFinal, 'request.status.updated').find((b) => b.data.status === 'failure'),
    { timeoutMs: 15000, msg: 'failure event' });
  assert.equal(fail.statusrelay.previousStatus, 'success');
  const tail = await until(() => ofReq(h.rx, rFinal, 'request.watch.ended').find((b) => b.data.reason === 'failure_tail'),
    { timeoutMs: 15000, msg: 'failure_tail' });
  assert.equal(tail.data.status, 'failure');
  await waitDeflated(kF, 'rFinal deflated a third time');
  const last = await d.get(`/v1/requests/${rFinal}`);
  assert.equal(last.body.status, 'failure');
  assert.equal(last.body.watch, 'ended');
});

/** store/<name>.lua with its "-- #include x.lua" lines pasted (relay/common/embed.pl). */
function script(name) {
  const src = fs.readFileSync(path.resolve('../store', name), 'utf8');
  return src.replace(/^-- #include (\S+)$/mg, (_, f) => script(f));
}

test('the pass\'s compare-and-set loses to an apply, a new seq or a watch started meanwhile', async () => {
  const put = script('rec_put.lua');
  const tag = '{rz3}';
  const k = `${tag}:req:x`;
  const rec = '{"requestId":"x","status":"success","seq":3}';
  const reset = async () => {
    await redis.cmd('DEL', k, `${tag}:rzq`, `${tag}:act`);
    await redis.cmd('HSET', k, 'rec', rec, 'seq', '3', 'watch', 'ended', 'status', 'success');
  };
  const run = (...items) => redis.cmd('EVAL', put, 1, `${tag}:rzq`, tag, Date.now(), 1000, ...items.flat());
  // nothing in between: written
  await reset();
  assert.deepEqual(await run(['c', 'x', '3', rec, 'rZZ']), [1, 0]);
  assert.equal(await redis.cmd('HGET', k, 'rec'), 'rZZ');
  // an apply wrote a new record (and seq) after the scan read it: kept
  await reset();
  const applied = '{"requestId":"x","status":"failure","seq":4}';
  await redis.cmd('HSET', k, 'rec', applied, 'seq', '4');
  assert.deepEqual(await run(['c', 'x', '3', rec, 'rZZ']), [0, 0]);
  assert.equal(await redis.cmd('HGET', k, 'rec'), applied);
  // the same record but another seq (a typed event and back is impossible, but a seq is the
  // version): kept
  await reset();
  await redis.cmd('HSET', k, 'seq', '5');
  assert.deepEqual(await run(['c', 'x', '3', rec, 'rZZ']), [0, 0]);
  // watched again meanwhile: kept plain
  await reset();
  await redis.cmd('HSET', k, 'watch', 'settled');
  assert.deepEqual(await run(['c', 'x', '3', rec, 'rZZ']), [0, 0]);
  assert.equal(await redis.cmd('HGET', k, 'rec'), rec);
  // a typed event waits: kept
  await reset();
  await redis.cmd('HSET', k, 'rzev', '1|request.stuck|,"stuckSince":1');
  assert.deepEqual(await run(['c', 'x', '3', rec, 'rZZ']), [0, 0]);
  // restore: only while the value is the one read
  await reset();
  await redis.cmd('HSET', k, 'rec', 'rOLD', 'rzev', '7|request.stuck|,"stuckSince":1');
  await redis.cmd('ZADD', `${tag}:rzq`, 1, 'x');
  await redis.cmd('ZADD', `${tag}:act`, 1, 'x'); // still stuck since 1
  assert.deepEqual(await run(['r', 'x', '', 'rOTHER', rec]), [0, 0]);
  assert.equal(await redis.cmd('HGET', k, 'rec'), 'rOLD');
  assert.deepEqual(await run(['r', 'x', '', 'rOLD', rec]), [0, 1]);
  const now = await redis.cmd('HGET', k, 'rec');
  assert.equal(JSON.parse(now).event.type, 'request.stuck');
  assert.equal(JSON.parse(now).event.createdAt, 7);
  assert.equal(JSON.parse(now).event.seq, 4);
  assert.equal(await redis.cmd('HGET', k, 'tev'), `4:${rec.length}`);
  assert.equal(await redis.cmd('HEXISTS', k, 'rzev'), 0);
  assert.equal(await redis.cmd('ZCARD', `${tag}:rzq`), 1); // rec_scan.lua's to deflate again
  // events made stale meanwhile are dropped: a watch.ended of a watch that started again, a
  // stuck of a status that changed ({P}:act scores the change), in order with a valid one
  await reset();
  await redis.cmd('HSET', k, 'rec', 'rOLD', 'watch', 'active', 'status', 'pending',
    'rzev', '7|request.watch.ended|,"reason":"final"\n8|request.stuck|,"stuckSince":5\n9|request.stuck|,"stuckSince":6');
  await redis.cmd('ZADD', `${tag}:act`, 6, 'x');
  assert.deepEqual(await run(['r', 'x', '', 'rOLD', rec]), [0, 1]);
  const one = JSON.parse(await redis.cmd('HGET', k, 'rec'));
  assert.deepEqual(one.event, { type: 'request.stuck', seq: 4, createdAt: 9, stuckSince: 6 });
  assert.equal(await redis.cmd('HGET', k, 'seq'), '4');
});

const scripted = (d, p) => trackScripted(sim, d, p);

test('typed events waiting on a record the daemon cannot read are dropped once, not retried', async () => {
  const prefix = 'rz4';
  const d = await daemon(prefix);
  // a queued request whose stored record is neither plain nor a readable deflated one (a
  // format this version does not know, or damaged)
  const id = `0x${'ab'.repeat(32)}`;
  const k = `{${prefix}}:req:${id}`;
  await redis.cmd('HSET', k, 'rec', 'r-not-a-zlib-stream', 'seq', '3', 'watch', 'active',
    'rzev', '1700000000000|request.stuck|,"stuckSince":1');
  await redis.cmd('ZADD', `{${prefix}}:rzq`, '1', id);
  const line = /stored record unreadable/g;
  await until(async () => await redis.cmd('ZSCORE', `{${prefix}}:rzq`, id) === null,
    { timeoutMs: 20000, msg: 'taken off rzq' });
  assert.equal(await redis.cmd('HEXISTS', k, 'rzev'), 0);
  assert.equal(await redis.cmd('HGET', k, 'rec'), 'r-not-a-zlib-stream'); // left as it was
  assert.equal(await redis.cmd('HGET', k, 'seq'), '3');
  await new Promise((r) => setTimeout(r, 6000)); // another pass step
  assert.equal((d.proc.log().match(line) ?? []).length, 1, 'logged once');
});
