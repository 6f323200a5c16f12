// ws_burst.test.mjs - a burst of upstream websocket frames goes to Redis through a window
// (relay/ingest/upstream.c: APPLY_WINDOW observations being applied at once), not all at once:
// before, every frame of a burst became Redis commands at once, thousands queued on the one
// connection, and every delivery step and poll waited behind them (the 5,000 events/s bench
// row: deliveries fell to a few hundred per second while the ingest ran). The burst is made
// visible by pausing Redis (CLIENT PAUSE) while a fake upstream (node `ws`, in this file) sends
// 1,500 event frames: the daemon's statusrelay_redis_pending_commands stays near the window
// (before: ~1,500), and once Redis answers again every observation is applied (nothing lost).
// Real redis-server, the daemon, loopback only.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { WebSocketServer } from 'ws';
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';

const N = 1500;
const PAUSE_MS = 3000;
const ids = Array.from({ length: N }, (_, i) => `0x${(0xb0000 + i).toString(16).padStart(64, '0')}`);
let redis, server, wss, conn;
const subscribed = new Set();

before(async () => {
  redis = await startRedis();
  // the upstream: no status for anyone over HTTP (404), a websocket that greets and acks
  server = http.createServer((req, res) => { res.writeHead(404, { 'content-type': 'application/json' }); res.end('{"message":"not found","errorCode":"NOT_FOUND"}'); });
  wss = new WebSocketServer({ server });
  wss.on('connection', (ws) => {
    conn = ws;
    ws.on('message', (d) => {
      const m = JSON.parse(d.toString());
      if (m.type === 'subscribe') {
        subscribed.add(m.filters.id);
        ws.send(JSON.stringify({ type: 'subscribe', status: 'success', data: { event: 'request.status.updated', filters: { id: m.filters.id } } }));
      }
    });
    ws.on('error', () => {});
    ws.send(JSON.stringify({ type: 'connection', status: 'ready', data: { id: 'sock-burst' } }));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
});
after(async () => {
  for (const c of wss?.clients ?? []) c.terminate();
  await new Promise((r) => (server ? server.close(r) : r()));
  await redis?.stop();
});

const gauge = (text, name) => Number(text.match(new RegExp(`^${name.replace(/[{}"]/g, '\\$&')} (\\S+)$`, 'm'))?.[1] ?? NaN);

test('a burst of websocket frames waits in the relay, not in Redis, and all are applied', async () => {
  const port = server.address().port;
  const d = await startDaemon({
    redisUrl: redis.url, apiUrl: `http://127.0.0.1:${port}`, wsUrl: `ws://127.0.0.1:${port}/`, apiKey: 'burst-key',
    env: { STATUSRELAY_REDIS_PREFIX: 'wsburst' }, name: 'ws-burst-daemon',
  });
  const metrics = async () => (await fetch(d.url + '/metrics')).text();
  try {
    for (let i = 0; i < N; i += 500) assert.equal((await d.post('/v1/requests', { requestIds: ids.slice(i, i + 500) })).status, 201);
    await until(() => subscribed.size === N, { msg: `${N} subscribes`, timeoutMs: 20000 });
    await until(async () => gauge(await metrics(), 'statusrelay_redis_pending_commands') === 0, { msg: 'Redis idle', timeoutMs: 20000 });
    const acc0 = gauge(await metrics(), 'statusrelay_events_total{source="ws",outcome="accepted"}') || 0;

    assert.equal(await redis.cmd('CLIENT', 'PAUSE', String(PAUSE_MS), 'ALL'), 'OK');
    const t0 = Date.now();
    const now = Date.now();
    for (const [i, id] of ids.entries()) {
      conn.send(JSON.stringify({ event: 'request.status.updated', data: { requestId: id, status: 'pending', originChainId: 1, destinationChainId: 8453, inTxHashes: [], txHashes: [], updatedAt: now - 1000 + (i % 100) }, publishedAt: now }));
    }
    // every frame has reached the relay's core (they are answered by nothing while paused)
    await new Promise((r) => setTimeout(r, 1200));
    const pending = gauge(await metrics(), 'statusrelay_redis_pending_commands');
    assert.ok(Date.now() - t0 < PAUSE_MS - 300, 'read while Redis is still paused');
    console.log(`# ${N} frames sent while Redis was paused: ${pending} Redis commands pending in the relay`);
    assert.ok(pending < 300, `${pending} Redis commands queued during the burst (the window is 64 observations)`);

    // Redis answers again: every observation is applied, none lost, in order per request
    await until(async () => (gauge(await metrics(), 'statusrelay_events_total{source="ws",outcome="accepted"}') || 0) - acc0 >= N,
      { msg: `${N} accepted`, timeoutMs: 30000, stepMs: 200 });
    for (const id of [ids[0], ids[N >> 1], ids[N - 1]]) {
      const r = await d.get(`/v1/requests/${id}`);
      assert.equal(r.status, 200);
      assert.equal(r.body.status, 'pending');
      assert.equal(r.body.lastSource, 'ws');
    }
    assert.doesNotMatch(d.proc.log(), /observation not applied|observation dropped/);
  } finally {
    await d.stop();
  }
});
