// delivery_log.test.mjs - the delivery log (issue 17): first attempts made by the fan-out
// without a record, a batch committed in one script, requests held behind an unfinished
// delivery, a Redis written by the previous delivery model, and kill -9 before a commit.
// Real redis-server, the daemon, helpers/hook_receiver; events injected through
// POST /v1/ingest/upstream with a valid upstream signature.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { until } from './lib/proc.mjs';
import { startReceiver, ingest, upstreamPayload, rid } from './lib/hooks.mjs';

const KEY = 'delivery-log-test-key';
const cleanup = [];
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });

const bodyOf = (x) => JSON.parse(x.body);
const ok2xx = (x) => x.status >= 200 && x.status < 300;

async function send(d, p, key = KEY) {
  assert.equal(await ingest(d, key, upstreamPayload(p)), 200, 'ingest accepted');
}

test('a failing event of a request holds its later events to that endpoint, not other requests\'', async () => {
  const redis = await startRedis();
  cleanup.push(() => redis.stop());
  // the first retry comes 1.5 s after the failed first attempt
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, args: ['--retry-schedule', '0s,1500ms,1500ms'] });
  cleanup.push(() => d.stop());
  const rx = await startReceiver({ script: ['/h=500'] });
  cleanup.push(() => rx.stop());
  const wh = (await d.post('/v1/webhooks', { url: rx.url('/h') })).body;
  const r1 = rid('held1');
  const r2 = rid('held2');
  const t = Date.now();
  await send(d, { rid: r1, status: 'pending', updatedAt: t });
  await until(() => rx.records().length >= 1, { msg: 'the first attempt of r1 (fails)' });
  await send(d, { rid: r1, status: 'success', updatedAt: t + 1000 });
  await send(d, { rid: r2, status: 'pending', updatedAt: t });
  // r2 is not held: delivered long before r1's retry
  await until(() => rx.records().some((x) => bodyOf(x).data.requestId === r2 && ok2xx(x)), { msg: 'r2 delivered' });
  const early = rx.records();
  assert.equal(early.filter((x) => bodyOf(x).data.requestId === r1).length, 1,
    'r1 seq 2 is held while seq 1 waits for its retry');
  const pend = await d.get(`/v1/webhooks/${wh.id}/deliveries?state=pending`);
  assert.deepEqual(pend.body.deliveries.map((x) => x.requestId).sort(), [r1, r1],
    'both events of r1 are listed pending');
  await until(() => rx.records().filter((x) => bodyOf(x).data.requestId === r1 && ok2xx(x)).length >= 2,
    { timeoutMs: 10000, msg: 'r1 delivered after the retry' });
  const mine = rx.records().filter((x) => bodyOf(x).data.requestId === r1);
  assert.deepEqual(mine.map((x) => [bodyOf(x).statusrelay.seq, ok2xx(x)]), [[1, false], [1, true], [2, true]]);
  const done = await d.get(`/v1/webhooks/${wh.id}/deliveries?state=delivered`);
  assert.equal(done.body.deliveries.length, 3, 'every delivered one is listed');
  const first = done.body.deliveries.find((x) => x.requestId === r1 && x.attempts.length === 2);
  assert.ok(first, 'r1 seq 1 shows both attempts');
  // r2 was delivered at its first attempt: no record of its own, a compact entry of the
  // endpoint's delivered log, listed with the same shape
  const quick = done.body.deliveries.find((x) => x.requestId === r2);
  assert.equal(quick.state, 'delivered');
  assert.equal(quick.webhookId, wh.id);
  assert.equal(quick.status, 'pending');
  assert.match(quick.eventId, /^evt_/);
  assert.equal(quick.id, `${quick.eventId}.${wh.id}`);
  assert.equal(quick.attempts.length, 1);
  assert.ok(quick.attempts[0].statusCode >= 200 && quick.attempts[0].statusCode < 300);
  assert.equal(quick.nextAttemptAt, null);
  assert.equal(typeof quick.finishedAt, 'number');
  assert.equal(first.attempts[0].statusCode, 500);
  assert.ok(first.attempts[1].statusCode >= 200 && first.attempts[1].statusCode < 300);
});

test('a Redis written by the previous delivery model: pending deliveries are delivered, dead ones kept and replayable', async () => {
  const fx = JSON.parse(fs.readFileSync(path.resolve('fixtures/redis/deliveries-v1.json'), 'utf8'));
  // endpoint A of the fixture points at 127.0.0.1:47913: listen there
  const got = [];
  const srv = http.createServer((req, res) => {
    let b = '';
    req.on('data', (c) => { b += c; });
    req.on('end', () => { got.push({ id: req.headers['webhook-id'], body: JSON.parse(b) }); res.end('ok'); });
  });
  await new Promise((res, rej) => { srv.once('error', rej); srv.listen(fx.port, '127.0.0.1', res); });
  cleanup.push(() => new Promise((res) => srv.close(res)));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sr-redis-v1-'));
  fs.copyFileSync(path.resolve('fixtures/redis/deliveries-v1.rdb'), path.join(dir, 'dump.rdb'));
  const redis = await startRedis({ dir });
  cleanup.push(() => redis.stop());
  const d = await startDaemon({ redisUrl: redis.url, apiKey: fx.apiKey, args: ['--retry-schedule', '0s,200ms,200ms'] });
  cleanup.push(() => d.stop());
  const [r1, r2, r3, r4] = fx.R;
  await until(() => got.length >= 3, { timeoutMs: 15000, msg: 'the 3 pending deliveries of A' });
  const order = got.filter((x) => x.body.data.requestId === r1).map((x) => x.body.statusrelay.seq);
  assert.deepEqual(order, [1, 2], 'r1 in seq order');
  assert.ok(got.some((x) => x.body.data.requestId === r2));
  const A = await d.get(`/v1/webhooks/${fx.A}/deliveries?state=delivered`);
  assert.equal(A.body.deliveries.length, 3);
  const dead = await d.get(`/v1/webhooks/${fx.B}/deliveries?state=dead`);
  assert.equal(dead.body.deliveries.length, 1, 'the dead delivery is kept');
  assert.equal(dead.body.deliveries[0].requestId, r3);
  const C = await d.get(`/v1/webhooks/${fx.C}/deliveries?state=delivered`);
  assert.equal(C.body.deliveries.length, 1, 'the delivered one is still listed');
  assert.equal(C.body.deliveries[0].requestId, r4);
  // the dead one is replayable: point B at the listener, enable it, replay dead
  const p = await fetch(`${d.url}/v1/webhooks/${fx.B}`, { method: 'PATCH', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ url: `http://127.0.0.1:${fx.port}/b`, enabled: true }) });
  assert.equal(p.status, 200);
  const rp = await d.post('/v1/replay', { dead: true });
  assert.equal(rp.status, 202, JSON.stringify(rp.body));
  await until(() => got.some((x) => x.body.data.requestId === r3), { msg: 'the dead one replayed' });
  // and new events flow through the delivery log
  await send(d, { rid: r2, status: 'success', updatedAt: Date.now() + 5000 }, fx.apiKey);
  await until(() => got.filter((x) => x.body.data.requestId === r2).length >= 2, { msg: 'a new event to A' });
});

test('kill -9 before a batch is committed: every (event, endpoint) arrives, duplicates only of attempts in flight', async () => {
  const args = ['--retry-schedule', '0s,200ms,400ms,1s,1s,1s', '--delivery-timeout', '2s', '--connect-timeout', '1s',
    '--delivery-lease', '3s'];
  const redis = await startRedis({ aof: true });
  cleanup.push(() => redis.stop());
  let d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, args });
  // slow answers: a batch stays open (not committed) while its first attempts are in flight
  const rx = await startReceiver({ delayMs: 400, minimal: true });
  cleanup.push(() => rx.stop());
  const E = 10, N = 30;
  for (let i = 0; i < E; i++) await d.post('/v1/webhooks', { url: rx.url(`/b${i}`) });
  for (let i = 0; i < N; i++) await send(d, { rid: rid(`kb${i}`), status: 'pending' });
  await until(() => rx.records().length >= 20, { msg: 'some deliveries before the kill' });
  d.proc.child.kill('SIGKILL');
  await d.proc.exited;
  await new Promise((res) => setTimeout(res, 500)); // answers in flight at the kill land
  const atKill = rx.records().length;
  d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, args });
  cleanup.push(() => d.stop());
  const key = (x) => `${x.path}|${x.id}`;
  await until(() => new Set(rx.records().map(key)).size >= E * N,
    { timeoutMs: 30000, msg: `${E * N} distinct (event, endpoint) pairs` });
  await new Promise((res) => setTimeout(res, 500));
  const recs = rx.records();
  const distinct = new Set(recs.map(key)).size;
  assert.equal(distinct, E * N);
  const dups = recs.length - distinct;
  console.log(`# kill -9 mid-batch: ${E * N} pairs, ${atKill} received before the kill, duplicates=${dups}`);
  assert.ok(dups <= atKill, 'only what was sent before the kill is sent again');
});
