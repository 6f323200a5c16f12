// dash_batch.test.mjs - a dashboard client that falls behind gets its queued frames in
// batches (issue 26, "dashboards, every event to every client": frames per client per loop
// turn): several websocket messages per socket write, each still one whole JSON message, in
// order, none lost; the stats frame's framesOut / frameWrites show it. Real redis-server and
// daemon on loopback; the client is the `ws` library with its socket paused (the kernel
// buffers fill, then the server's queue), so how many frames wait does not depend on speed.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { ingest, upstreamPayload, rid } from './lib/hooks.mjs';
import { EVENT, client, sub, subscribed } from './lib/dash_client.mjs';

const KEY = 'dash-batch-key';
const cleanup = [];
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });

async function stats(c) {
  if (!c.statsOn) { c.send({ type: 'subscribe', event: 'statusrelay.stats' }); c.statsOn = true; }
  const n = c.ofType('stats').length;
  await until(() => c.ofType('stats').length > n, { timeoutMs: 4000, msg: 'a stats frame' });
  return c.ofType('stats').at(-1).data.dashboard;
}

test('a client behind by many frames gets them in batches: whole messages, in order, fewer writes than frames', async () => {
  const redis = await startRedis();
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY });
  cleanup.push(() => d.stop(), () => redis.stop());
  const c = client(d.wsUrl);
  await c.ready;
  assert.equal((await subscribed(c, sub(null, { snapshotLimit: 0 }))).status, 'success');
  const s = client(d.wsUrl);
  await s.ready;
  const before = await stats(s);
  c.ws._socket.pause(); // stop reading: the kernel buffers fill, then the server's queue
  // N events of N requests, ~4 KB each (tracking metadata): ~1.6 MB, far more than the
  // socket buffers hold (64 KiB send buffer, the client's receive window), under the queue's
  // 4 MiB and 1024 frames; a few small ones (untracked) between them
  const N = 400;
  const ids = [];
  const t0 = Date.now() - 60_000;
  for (let i = 0; i < N; i++) {
    const id = rid(`batch${i}`);
    ids.push(id);
    if (i % 10 !== 9)
      assert.equal((await d.post('/v1/requests', { requestId: id, metadata: { i, blob: 'x'.repeat(3800) } })).status, 201);
    assert.equal(await ingest(d, KEY, upstreamPayload({ rid: id, status: 'waiting', updatedAt: t0 + i })), 200);
  }
  // every event routed to the client (queued or in the socket buffers), then it reads again
  await until(async () => (await stats(s)).deliveries - before.deliveries >= N, { timeoutMs: 30000, msg: 'all routed' });
  const queued = (await stats(s)).queued;
  c.ws._socket.resume();
  await until(() => c.events().length >= N, { timeoutMs: 30000, msg: `${N} events` });
  assert.equal(c.closed, null, 'still open');
  assert.equal(c.frames.filter((f) => f.raw !== undefined).length, 0, 'every message is whole JSON');
  const got = c.events().map((f) => f.data.requestId);
  assert.deepEqual(got, ids, 'every event once, in order');
  for (const [i, f] of c.events().entries())
    if (i % 10 !== 9) assert.equal(f.statusrelay.metadata.i, i, 'its own metadata');
  const after = await stats(s);
  const frames = after.framesOut - before.framesOut, writes = after.frameWrites - before.frameWrites;
  console.log(`# frames=${frames} writes=${writes} queued while paused=${queued}`);
  assert.ok(queued > 0, 'frames waited in the server queue');
  assert.ok(Number.isInteger(writes) && writes > 0, `frameWrites ${after.frameWrites}`);
  // the frames that waited went out many per write; those written while the buffers were
  // filling (~200 KB: ~50 frames) and the stats frames one each
  assert.ok(writes < frames / 2, `${writes} writes for ${frames} frames`);
  c.close();
  s.close();
  assert.doesNotMatch(d.proc.log(), /Sanitizer|runtime error|level=error/, 'daemon log');
});

test('small frames and a frame bigger than one batch keep their order and framing', async () => {
  const redis = await startRedis();
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY });
  cleanup.push(() => d.stop(), () => redis.stop());
  const c = client(d.wsUrl);
  await c.ready;
  const id = rid('big');
  assert.equal((await d.post('/v1/requests', { requestId: id, metadata: { blob: 'y'.repeat(3900) } })).status, 201);
  assert.equal((await subscribed(c, sub(null, { snapshotLimit: 0 }))).status, 'success');
  c.ws._socket.pause();
  // a history answer of ~100 events x 4.5 KB (one frame > 64 KiB: written alone) between
  // small frames (events of untracked requests: under 126 bytes of header size class 2)
  const t0 = Date.now() - 600_000;
  for (let i = 0; i < 100; i++)
    assert.equal(await ingest(d, KEY, upstreamPayload({ rid: id, status: i % 2 ? 'waiting' : 'pending', updatedAt: t0 + i * 1000 })), 200);
  const small = [];
  for (let i = 0; i < 30; i++) {
    const x = rid(`small${i}`);
    small.push(x);
    assert.equal(await ingest(d, KEY, upstreamPayload({ rid: x, status: 'waiting' })), 200);
    if (i === 14) c.send({ type: 'history', filters: { id } });
  }
  await new Promise((r) => setTimeout(r, 500));
  c.ws._socket.resume();
  await until(() => c.events().filter((f) => small.includes(f.data.requestId)).length === 30 && c.ofType('history').length === 1,
    { timeoutMs: 20000, msg: 'small events and the history answer' });
  assert.equal(c.closed, null);
  const h = c.ofType('history')[0];
  assert.equal(h.status, 'success');
  assert.equal(h.data.events.length, 100);
  assert.ok(JSON.stringify(h).length > 65536, 'a frame bigger than one batch');
  assert.deepEqual(c.events().filter((f) => small.includes(f.data.requestId)).map((f) => f.data.requestId), small, 'in order');
  assert.equal(c.events().filter((f) => f.data.requestId === id).length, 100, 'the big request\'s 100 events');
  c.close();
  assert.doesNotMatch(d.proc.log(), /Sanitizer|runtime error|level=error/, 'daemon log');
});
