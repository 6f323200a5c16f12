// request_index.test.mjs - no {P}:all (issue 24, Redis memory per request): every request is
// in {P}:ct (by creation time: its facts' createdAt, first seen until then), which the
// listing GET /v1/requests pages, oldest CREATED first like search, and the status listings
// order the same way (the {P}:st:<status> members take the creation time: the apply step on a
// status change, the facts when createdAt is learned). The retention sweep scans {P}:ct and
// still deletes by first sighting: a request created before the cutoff but first seen after
// it is kept (and gone once its first sighting is old), without stalling the scan. Rolling
// upgrade: an older version's {P}:all is walked once by a new process (ids only it holds are
// copied into {P}:ct) and drains with the retention. Real redis-server, simulator, daemons.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';
import { ingest, upstreamPayload, rid } from './lib/hooks.mjs';

const KEY = 'request-index-key';
const cleanup = [];
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function stack(prefix, env = {}) {
  const sim = await startSim({ apiKey: KEY, seed: 11, rateLimit: 0 });
  const redis = await startRedis();
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, apiUrl: sim.url, wsUrl: sim.wsUrlWithKey,
    name: `rqix-${prefix}`, env: { STATUSRELAY_REDIS_PREFIX: prefix, ...env } });
  cleanup.push(() => sim.stop(), () => redis.stop(), () => d.stop());
  return { sim, redis, d, P: `{${prefix}}` };
}

/** Every id GET /v1/requests lists (query qs), following the cursor one by one. */
async function listing(d, qs = '') {
  const ids = [];
  let cursor = null;
  for (let pages = 0; pages < 50; pages++) {
    const r = await d.get(`/v1/requests?limit=1${qs}${cursor ? `&cursor=${cursor}` : ''}`);
    assert.equal(r.status, 200, r.text);
    ids.push(...r.body.requests.map((o) => o.requestId));
    cursor = r.body.cursor;
    if (!cursor) return ids;
  }
  throw new Error('too many pages');
}

/** Track id and wait for its facts (read by id when first seen): its createdAt. */
async function trackWithFacts(d, id) {
  assert.equal((await d.post('/v1/requests', { requestId: id })).status, 201);
  const b = await until(async () => {
    const g = await d.get(`/v1/requests/${id}`);
    return g.status === 200 && typeof g.body?.request?.createdAt === 'number' && g.body.status && g.body;
  }, { msg: `${id}: facts`, timeoutMs: 15000 });
  return b;
}

test('no {P}:all: the listing is oldest created first, also by status, a late-seen request in its creation place', async () => {
  const { sim, redis, d, P } = await stack('rqix1');
  const mk = () => sim.control('/requests', { path: ['waiting', 'pending', 'success'], stepMs: 0, autoHashes: true });
  const a = await mk();
  await sleep(300);
  const b = await mk();
  await sleep(300);
  const c = await mk();
  // first seen: b, then a (created before b), then c
  const fb = await trackWithFacts(d, b.id);
  await sleep(20);
  const fa = await trackWithFacts(d, a.id);
  await sleep(20);
  await trackWithFacts(d, c.id);
  assert.ok(fa.request.createdAt < fb.request.createdAt, 'a created first');
  assert.ok(fa.firstSeenAt > fb.firstSeenAt, 'b seen first');
  assert.deepEqual(await listing(d), [a.id, b.id, c.id], 'oldest created first');
  assert.deepEqual(await listing(d, '&status=waiting'), [a.id, b.id, c.id], 'status waiting: the same order');
  // a status change moves the member with its creation time: b changes first, a after it
  for (const id of [b.id, a.id]) {
    await sim.control(`/requests/${id}/advance`, {});
    await until(async () => (await d.get(`/v1/requests/${id}`)).body?.status === 'pending',
      { msg: `${id} pending`, timeoutMs: 15000 });
  }
  assert.deepEqual(await listing(d, '&status=pending'), [a.id, b.id], 'status pending: by creation');
  assert.deepEqual(await listing(d, '&status=waiting'), [c.id]);
  assert.equal(await redis.cmd('EXISTS', `${P}:all`), 0, 'no {P}:all');
  for (const [id, f] of [[a.id, fa], [b.id, fb]]) {
    assert.equal(Number(await redis.cmd('ZSCORE', `${P}:ct`, id)), f.request.createdAt);
    assert.equal(Number(await redis.cmd('HGET', `${P}:req:${id}`, 'cx')), f.request.createdAt, 'cx: its ct score');
  }
});

test('the sweep deletes an old request and keeps one created before the cutoff but first seen after it', async () => {
  const { sim, redis, d, P } = await stack('rqix2', { STATUSRELAY_REQUEST_RETENTION: '3s', STATUSRELAY_SETTLED_WATCH: '1s' });
  const mk = () => sim.control('/requests', { path: ['success'], stepMs: 0, autoHashes: true });
  const late = await mk(); // created first, first seen ~2.5 s after `old`
  await sleep(200);
  const old = await mk();
  const fo = await trackWithFacts(d, old.id);
  await sleep(Math.max(0, fo.firstSeenAt + 2500 - Date.now()));
  const fl = await trackWithFacts(d, late.id);
  assert.ok(fl.request.createdAt < fo.request.createdAt, 'late: created before old');
  // old goes once first seen, last changed and last event 3 s ago (its watch ended after 1 s);
  // late sits before it in {P}:ct, created before the cutoff: skipped, the scan goes on
  await until(async () => (await d.get(`/v1/requests/${old.id}`)).status === 404,
    { msg: 'the old request forgotten', timeoutMs: 20000 });
  const at = Date.now();
  assert.ok(at - fl.firstSeenAt < 3000, 'late still within the retention since its first sighting');
  assert.equal((await d.get(`/v1/requests/${late.id}`)).status, 200, 'late kept');
  assert.ok(fl.request.createdAt < at - 3000, 'late created before the cutoff');
  assert.equal(await redis.cmd('ZSCORE', `${P}:ct`, old.id), null);
  assert.equal(await redis.cmd('ZSCORE', `${P}:st:success`, old.id), null);
  assert.deepEqual(await listing(d), [late.id]);
  assert.equal(await redis.cmd('EXISTS', `${P}:all`), 0, 'no {P}:all while requests are kept');
  // re-examined by later passes: gone once its first sighting is old too
  await until(async () => (await d.get(`/v1/requests/${late.id}`)).status === 404,
    { msg: 'the late-seen request forgotten', timeoutMs: 20000 });
  assert.ok(Date.now() - fl.firstSeenAt >= 3000, 'kept for the retention since first seen');
  assert.equal(Number(await redis.cmd('ZCARD', `${P}:ct`)), 0);
});

test('rolling upgrade: an older version\'s {P}:all is walked once (ids only it holds listed again) and drains with the retention', async () => {
  const redis = await startRedis();
  cleanup.push(() => redis.stop());
  const prefix = 'rqix3', P = `{${prefix}}`;
  const opts = (name, env = {}) => ({ redisUrl: redis.url, apiKey: KEY, name,
    env: { STATUSRELAY_REDIS_PREFIX: prefix, ...env } });
  const d1 = await startDaemon(opts('rqix3-a', { STATUSRELAY_SETTLED_WATCH: '1s' }));
  const only = rid('onlyall'), gone = rid('gone'), both = rid('both');
  const t = Date.now();
  for (const [id, status] of [[only, 'pending'], [gone, 'success'], [both, 'pending']])
    assert.equal(await ingest(d1, KEY, upstreamPayload({ rid: id, status, updatedAt: t })), 200);
  await d1.stop();
  // as an older version left them: every request in {P}:all by first seen, and `only` stored
  // by a version before {P}:ct (not there, no "cx")
  for (const id of [only, gone, both])
    await redis.cmd('ZADD', `${P}:all`, await redis.cmd('HGET', `${P}:req:${id}`, 'first'), id);
  await redis.cmd('ZREM', `${P}:ct`, only);
  await redis.cmd('HDEL', `${P}:req:${only}`, 'cx');
  const d2 = await startDaemon(opts('rqix3-b', { STATUSRELAY_REQUEST_RETENTION: '2s', STATUSRELAY_SETTLED_WATCH: '1s' }));
  cleanup.push(() => d2.stop());
  await until(() => /older request index walked.*key=\{rqix3\}:all copied=1/.test(d2.proc.log()),
    { msg: 'the walk of {P}:all logged', timeoutMs: 20000 });
  assert.equal(await redis.cmd('ZSCORE', `${P}:ct`, only), await redis.cmd('HGET', `${P}:req:${only}`, 'first'));
  // the settled one goes with the retention, from {P}:all too; the active ones stay listed
  await until(async () => (await d2.get(`/v1/requests/${gone}`)).status === 404,
    { msg: 'the settled request forgotten', timeoutMs: 20000 });
  assert.equal(await redis.cmd('ZSCORE', `${P}:all`, gone), null, 'left {P}:all with its record');
  assert.deepEqual((await listing(d2)).sort(), [only, both].sort());
  // the next event of `only` gives its hash the creation-time score
  assert.equal(await ingest(d2, KEY, upstreamPayload({ rid: only, status: 'success', updatedAt: t + 1 })), 200);
  assert.equal(await redis.cmd('HGET', `${P}:req:${only}`, 'cx'), await redis.cmd('ZSCORE', `${P}:ct`, only));
  assert.equal(await redis.cmd('ZSCORE', `${P}:st:success`, only), await redis.cmd('ZSCORE', `${P}:ct`, only));
});
