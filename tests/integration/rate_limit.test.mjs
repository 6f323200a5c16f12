// rate_limit.test.mjs - per-endpoint "rateLimit" (DESIGN "Event types and routing"): at most
// that many deliveries per second across all processes, bursts of at most that many. Real
// redis-server, two daemons on it, the C hook receiver (it records each request's arrival
// time in ms), events injected through signed POST /v1/ingest/upstream.
//
// The bound checked is exact: with rateLimit N the receiver never sees more than N arrivals
// in any 1000 ms window (no tolerance: the relay spaces its grants by 1150 ms - a second, the
// 100 ms a grant may take to be sent, 50 ms for network delays that differ between sends -
// so loopback jitter cannot push a sixth arrival into a window; docs/webhooks.md).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { BIN, until } from './lib/proc.mjs';
import { startReceiver, ingest, upstreamPayload, rid, patch, maxPerSecond } from './lib/hooks.mjs';

const KEY = 'rate-limit-test-api-key';
const run = promisify(execFile);
const cleanup = [];
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });

async function daemon(redis, name, env = {}) {
  const args = ['--retry-schedule', '0s,100ms,100ms,100ms,100ms,100ms'];
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, name, args, env });
  cleanup.push(() => d.stop());
  return d;
}

async function setup(ndaemons, env = {}) {
  const redis = await startRedis();
  cleanup.push(() => redis.stop());
  const ds = [];
  for (let i = 0; i < ndaemons; i++) ds.push(await daemon(redis, `rl-${i}`, env));
  const rx = await startReceiver();
  cleanup.push(() => rx.stop());
  return { redis, ds, rx };
}

async function create(d, body) {
  const r = await d.post('/v1/webhooks', body);
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body;
}

async function metric(d, name) {
  const r = await d.get('/metrics');
  const m = new RegExp(`^statusrelay_${name} (\\d+)$`, 'm').exec(r.text);
  return m ? Number(m[1]) : 0;
}

test('rateLimit 5 with two daemons: at most 5 in any second, all 60 arrive, the unlimited endpoint is not slowed', async () => {
  const { ds: [a, b], rx } = await setup(2);
  const lim = await create(a, { url: rx.url('/lim'), rateLimit: 5 });
  const free = await create(a, { url: rx.url('/free') });
  assert.equal(lim.rateLimit, 5);
  assert.equal(free.rateLimit, null);
  // both daemons know both endpoints (a GET reloads the set) before any event exists
  for (const d of [a, b]) {
    const l = await d.get('/v1/webhooks');
    assert.deepEqual(l.body.webhooks.map((w) => w.rateLimit).sort(), [5, null].sort());
  }
  const t0 = Date.now();
  const sends = [];
  for (let i = 0; i < 60; i++)
    sends.push(ingest(i % 2 ? b : a, KEY, upstreamPayload({ rid: rid(`rl${i}`), status: 'pending' })));
  assert.deepEqual(new Set(await Promise.all(sends)), new Set([200]));
  const of = (p) => rx.records().filter((x) => x.path === p);
  await until(() => of('/free').length >= 60, { timeoutMs: 10000, msg: '60 unlimited deliveries' });
  const freeDone = Math.max(...of('/free').map((x) => x.t));
  const limAtFreeDone = of('/lim').filter((x) => x.t <= freeDone).length;
  // the backlog shows as waiting on the limit (both daemons see the same queue)
  const waiting = await until(async () => {
    const t = (await a.get('/metrics')).text;
    const m = new RegExp(`^statusrelay_webhook_rate_limit_waiting\\{webhook="${lim.id}"\\} (\\d+)$`, 'm').exec(t);
    return m && Number(m[1]) > 0 && Number(m[1]);
  }, { timeoutMs: 5000, msg: 'rate_limit_waiting gauge > 0' });
  assert.ok(waiting <= 60, `waiting ${waiting}`);
  await until(() => new Set(of('/lim').map((x) => x.headers['webhook-id'])).size >= 60,
    { timeoutMs: 40000, stepMs: 200, msg: '60 limited deliveries' });
  const limRecs = of('/lim');
  const limTimes = limRecs.map((x) => x.t);
  const limDone = Math.max(...limTimes);
  const peak = maxPerSecond(limTimes);
  console.log(`unlimited: 60 in ${freeDone - t0} ms; limited: ${limRecs.length} in ${limDone - t0} ms, ` +
    `peak ${peak} in a second, ${limAtFreeDone} before the unlimited were done`);
  assert.ok(peak <= 5, `at most 5 limited deliveries in any 1 s window (saw ${peak})`);
  assert.equal(new Set(of('/free').map((x) => x.headers['webhook-id'])).size, 60);
  // 60 at <= 5 per second take at least 11 s; the unlimited endpoint is done long before
  assert.ok(limDone - t0 >= 11000, `the limit held the limited endpoint back (${limDone - t0} ms)`);
  assert.ok(freeDone - t0 < 5000, `the unlimited endpoint was not slowed (${freeDone - t0} ms)`);
  assert.ok(limAtFreeDone <= 25, `the limited endpoint had not drained when the unlimited was done (${limAtFreeDone})`);
  // both processes sent to the limited endpoint (the limit is shared, not per process)
  const attempts = [await metric(a, 'webhook_attempts_total'), await metric(b, 'webhook_attempts_total')];
  assert.ok(attempts[0] > 0 && attempts[1] > 0, `both daemons made attempts (${attempts})`);
  assert.ok(await metric(a, 'webhook_rate_limited_total') + await metric(b, 'webhook_rate_limited_total') > 0,
    'the rate-limited counter moved');
});

test('rateLimit with 3 partitions and two daemons: one limit across the partitions', async () => {
  const { ds: [a, b], rx } = await setup(2, { STATUSRELAY_PARTITIONS: '3' });
  await create(a, { url: rx.url('/p'), rateLimit: 4 });
  for (const d of [a, b]) await d.get('/v1/webhooks');
  for (let i = 0; i < 24; i++)
    assert.equal(await ingest(i % 2 ? b : a, KEY, upstreamPayload({ rid: rid(`pt${i}`), status: 'pending' })), 200);
  const of = () => rx.records().filter((x) => x.path === '/p');
  await until(() => new Set(of().map((x) => x.headers['webhook-id'])).size >= 24,
    { timeoutMs: 30000, stepMs: 200, msg: '24 deliveries over 3 partitions' });
  const peak = maxPerSecond(of().map((x) => x.t));
  assert.ok(peak <= 4, `at most 4 in any 1 s window across partitions (saw ${peak})`);
});

test('Redis pauses: stale grants are not used, every delivery arrives once as one attempt', async () => {
  const { redis, ds: [d], rx } = await setup(1);
  const wh = await create(d, { url: rx.url('/pz'), rateLimit: 5 });
  await d.get('/v1/webhooks');
  for (let i = 0; i < 20; i++)
    assert.equal(await ingest(d, KEY, upstreamPayload({ rid: rid(`pz${i}`), status: 'pending' })), 200);
  // scripts are writes: a take sent during a pause is answered up to 400 ms later, past its
  // 100 ms send allowance, so what it grants goes back unused (or, if its claim was out
  // already, the claimed deliveries go back unsent: wh_done.lua "local", not an attempt)
  for (let i = 0; i < 8; i++) {
    await redis.cmd('CLIENT', 'PAUSE', '400', 'WRITE');
    await new Promise((r) => setTimeout(r, 600));
  }
  const of = () => rx.records().filter((x) => x.path === '/pz');
  await until(() => new Set(of().map((x) => x.headers['webhook-id'])).size >= 20,
    { timeoutMs: 30000, stepMs: 200, msg: '20 deliveries despite the pauses' });
  assert.equal(of().length, 20, 'each sent once');
  assert.ok(maxPerSecond(of().map((x) => x.t)) <= 5, 'at most 5 in any second');
  const r = await d.get(`/v1/webhooks/${wh.id}/deliveries?state=delivered&limit=100`);
  assert.equal(r.body.deliveries.length, 20);
  for (const x of r.body.deliveries)
    assert.equal(x.attempts.length, 1, 'one attempt each');
});

test('PATCH rateLimit to null releases the backlog; retries count against the limit', async () => {
  const { ds: [d], rx } = await setup(1);
  const wh = await create(d, { url: rx.url('/slow'), rateLimit: 1 });
  await d.get('/v1/webhooks');
  for (let i = 0; i < 30; i++)
    assert.equal(await ingest(d, KEY, upstreamPayload({ rid: rid(`bk${i}`), status: 'pending' })), 200);
  const of = () => rx.records().filter((x) => x.path === '/slow');
  await until(() => of().length >= 2, { timeoutMs: 10000, msg: 'two limited deliveries' });
  assert.ok(maxPerSecond(of().map((x) => x.t)) <= 1, 'one per second');
  const p = await patch(d, `/v1/webhooks/${wh.id}`, { rateLimit: null });
  assert.equal(p.status, 200, JSON.stringify(p.body));
  assert.equal(p.body.rateLimit, null);
  const t = Date.now();
  await until(() => new Set(of().map((x) => x.headers['webhook-id'])).size >= 30,
    { timeoutMs: 10000, msg: 'the backlog drains once the limit is gone' });
  assert.ok(Date.now() - t < 8000, 'drained far faster than 1 per second');
  assert.equal((await d.get(`/v1/webhooks/${wh.id}`)).body.rateLimit, null);

  // retries (100 ms apart in this test's schedule): the receiver fails the first 10
  // attempts, limit 2: attempts, first ones and retries together, stay within 2 per second
  await rx.setScript('/retry=500,500,500,500,500,500,500,500,500,500');
  const r2 = await create(d, { url: rx.url('/retry'), rateLimit: 2 });
  await d.get('/v1/webhooks');
  for (let i = 0; i < 5; i++)
    assert.equal(await ingest(d, KEY, upstreamPayload({ rid: rid(`rt${i}`), status: 'pending' })), 200);
  const rr = () => rx.records().filter((x) => x.path === '/retry');
  await until(() => rr().length >= 12, { timeoutMs: 20000, msg: '12 attempts incl. retries' });
  const peak = maxPerSecond(rr().map((x) => x.t));
  assert.ok(peak <= 2, `attempts and retries within 2 per second (saw ${peak})`);
  assert.equal(r2.rateLimit, 2);
});

test('rateLimit validation: 400 for anything but null or a whole number 1..10000; CLI --rate-limit', async () => {
  const { ds: [d], rx } = await setup(1);
  for (const bad of [0, -1, 1.5, 10001, '5', true, [], {}]) {
    const r = await d.post('/v1/webhooks', { url: rx.url('/v'), rateLimit: bad });
    assert.equal(r.status, 400, `rateLimit ${JSON.stringify(bad)}`);
    assert.equal(r.body.error.code, 'invalid_request');
    assert.match(r.body.message, /^rateLimit is null \(no limit\) or a whole number/);
  }
  const ok = await create(d, { url: rx.url('/v'), rateLimit: 10000 });
  assert.equal(ok.rateLimit, 10000);
  const none = await create(d, { url: rx.url('/v'), rateLimit: null });
  assert.equal(none.rateLimit, null);
  const bad = await patch(d, `/v1/webhooks/${ok.id}`, { rateLimit: 0 });
  assert.equal(bad.status, 400);
  const p = await patch(d, `/v1/webhooks/${ok.id}`, { rateLimit: 7 });
  assert.equal(p.status, 200);
  assert.equal(p.body.rateLimit, 7);
  const list = await d.get('/v1/webhooks');
  assert.equal(list.body.webhooks.find((w) => w.id === ok.id).rateLimit, 7);

  const env = { ...process.env, STATUSRELAY_ADMIN_URL: d.url };
  const cli = (...args) => run(BIN, args, { env });
  const added = await cli('webhooks', 'add', rx.url('/cli'), '--rate-limit', '3', '--json');
  const id = JSON.parse(added.stdout).id;
  assert.equal(JSON.parse(added.stdout).rateLimit, 3);
  assert.match((await cli('webhooks', 'show', id)).stdout, /^rate limit\s+3\/s$/m);
  assert.match((await cli('webhooks', 'list')).stdout, new RegExp(`^${id}\\s+enabled\\s+standard\\s+3/s\\s`, 'm'));
  await cli('webhooks', 'update', id, '--rate-limit', 'none');
  assert.match((await cli('webhooks', 'show', id)).stdout, /^rate limit\s+-$/m);
  await assert.rejects(cli('webhooks', 'update', id, '--rate-limit', '0'), /--rate-limit must be an integer from 1 to 10000/);
});
