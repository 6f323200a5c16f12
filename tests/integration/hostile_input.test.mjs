// hostile_input.test.mjs - issue 22 items 5-7: hostile input from receivers, the upstream and
// clients, each made on loopback against a real redis-server and `statusrelay serve`:
// a receiver answering with an oversized response head (dead-lettered after the schedule
// with error "protocol", not retried forever as a local failure), ...
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startRawServer, upstreamPayload, ingest, rid } from './lib/hooks.mjs';

const KEY = 'hostile-input-test-key';
let redis;
let d;
const cleanup = [];

before(async () => {
  redis = await startRedis();
  d = await startDaemon({
    redisUrl: redis.url, apiKey: KEY, name: 'hostile-daemon',
    env: { STATUSRELAY_REDIS_PREFIX: 'hostile', STATUSRELAY_RETRY_SCHEDULE: '0s,200ms,200ms' },
  });
});
after(async () => {
  for (const f of cleanup.reverse()) { try { await f(); } catch {} }
  await d?.stop();
  await redis?.stop();
});

const metric = async (re) => {
  const m = await (await fetch(d.url + '/metrics')).text();
  const v = re.exec(m);
  return v ? Number(v[1]) : 0;
};

test('a receiver answering with a 200 KB response header: attempts fail with "protocol" and the delivery goes dead', async () => {
  const big = 'a'.repeat(200 * 1024);
  const rx = await startRawServer((s) => {
    s.end(`HTTP/1.1 200 OK\r\nX-Big: ${big}\r\nContent-Length: 2\r\n\r\nok`);
  });
  cleanup.push(() => rx.stop());
  const local0 = await metric(/^statusrelay_webhook_local_failures_total (\d+)/m);
  const wh = await d.post('/v1/webhooks', { url: rx.url('/big-head'), filters: {} });
  assert.equal(wh.status, 201, wh.text);
  const r = rid('bighead');
  assert.equal(await ingest(d, KEY, upstreamPayload({ rid: r, status: 'pending' })), 200);
  const dead = await until(async () => {
    const x = await d.get(`/v1/webhooks/${wh.body.id}/deliveries?state=dead`);
    return x.status === 200 && x.body.deliveries.length === 1 ? x.body.deliveries[0] : null;
  }, { timeoutMs: 20000, msg: 'the delivery dead-lettered' });
  assert.equal(dead.requestId, r);
  assert.equal(dead.attempts.length, 3, JSON.stringify(dead.attempts));
  for (const a of dead.attempts) assert.equal(a.error, 'protocol', JSON.stringify(a));
  assert.equal(rx.hits(), 3, 'each attempt reached the receiver once');
  assert.equal(await metric(/^statusrelay_webhook_local_failures_total (\d+)/m), local0,
    'not counted as a local failure');
  await d.del(`/v1/webhooks/${wh.body.id}`);
});
