// redis_bounds.test.mjs - Redis stays bounded and the Redis URL is handled with care (issue 15,
// medium 7 and the Redis low items): dead deliveries expire with their index entries, deleting
// an endpoint with thousands of deliveries leaves no key of it, the event retention age trims
// the stream and the per-request timelines, /readyz reports a Redis that refuses writes (and
// the fan-out's refused writes are logged once, not at every poll),
// --print-config hides the password, --check-config refuses bad and rediss:// URLs, and a
// Redis 6 ACL user in the URL connects. Real redis-server, daemon and receivers on loopback.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { BIN, until } from './lib/proc.mjs';
import { startReceiver, ingest, upstreamPayload, rid } from './lib/hooks.mjs';

const KEY = 'redis-bounds-test-api-key';
const cleanup = [];
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });

async function stack({ args = [], env = {} } = {}) {
  const redis = await startRedis();
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, args, env });
  cleanup.push(() => d.stop(), () => redis.stop());
  return { redis, d };
}

async function receiver(opts) {
  const rx = await startReceiver(opts);
  cleanup.push(() => rx.stop());
  return rx;
}

async function send(d, p) {
  assert.equal(await ingest(d, KEY, upstreamPayload(p)), 200, 'ingest accepted');
}

/** Every key of the test Redis matching a glob (SCAN to the end). */
async function scanKeys(redis, match) {
  const out = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.cmd('SCAN', cursor, 'MATCH', match, 'COUNT', 1000);
    cursor = next;
    out.push(...keys);
  } while (cursor !== '0');
  return out;
}

test('dead and skipped deliveries are deleted after STATUSRELAY_DEAD_RETENTION, with their listing and set entries', async () => {
  const { redis, d } = await stack({ args: ['--retry-schedule', '0s', '--dead-retention', '3s'] });
  const rx = await receiver({ script: ['/gone=410'] });
  const wh = (await d.post('/v1/webhooks', { url: rx.url('/gone') })).body;
  const r = rid('dead');
  await send(d, { rid: r, status: 'pending' }); // 410: dead, and the endpoint is disabled
  await until(async () => (await d.get(`/v1/webhooks/${wh.id}`)).body.enabled === false, { msg: 'disabled' });
  await send(d, { rid: r, status: 'success' }); // skipped while disabled
  const listed = await until(async () => {
    const l = (await d.get(`/v1/webhooks/${wh.id}/deliveries`)).body.deliveries;
    return l.length === 2 && l;
  }, { msg: 'dead and skipped deliveries listed' });
  const t0 = Date.now();
  assert.deepEqual(listed.map((x) => x.state).sort(), ['dead', 'skipped']);
  assert.equal(await redis.cmd('ZCARD', '{statusrelay}:dead'), 1);
  assert.equal(await redis.cmd('ZCARD', '{statusrelay}:skipped'), 1);
  for (const x of listed)
    assert.equal(await redis.cmd('EXISTS', `{statusrelay}:dl:${x.id}`), 1, 'the record exists while retained');
  await until(async () => (await d.get(`/v1/webhooks/${wh.id}/deliveries`)).body.deliveries.length === 0,
    { timeoutMs: 15000, msg: 'dead and skipped deliveries gone from the listing' });
  assert.ok(Date.now() - t0 >= 1500, `kept for about the retention (gone after ${Date.now() - t0} ms)`);
  assert.equal(await redis.cmd('ZCARD', '{statusrelay}:dead'), 0, 'dead set trimmed');
  assert.equal(await redis.cmd('ZCARD', '{statusrelay}:skipped'), 0, 'skipped set trimmed');
  for (const x of listed)
    assert.equal(await redis.cmd('EXISTS', `{statusrelay}:dl:${x.id}`), 0, 'record deleted');
  assert.equal(await redis.cmd('EXISTS', `{statusrelay}:dls:${wh.id}`), 0, 'listing entries deleted');
  assert.equal((await d.post('/v1/replay', { dead: true, dryRun: true })).body.count, 0);
});

test('deleting an endpoint with thousands of deliveries leaves no key of it; the other endpoint keeps its own', async () => {
  // first attempt fails, the retry is an hour away: every delivery keeps a record, an order
  // set per request and a queue entry - the most an endpoint can leave behind
  const { redis, d } = await stack({ args: ['--retry-schedule', '0s,1h'] });
  const rx = await receiver({ def: 500 });
  const gone = (await d.post('/v1/webhooks', { url: rx.url('/gone') })).body;
  const kept = (await d.post('/v1/webhooks', { url: rx.url('/kept') })).body;
  const N = 1600; // > 3 sweep batches of 500
  const jobs = [];
  for (let i = 0; i < N; i++) {
    jobs.push(send(d, { rid: rid(`del${i}`), status: 'pending' }));
    if (jobs.length >= 32) await Promise.all(jobs.splice(0));
  }
  await Promise.all(jobs);
  const T = '{statusrelay}';
  await until(async () => (await redis.cmd('ZCARD', `${T}:dls:${gone.id}`)) === N &&
    (await redis.cmd('ZCARD', `${T}:dls:${kept.id}`)) === N &&
    (await redis.cmd('ZCARD', `${T}:dq:${gone.id}`)) === N, { timeoutMs: 60000, msg: `${N} deliveries per endpoint, queued` });
  assert.equal((await scanKeys(redis, `${T}:order:${gone.id}:*`)).length, N);
  const t0 = Date.now();
  assert.equal((await d.del(`/v1/webhooks/${gone.id}`)).status, 204);
  const tDel = Date.now() - t0;
  assert.equal((await d.get(`/v1/webhooks/${gone.id}`)).status, 404, 'gone for users at once');
  const leftovers = async () => [
    ...await scanKeys(redis, `*${gone.id}*`),
  ];
  await until(async () => (await leftovers()).length === 0, { timeoutMs: 30000, msg: 'no key of the deleted endpoint' });
  assert.equal(await redis.cmd('ZCARD', `${T}:dls:${kept.id}`), N, 'the other endpoint keeps its listing');
  assert.equal((await scanKeys(redis, `${T}:dl:*.${kept.id}`)).length, N, '... and its records');
  assert.equal((await scanKeys(redis, `${T}:order:${kept.id}:*`)).length, N, '... and its order sets');
  console.log(`# endpoint delete: ${N} deliveries, DELETE answered in ${tDel} ms, all keys gone ${Date.now() - t0} ms after it`);
});

test('endpoint purge survives a restart half-way', async () => {
  const { redis, d } = await stack({ args: ['--retry-schedule', '0s,1h'] });
  const rx = await receiver({ def: 500 });
  const gone = (await d.post('/v1/webhooks', { url: rx.url('/gone') })).body;
  const N = 1200;
  const jobs = [];
  for (let i = 0; i < N; i++) {
    jobs.push(send(d, { rid: rid(`rs${i}`), status: 'pending' }));
    if (jobs.length >= 32) await Promise.all(jobs.splice(0));
  }
  await Promise.all(jobs);
  await until(async () => (await redis.cmd('ZCARD', `{statusrelay}:dq:${gone.id}`)) === N, { timeoutMs: 60000, msg: 'queued' });
  assert.equal((await d.del(`/v1/webhooks/${gone.id}`)).status, 204);
  d.proc.child.kill('SIGKILL'); // the sweep may not even have started
  await d.proc.exited;
  assert.equal(await redis.cmd('ZSCORE', '{statusrelay}:whgone', gone.id) !== null, true, 'the purge is remembered in Redis');
  // the endpoint's queue due again, as the reaper makes it when it returns the dead process's
  // leases: the new process's first claim (25 ms after start) then meets the deleted endpoint
  // before the sweep (5 s) does, and must leave nothing of it behind either (its order sets)
  await redis.cmd('ZADD', '{statusrelay}:due', '0', gone.id);
  const d2 = await startDaemon({ redisUrl: redis.url, apiKey: KEY });
  cleanup.push(() => d2.stop());
  await until(async () => (await scanKeys(redis, `*${gone.id}*`)).length === 0, { timeoutMs: 30000, msg: 'purged after the restart' });
});

test('STATUSRELAY_EVENT_RETENTION_AGE trims old events from the stream and the request timeline', async () => {
  const { redis, d } = await stack({ args: ['--event-retention-age', '3s'] });
  const r = rid('age');
  await send(d, { rid: r, status: 'waiting' });
  await send(d, { rid: r, status: 'pending' });
  const evs = async (q = '') => (await d.get(`/v1/events${q}`)).body.events;
  assert.equal((await evs()).length, 2);
  assert.equal((await evs(`?requestId=${r}`)).length, 2);
  const t0 = Date.now();
  await until(async () => (await redis.cmd('XLEN', '{statusrelay}:events')) === 0, { timeoutMs: 15000, msg: 'stream trimmed by age' });
  assert.ok(Date.now() - t0 >= 1500, 'events were kept for about the retention age');
  assert.equal((await evs()).length, 0);
  assert.equal((await evs(`?requestId=${r}`)).length, 0);
  assert.equal(await redis.cmd('EXISTS', `{statusrelay}:tl:${r}`), 0, 'the timeline index repaired itself on read');
  // the count bound still applies alongside: a new event is kept
  await send(d, { rid: r, status: 'success' });
  assert.equal((await evs()).length, 1);
  assert.equal((await d.get(`/v1/requests/${r}`)).status, 200, 'the request state is not an event: kept');
});

test('/readyz is 503 while Redis refuses writes (maxmemory), 200 again after', async () => {
  const { redis, d } = await stack();
  assert.equal((await d.get('/readyz')).status, 200);
  assert.equal(await redis.cmd('CONFIG', 'SET', 'maxmemory-policy', 'noeviction'), 'OK');
  assert.equal(await redis.cmd('CONFIG', 'SET', 'maxmemory', '1'), 'OK');
  try {
    const r = await until(async () => { const x = await d.get('/readyz'); return x.status === 503 && x; },
      { timeoutMs: 10000, msg: 'readyz 503 at maxmemory' });
    assert.equal(r.body.status, 'not_ready');
    assert.equal(r.body.redis, 'refusing_writes');
    assert.match(r.body.reason, /^OOM /);
    assert.notEqual(await ingest(d, KEY, upstreamPayload({ rid: rid('oom'), status: 'pending' })), 200, 'ingest refused too');
  } finally {
    await redis.cmd('CONFIG', 'SET', 'maxmemory', '0');
  }
  const ok = await until(async () => { const x = await d.get('/readyz'); return x.status === 200 && x; },
    { timeoutMs: 15000, msg: 'readyz 200 again' });
  assert.equal(ok.body.redis, 'up');
  assert.equal(ok.body.reason, undefined);
});

test('a Redis refusing writes while a fan-out batch waits to be written: one log line, not one per poll; written after', async () => {
  // short leases: an outcome dropped (reported before its batch was written) would show as a
  // second attempt within the test
  const { redis, d } = await stack({ env: { STATUSRELAY_DELIVERY_LEASE: '3s', STATUSRELAY_DELIVERY_TIMEOUT: '2500ms', STATUSRELAY_CONNECT_TIMEOUT: '1s' } });
  const rx = await receiver({ delayMs: 2000 });
  const wh = await d.post('/v1/webhooks', { url: rx.url('/oom') });
  assert.equal(wh.status, 201, wh.text);
  await send(d, { rid: rid('oomfan'), status: 'pending' });
  // the first attempt is at the receiver (answered in 2 s): Redis refuses writes before the
  // fan-out can record the batch, and the fan-out retries the write at every poll (50 ms)
  await until(() => rx.records().length === 1, { msg: 'first attempt sent' });
  assert.equal(await redis.cmd('CONFIG', 'SET', 'maxmemory-policy', 'noeviction'), 'OK');
  assert.equal(await redis.cmd('CONFIG', 'SET', 'maxmemory', '1'), 'OK');
  const failed = () => (d.proc.log().match(/msg="webhook fan-out (script|check) failed"/g) ?? []).length;
  try {
    await until(() => failed() > 0, { msg: 'the fan-out write refused', timeoutMs: 15000 });
    await new Promise((r) => setTimeout(r, 2000)); // ~40 more polls refused
    assert.match(d.proc.log(), /msg="webhook fan-out script failed" err="OOM [^"]*" suppressed=0\n/);
    assert.equal(failed(), 1, 'one line while it keeps failing (the next at most 10 s later, with suppressed=N)');
  } finally {
    await redis.cmd('CONFIG', 'SET', 'maxmemory', '0');
  }
  // written once Redis accepts writes again, with the outcome that came meanwhile: delivered
  // after its one attempt - not recorded as in flight and sent again when its lease ran out
  const dl = await until(async () => (await d.get(`/v1/webhooks/${wh.body.id}/deliveries?state=delivered`)).body.deliveries[0],
    { msg: 'the delivery recorded', timeoutMs: 20000 });
  assert.equal(dl.attempts.length, 1);
  await new Promise((r) => setTimeout(r, 4000)); // past the lease
  assert.equal(rx.records().length, 1, 'one attempt: nothing sent twice');
});

function cfg(url, flag) {
  return spawnSync(BIN, ['serve', flag], { env: { ...process.env, STATUSRELAY_REDIS_URL: url }, encoding: 'utf8' });
}

test('--print-config hides the Redis password; --check-config refuses bad URLs and rediss://', () => {
  const p = cfg('redis://alice:hunter2-secret@127.0.0.1:6379/3', '--print-config');
  assert.equal(p.status, 0, p.stderr);
  assert.match(p.stdout, /^STATUSRELAY_REDIS_URL=redis:\/\/alice:\*\*\*@127\.0\.0\.1:6379\/3$/m);
  assert.doesNotMatch(p.stdout + p.stderr, /hunter2/);
  const legacy = cfg('redis://hunter2-secret@127.0.0.1:6379', '--print-config');
  assert.match(legacy.stdout, /^STATUSRELAY_REDIS_URL=redis:\/\/\*\*\*@127\.0\.0\.1:6379$/m);
  for (const bad of ['redis://:hunter2-secret@127.0.0.1:99999/0', 'redis://:hunter2-secret@127.0.0.1:6379/x',
    'redis://', 'unix://relative.sock', 'http://127.0.0.1:6379']) {
    const r = cfg(bad, '--check-config');
    assert.equal(r.status, 2, `${bad}: ${r.stdout}${r.stderr}`);
    assert.match(r.stderr, /^statusrelay: invalid setting STATUSRELAY_REDIS_URL: .+$/m, bad);
    assert.doesNotMatch(r.stderr, /hunter2/, bad);
  }
  const tls = cfg('rediss://:hunter2-secret@redis.example:6380/0', '--check-config');
  assert.equal(tls.status, 2);
  assert.match(tls.stderr, /STATUSRELAY_REDIS_URL: rediss:\/\/ \(TLS\) is not supported: .*hiredis.*tunnel/);
  assert.doesNotMatch(tls.stderr, /hunter2/);
  assert.equal(cfg('redis://u%40x:p%3Aw@127.0.0.1:6379/0', '--check-config').status, 0, 'percent-encoded user and password');
  assert.equal(cfg('unix:///tmp/redis.sock?db=2', '--check-config').status, 0);
});

test('a Redis 6 ACL user in the URL connects (AUTH user password); a wrong password does not', async () => {
  const redis = await startRedis();
  cleanup.push(() => redis.stop());
  assert.equal(await redis.cmd('ACL', 'SETUSER', 'relay', 'on', '>relay-pass', '~*', '&*', '+@all'), 'OK');
  const d = await startDaemon({ redisUrl: `redis://relay:relay-pass@127.0.0.1:${redis.port}/0`, apiKey: KEY });
  cleanup.push(() => d.stop());
  const r = await d.get('/readyz');
  assert.equal(r.status, 200);
  assert.equal(r.body.redis, 'up');
  const clients = await redis.cmd('CLIENT', 'LIST');
  assert.match(clients, /user=relay /, 'the daemon is connected as the ACL user');
  const bad = await startDaemon({ redisUrl: `redis://relay:wrong@127.0.0.1:${redis.port}/0`, apiKey: KEY, waitReady: false });
  cleanup.push(() => bad.stop());
  await until(() => /redis handshake failed/.test(bad.proc.log()), { msg: 'handshake refused' });
  assert.equal((await bad.get('/readyz')).status, 503);
  assert.doesNotMatch(bad.proc.log(), /wrong@|relay:wrong/, 'no password in the log');
});

test('STATUSRELAY_REQUEST_RETENTION forgets idle requests whose watch ended; one seen again starts anew with event ids it never had', async () => {
  const { redis, d } = await stack({ args: ['--request-retention', '3s', '--settled-watch', '1s'] });
  const rx = await receiver({ def: 200 });
  await d.post('/v1/webhooks', { url: rx.url('/rr') });
  const old = rid('rr-old'); // settled: its watch ends after 1 s
  const kept = rid('rr-kept'); // active (pending): watched, so kept however idle
  await send(d, { rid: old, status: 'pending' });
  await send(d, { rid: old, status: 'success' });
  await send(d, { rid: kept, status: 'pending' });
  const hooksOf = (id) => rx.records().filter((x) => JSON.parse(x.body).data.requestId === id);
  await until(() => hooksOf(old).length === 2, { msg: 'the first life delivered' });
  const firstIds = hooksOf(old).map((x) => x.headers['webhook-id']);
  const t0 = Date.now();
  await until(async () => (await d.get(`/v1/requests/${old}`)).status === 404, { timeoutMs: 30000, msg: 'the idle request forgotten' });
  assert.ok(Date.now() - t0 >= 1500, 'kept for about the retention');
  assert.deepEqual(await scanKeys(redis, `*${old}*`), [], 'no key names it');
  assert.equal(await redis.cmd('ZSCORE', '{statusrelay}:ct', old), null);
  assert.equal(await redis.cmd('ZSCORE', '{statusrelay}:st:success', old), null);
  assert.equal((await d.get(`/v1/requests/${kept}`)).status, 200, 'the watched request is kept');
  assert.equal((await d.get('/v1/requests')).body.requests.some((r) => r.requestId === old), false, 'not listed');
  // the upstream reverses it: a new record, seq 1 again, and a webhook the receiver cannot
  // mistake for one it already has
  await send(d, { rid: old, status: 'refund' });
  const st = (await d.get(`/v1/requests/${old}`)).body;
  assert.equal(st.status, 'refund');
  assert.equal(st.seq, 1);
  await until(() => hooksOf(old).length === 3, { msg: 'the reversal delivered' });
  const again = hooksOf(old)[2];
  assert.equal(JSON.parse(again.body).data.status, 'refund');
  assert.ok(!firstIds.includes(again.headers['webhook-id']), `a new webhook-id (${again.headers['webhook-id']} vs ${firstIds})`);
});
