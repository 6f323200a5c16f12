// anon_watch.test.mjs - anonymous dashboard subscriptions (issue 15, high 3; docs/dashboard.md "Anonymous
// subscriptions"), against a real redis-server, the simulator and `statusrelay serve` on
// loopback: a subscription without the stream token watches an id only while some connection
// follows it (closing ends the watch: unsubscribed upstream, no more polls; a killed process's
// watches end with their lease), within a per-address limit of new ids across connections
// (4429 over it; ids tracked through the API do not count); an id the upstream answers 404
// for ends after a few polls with a "not_found" frame and is not polled again; API tracking
// during an anonymous watch persists; and ~1,000 anonymous made-up ids with the upstream
// websocket down do not delay a tracked request's change (the budget serves it first).
import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';
import { rid } from './lib/hooks.mjs';

const KEY = 'anon-test-key';
const EVENT = 'request.status.updated';
let redis, sim;
let prefixN = 0;
const cleanup = [];

before(async () => {
  redis = await startRedis();
  sim = await startSim({ apiKey: KEY, seed: 15, rateLimit: 0 });
});
afterEach(async () => {
  for (const f of cleanup.reverse()) { try { await f(); } catch {} }
  cleanup.length = 0;
  await sim.control('/faults', null, 'DELETE');
});
after(async () => {
  await sim?.stop();
  await redis?.stop();
});

async function daemon({ env = {}, prefix, wsUp = true } = {}) {
  prefix = prefix ?? `anon${process.pid}x${prefixN++}`;
  const d = await startDaemon({
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrl, apiKey: KEY,
    env: {
      STATUSRELAY_REDIS_PREFIX: prefix,
      STATUSRELAY_UPSTREAM_PING_INTERVAL: '1s', STATUSRELAY_UPSTREAM_PING_TIMEOUT: '3s',
      STATUSRELAY_WS_ANON_LEASE: '2s',
      ...env,
    },
    name: `anon-daemon-${prefixN}-${Date.now() % 100000}`,
  });
  d.prefix = prefix;
  cleanup.push(() => d.stop());
  if (wsUp) {
    await until(async () => /^statusrelay_upstream_ws_state\{state="ready"\} 1$/m.test(
      await (await fetch(d.url + '/metrics')).text()), { msg: 'upstream websocket ready' });
  }
  return d;
}

/** A dashboard client without a token: frames, close, send, wait. */
function client(url) {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  const c = { ws, frames: [], closed: null };
  ws.on('message', (d) => { try { c.frames.push(JSON.parse(d.toString())); } catch {} });
  ws.on('close', (code, reason) => { c.closed = { code, reason: reason.toString() }; });
  ws.on('error', () => {});
  c.ready = until(() => c.frames.some((f) => f.type === 'connection'), { msg: 'greeting' });
  c.send = (o) => ws.send(JSON.stringify(o));
  c.wait = (pred, msg, timeoutMs = 8000) => until(() => c.frames.find(pred), { msg, timeoutMs });
  c.close = () => { try { ws.close(); } catch {} };
  cleanup.push(() => c.close());
  return c;
}

/** Subscribe to id: the ack ({type:"subscribe"}) or the refusal ({type:"error",request:"subscribe"}). */
async function subscribe(c, id) {
  const from = c.frames.length;
  c.send({ type: 'subscribe', event: EVENT, filters: { id } });
  return c.wait((f) => c.frames.indexOf(f) >= from &&
    ((f.type === 'subscribe' && f.data?.filters?.id === id) || (f.type === 'error' && f.request === 'subscribe')),
  `answer to subscribe ${id}`);
}

const simReq = (id) => sim.control(`/requests/${id}`, null, 'GET');
async function simRequest(path = ['pending']) {
  return (await sim.control('/requests', { path, stepMs: 0, autoHashes: true })).id;
}
async function watchOf(d, id) {
  const r = await d.get(`/v1/requests/${id}`);
  return r.status === 404 ? 'unknown' : r.body.watch;
}
async function status404s() {
  return (await sim.stats()).http.byPath['/intents/status/v3']['404'] ?? 0;
}
/** Polls of a sim request stay at most `slack` above what they were, over `ms`. */
async function noMorePolls(id, ms = 3000, slack = 1) {
  const p0 = (await simReq(id)).statusPolls;
  await sleep(ms);
  const p1 = (await simReq(id)).statusPolls;
  assert.ok(p1 <= p0 + slack, `${id}: polled ${p1 - p0} times after its watch ended`);
}

test('per-address limit across connections; API-tracked and already-watched ids do not count', async () => {
  const d = await daemon({ env: { STATUSRELAY_WS_ANON_IDS_PER_ADDRESS: '3' } });
  const a = client(d.wsUrl);
  await a.ready;
  const ids = [rid('l0'), rid('l1'), rid('l2')];
  for (const id of ids) assert.equal((await subscribe(a, id)).status, 'success');
  // a second connection from the same address: a fourth new id is refused, then closed 4429
  const b = client(d.wsUrl);
  await b.ready;
  const refusal = await subscribe(b, rid('l3'));
  assert.equal(refusal.type, 'error');
  assert.equal(refusal.error.code, 'too_many_ids');
  assert.match(refusal.error.message, /at most 3 request ids/);
  await until(() => b.closed, { msg: 'closed after the refusal' });
  assert.deepEqual(b.closed, { code: 4429, reason: 'subscription refused: too_many_ids' });
  // an id another connection already watches, and one tracked through the API, do not count
  const c = client(d.wsUrl);
  await c.ready;
  await until(async () => (await watchOf(d, ids[0])) === 'active', { msg: 'l0 watched' });
  assert.equal((await subscribe(c, ids[0])).status, 'success');
  const T = rid('api');
  assert.equal((await d.post('/v1/requests', { requestId: T })).status, 201);
  await until(async () => (await watchOf(d, T)) === 'active', { msg: 'T watched' });
  assert.equal((await subscribe(c, T)).status, 'success');
  assert.equal(c.closed, null);
  // closing the first connection gives its ids back: a new one is accepted again
  a.close();
  await until(() => a.closed, { msg: 'a closed' });
  await until(async () => (await watchOf(d, ids[1])) === 'unknown', { msg: 'l1 released' });
  assert.equal((await subscribe(c, rid('l4'))).status, 'success');
  assert.doesNotMatch(d.proc.log(), /level=error/);
});

test('closing the connection ends the watch: unsubscribed upstream, polls stop', async () => {
  const d = await daemon({ env: { STATUSRELAY_POLL_SAFETY_INTERVAL: '1s' } });
  const R = await simRequest(['pending']);
  const M = rid('made-up'); // never observed: nothing of it stays
  const c = client(d.wsUrl);
  await c.ready;
  assert.equal((await subscribe(c, R)).status, 'success');
  assert.equal((await subscribe(c, M)).status, 'success');
  const w = await until(async () => { const r = await d.get(`/v1/requests/${R}`); return r.body?.watch === 'active' && r.body.status === 'pending' && r.body; }, { msg: 'R watched and observed' });
  assert.equal(w.tracked, false, 'anonymous: watched, not tracked');
  await until(async () => (await simReq(R)).subscribed && (await simReq(R)).statusPolls > 0, { msg: 'R subscribed upstream and polled' });
  await c.wait((f) => f.event === EVENT && f.data.requestId === R, 'R snapshot or event');
  c.close();
  await until(async () => (await watchOf(d, R)) === 'ended', { msg: 'R watch ended', timeoutMs: 5000 });
  await until(async () => (await watchOf(d, M)) === 'unknown', { msg: 'M forgotten', timeoutMs: 5000 });
  await until(async () => !(await simReq(R)).subscribed, { msg: 'R unsubscribed upstream', timeoutMs: 5000 });
  const after = await d.get(`/v1/requests/${R}`);
  assert.equal(after.body.status, 'pending', 'the last state stays readable');
  await noMorePolls(R);
  // nothing anonymous is left in Redis
  assert.equal(await redis.cmd('ZCARD', `{${d.prefix}}:anonh`), 0);
  assert.equal(await redis.cmd('ZCARD', `{${d.prefix}}:polln`), 0);
});

test('kill -9: after a restart the anonymous watches of the dead process end with their lease', async () => {
  const prefix = `anon-kill-${process.pid}`;
  const d1 = await daemon({ prefix, env: { STATUSRELAY_POLL_SAFETY_INTERVAL: '1s' } });
  const R = await simRequest(['pending']);
  const c = client(d1.wsUrl);
  await c.ready;
  assert.equal((await subscribe(c, R)).status, 'success');
  await until(async () => (await simReq(R)).subscribed && (await watchOf(d1, R)) === 'active', { msg: 'R watched' });
  await d1.stop('SIGKILL');
  const t0 = Date.now();
  // (not waiting for the upstream websocket: the dead holder's leader lease delays that)
  const d2 = await daemon({ prefix, wsUp: false, env: { STATUSRELAY_POLL_SAFETY_INTERVAL: '1s' } });
  await until(async () => (await watchOf(d2, R)) === 'ended', { msg: 'R watch ended after the restart', timeoutMs: 15000 });
  console.log(`# anonymous watch of a killed process ended ${Date.now() - t0} ms after the kill (lease 2s)`);
  await until(async () => !(await simReq(R)).subscribed, { msg: 'R unsubscribed upstream', timeoutMs: 5000 });
  await noMorePolls(R);
});

test('a graceful stop releases the anonymous watches of the process at once', async () => {
  const d = await daemon({ env: { STATUSRELAY_WS_ANON_LEASE: '1h' } });
  const R = await simRequest(['pending']);
  const c = client(d.wsUrl);
  await c.ready;
  assert.equal((await subscribe(c, R)).status, 'success');
  await until(async () => { const r = await d.get(`/v1/requests/${R}`); return r.body?.watch === 'active' && r.body.status === 'pending'; }, { msg: 'R watched and observed' });
  const r = await d.stop();
  assert.equal(r.code, 0);
  // no process runs any more: only the release at shutdown can have ended the watch
  assert.equal(await redis.cmd('ZCARD', `{${d.prefix}}:anonh`), 0);
  assert.equal(await redis.cmd('HGET', `{${d.prefix}}:req:${R}`, 'watch'), 'ended');
});

test('an id the upstream does not know: not_found after 3 polls, then never polled again', async () => {
  const d = await daemon({ env: { STATUSRELAY_POLL_SAFETY_INTERVAL: '1s' } });
  const U = rid('nope');
  const n0 = await status404s();
  const c = client(d.wsUrl);
  await c.ready;
  assert.equal((await subscribe(c, U)).status, 'success');
  const nf = await c.wait((f) => f.type === 'error' && f.error?.code === 'not_found', 'not_found frame', 20000);
  assert.deepEqual(nf.data, { event: EVENT, filters: { id: U } });
  assert.equal(await status404s() - n0, 3, 'exactly 3 polls of the unknown id');
  assert.equal((await d.get(`/v1/requests/${U}`)).status, 404);
  // the connection stays usable; subscribing again is answered not_found without a poll
  assert.equal(c.closed, null);
  const from = c.frames.length;
  assert.equal((await subscribe(c, U)).status, 'success');
  await c.wait((f) => c.frames.indexOf(f) >= from && f.type === 'error' && f.error?.code === 'not_found', 'not_found again (negative cache)', 5000);
  await sleep(2500);
  assert.equal(await status404s() - n0, 3, 'no poll after the watch ended');
  // an id tracked through the API keeps today's semantics: polled on while unknown
  const T = rid('api-unknown');
  assert.equal((await d.post('/v1/requests', { requestId: T })).status, 201);
  await sleep(5000);
  assert.equal(await watchOf(d, T), 'active');
  assert.ok(await status404s() - n0 >= 3 + 4, 'the tracked id is polled on');
});

test('API tracking during an anonymous watch persists after the socket closes', async () => {
  const d = await daemon();
  const R = await simRequest(['pending']);
  const c = client(d.wsUrl);
  await c.ready;
  assert.equal((await subscribe(c, R)).status, 'success');
  await until(async () => (await watchOf(d, R)) === 'active', { msg: 'R watched' });
  assert.equal((await d.post('/v1/requests', { requestId: R })).status, 201);
  c.close();
  await until(() => c.closed, { msg: 'closed' });
  await sleep(3500); // past the 2 s lease
  const r = await d.get(`/v1/requests/${R}`);
  assert.equal(r.body.tracked, true);
  assert.equal(r.body.watch, 'active');
  assert.equal((await simReq(R)).subscribed, true);
});

test('fairness: 1,000 anonymous made-up ids, websocket down: a tracked change is seen in time', async () => {
  await sim.control('/faults', { wsRefuse: true });
  const d = await daemon({ wsUp: false, env: { STATUSRELAY_WS_ANON_IDS_PER_ADDRESS: '1000' } });
  const clients = [];
  for (let i = 0; i < 10; i++) {
    const c = client(d.wsUrl);
    await c.ready;
    clients.push(c);
    for (let j = 0; j < 100; j++) c.send({ type: 'subscribe', event: EVENT, filters: { id: rid(`f${i}x${j}`) } });
  }
  for (const c of clients) {
    await until(() => c.frames.filter((f) => f.type === 'subscribe' && f.status === 'success').length === 100, { msg: 'acks', timeoutMs: 20000 });
  }
  await until(async () => Number(await redis.cmd('ZCARD', `{${d.prefix}}:polln`)) >= 990, { msg: 'anonymous ids watched', timeoutMs: 20000 });
  await until(async () => {
    const m = (await (await fetch(d.url + '/metrics')).text()).match(/^statusrelay_watched_requests\{phase="anonymous"\} (\d+)$/m);
    return m && Number(m[1]) >= 990;
  }, { msg: 'the anonymous watches in /metrics', timeoutMs: 10000 });
  // the anonymous ids now want ~1,000 polls: far beyond 200 a minute
  const n0 = await status404s();
  const Q = await simRequest(['waiting', 'pending']);
  assert.equal((await d.post('/v1/requests', { requestId: Q })).status, 201);
  const t1 = Date.now();
  await until(async () => (await d.get(`/v1/requests/${Q}`)).body?.status === 'waiting', { msg: 'first observation', timeoutMs: 20000 });
  const first = Date.now() - t1;
  await sleep(1000);
  await sim.control(`/requests/${Q}/advance`, {});
  const t2 = Date.now();
  await until(async () => (await d.get(`/v1/requests/${Q}`)).body?.status === 'pending', { msg: 'the change observed', timeoutMs: 20000 });
  const change = Date.now() - t2;
  console.log(`# tracked request with 1000 anonymous ids and the websocket down: first observation ${first} ms, change observed ${change} ms`);
  assert.ok(change < 15000, `change seen after ${change} ms`);
  assert.ok(await status404s() - n0 > 0, 'the anonymous ids were polled meanwhile (the budget was in use)');
  assert.doesNotMatch(d.proc.log(), /level=error/);
});
