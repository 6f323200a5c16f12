// upstream_rules.test.mjs - DESIGN "More upstream rules" end to end: fallback is settled like
// refund (watched slowly, never stuck); a /requests/v3 item's top-level failReason /
// refundFailReason is used when data has none; a deposit reorged while pending gets the same
// /requests/v3 read as a reversal (statusrelay.reorg); a Bitcoin-origin pending gets one read
// that sets unconfirmedDeposit; a key the upstream refuses is visible (warn line, counter,
// /readyz upstreamAuth) and polling backs off, then recovers. Real redis-server, the simulator
// (or a small fake upstream), daemons and a webhook receiver on loopback.
import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';
import { trackScripted, waitStatus } from './lib/requests.mjs';
import { startReceiver } from './lib/hooks.mjs';

const KEY = 'rules-test-key';
let redis, sim;
let prefixN = 0;
const cleanup = [];

before(async () => {
  redis = await startRedis();
  sim = await startSim({ apiKey: KEY, seed: 21, rateLimit: 0 });
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

async function daemon({ env = {}, apiUrl = sim.url, wsUrl = sim.wsUrl, apiKey = KEY } = {}) {
  const d = await startDaemon({
    redisUrl: redis.url, apiUrl, wsUrl, apiKey,
    env: {
      STATUSRELAY_REDIS_PREFIX: `rules${prefixN++}`,
      STATUSRELAY_UPSTREAM_PING_INTERVAL: '1s', STATUSRELAY_UPSTREAM_PING_TIMEOUT: '3s',
      STATUSRELAY_RETRY_SCHEDULE: '0s,200ms,400ms',
      ...env,
    },
    name: `rules-daemon-${prefixN}`,
  });
  cleanup.push(() => d.stop());
  return d;
}

const scripted = (d, path, extra) => trackScripted(sim, d, path, extra);

const simReq = (id) => sim.control(`/requests/${id}`, null, 'GET');

async function metrics(d) { return (await fetch(d.url + '/metrics')).text(); }

// the websocket is ready and its gap repair (a /requests/v3 page read) is over, so that only
// the read under test can bring what /requests/v3 alone says
async function settledStart(d, id) {
  await until(async () => /^statusrelay_upstream_ws_state\{state="ready"\} 1$/m.test(await metrics(d)), { msg: 'upstream websocket ready' });
  await until(() => /gap repaired/.test(d.proc.log()), { msg: 'gap repair done' });
  await until(async () => (await simReq(id)).subscribed === true, { msg: 'subscribed upstream' });
}

/** The /requests/v3 reads of id once its first-seen facts are known (DESIGN "Request facts":
 * one read by id when a request is first seen, unless a /requests/v3 page saw it first). */
async function readsAfterFacts(d, id) {
  await until(async () => (await d.get(`/v1/requests/${id}`)).body?.request != null, { msg: 'first-seen facts' });
  return (await simReq(id)).requestsReads;
}

async function hook(d) {
  const rx = await startReceiver();
  cleanup.push(() => rx.stop());
  const r = await d.post('/v1/webhooks', { url: rx.url('/h') });
  assert.equal(r.status, 201, r.text);
  return rx;
}

function bodies(rx, id) {
  return rx.records().map((x) => JSON.parse(x.body)).filter((b) => b.data.requestId === id)
    .sort((a, b) => a.statusrelay.seq - b.statusrelay.seq);
}

async function advanceTo(d, id, status) {
  await sim.control(`/requests/${id}/advance`, {});
  return waitStatus(d, id, status);
}

test('fallback is settled like refund: watched slowly, never listed or counted as stuck', async () => {
  const d = await daemon({ env: { STATUSRELAY_STUCK_AFTER: '1s' } });
  const rx = await hook(d);
  const id = await scripted(d, ['waiting', 'pending', { status: 'fallback', failReason: 'SOLVER_CAPACITY_EXCEEDED' }, 'refund']);
  const other = await scripted(d, ['waiting', 'pending']); // stays pending: stuck, the control
  await waitStatus(d, id, 'waiting');
  await settledStart(d, id);
  await advanceTo(d, other, 'pending');
  await advanceTo(d, id, 'pending');
  const fb = await advanceTo(d, id, 'fallback');
  assert.equal(fb.watch, 'settled', JSON.stringify(fb));
  assert.ok(fb.watchUntil > Date.now() + 23 * 3600e3, `settled for STATUSRELAY_SETTLED_WATCH (24h): ${fb.watchUntil}`);
  assert.equal(fb.failReason, 'SOLVER_CAPACITY_EXCEEDED');
  await new Promise((r) => setTimeout(r, 1500)); // past STUCK_AFTER
  const stuck = (await d.get('/v1/requests?stuck=true')).body.requests.map((r) => r.requestId);
  assert.ok(stuck.includes(other), `the pending control is stuck: ${stuck}`);
  assert.ok(!stuck.includes(id), 'a fallback is never stuck');
  // the gauge, once it counts the control, does not count the fallback
  const m = await until(async () => {
    const t = await metrics(d);
    return /^statusrelay_requests_stuck\{status="pending"\} 1$/m.test(t) ? t : null;
  }, { msg: 'stuck gauge refreshed', timeoutMs: 12000 });
  assert.ok(!/^statusrelay_requests_stuck\{status="fallback"\} [1-9]/m.test(m), m.split('\n').filter((l) => /stuck/.test(l)).join('\n'));
  // still subscribed upstream; a refund after it is no reversal (it follows a fallback)
  assert.equal((await simReq(id)).subscribed, true);
  const rf = await advanceTo(d, id, 'refund');
  assert.equal(rf.watch, 'settled');
  const ev = await until(() => bodies(rx, id).find((b) => b.data.status === 'refund'), { msg: 'refund webhook' });
  assert.equal(ev.statusrelay.previousStatus, 'fallback');
  assert.ok(!(ev.statusrelay.flags ?? []).includes('reversal'), JSON.stringify(ev.statusrelay));
});

test('a fallback an earlier version kept active is settled at start-up', async () => {
  const prefix = `rules${prefixN++}`;
  const d1 = await daemon({ env: { STATUSRELAY_REDIS_PREFIX: prefix } });
  const id = await scripted(d1, ['waiting', { status: 'fallback', failReason: 'SOLVER_CAPACITY_EXCEEDED' }]);
  await waitStatus(d1, id, 'waiting');
  await until(async () => (await simReq(id)).subscribed === true, { msg: 'subscribed upstream' });
  await advanceTo(d1, id, 'fallback');
  await d1.stop();
  // what a version before fallback was settled wrote: phase active, no end, on the active
  // poll tier and in the stuck index
  const [k] = await redis.cmd('KEYS', `*${prefix}*:req:${id}`);
  assert.ok(k, 'the request hash');
  const tag = k.slice(0, k.length - `:req:${id}`.length);
  const chg = await redis.cmd('HGET', k, 'chg');
  await redis.cmd('HSET', k, 'watch', 'active', 'wu', '', 'pt', 'a');
  await redis.cmd('ZREM', `${tag}:polls`, id);
  await redis.cmd('ZREM', `${tag}:wend`, id);
  await redis.cmd('ZADD', `${tag}:poll`, String(Date.now() + 30000), id);
  await redis.cmd('ZADD', `${tag}:act`, chg, id);
  await redis.cmd('ZADD', `${tag}:unset`, chg, id);
  const d2 = await daemon({ env: { STATUSRELAY_REDIS_PREFIX: prefix, STATUSRELAY_STUCK_AFTER: '1s' } });
  const st = await until(async () => {
    const r = (await d2.get(`/v1/requests/${id}`)).body;
    return r.watch === 'settled' ? r : null;
  }, { msg: 'settled at start-up', timeoutMs: 8000 });
  assert.ok(st.watchUntil > Date.now() + 23 * 3600e3);
  assert.equal(await redis.cmd('ZSCORE', `${tag}:act`, id), null, 'out of the stuck index');
  assert.equal(await redis.cmd('ZSCORE', `${tag}:poll`, id), null, 'off the active poll tier');
  assert.ok(await redis.cmd('ZSCORE', `${tag}:polls`, id), 'on the settled poll tier');
  assert.match(d2.proc.log(), /fallback watches settled .*count=1/);
  await new Promise((r) => setTimeout(r, 1200));
  const stuck = (await d2.get('/v1/requests?stuck=true')).body.requests.map((r) => r.requestId);
  assert.ok(!stuck.includes(id));
});

test('a deposit reorged while pending: one /requests/v3 read, statusrelay.reorg on the next event', async () => {
  const d = await daemon();
  const rx = await hook(d);
  const id = await scripted(d, ['waiting', 'pending', { status: 'failure', failReason: 'DEPOSIT_REORGED', reorg: true }]);
  await waitStatus(d, id, 'waiting');
  await settledStart(d, id);
  const reads0 = await readsAfterFacts(d, id);
  await advanceTo(d, id, 'pending');
  assert.equal((await simReq(id)).requestsReads, reads0, 'no read for an ordinary pending');
  await sim.control(`/requests/${id}/advance`, {});
  const f = await waitStatus(d, id, 'failure');
  assert.equal(f.failReason, 'DEPOSIT_REORGED');
  const first = await until(() => bodies(rx, id).find((b) => b.data.status === 'failure'), { msg: 'failure webhook' });
  assert.ok(!(first.statusrelay.flags ?? []).includes('reversal'), 'out of pending: no reversal');
  const enriched = await until(() => bodies(rx, id).find((b) => b.statusrelay.reorg), { msg: 'reorg details webhook', timeoutMs: 8000 });
  assert.equal(enriched.data.status, 'failure');
  assert.equal(enriched.statusrelay.reorg.metadata.failReason, 'DEPOSIT_REORGED');
  assert.ok(enriched.statusrelay.reorg.inTxs.some((t) => t.status === 'failure'), JSON.stringify(enriched.statusrelay.reorg));
  assert.equal((await d.get(`/v1/requests/${id}`)).body.reorg.metadata.action, 'refund');
  await new Promise((r) => setTimeout(r, 500));
  assert.equal((await simReq(id)).requestsReads, reads0 + 1, 'exactly one /requests/v3 read');
});

test('a Bitcoin-origin pending gets one /requests/v3 read: unconfirmedDeposit set, dropped at the next status', async () => {
  const d = await daemon();
  const rx = await hook(d);
  const id = await scripted(d, ['waiting', 'pending', 'submitted'], { originChainId: 8253038, destinationChainId: 8453 });
  await waitStatus(d, id, 'waiting');
  await settledStart(d, id);
  const reads0 = await readsAfterFacts(d, id);
  await sim.control(`/requests/${id}/advance`, {});
  const p = await waitStatus(d, id, 'pending');
  assert.ok(['ws', 'poll'].includes(p.lastSource), `the pending came from a source that cannot tell the mempool: ${p.lastSource}`);
  const flagged = await until(() => bodies(rx, id).find((b) => (b.statusrelay.flags ?? []).includes('unconfirmedDeposit')),
    { msg: 'an event flagged unconfirmedDeposit', timeoutMs: 8000 });
  assert.equal(flagged.data.status, 'pending');
  assert.equal(flagged.statusrelay.source, 'requests');
  assert.equal((await simReq(id)).requestsReads, reads0 + 1, 'one read');
  // the next status change drops the flag; an EVM pending gets no read at all
  await advanceTo(d, id, 'submitted');
  const sub = await until(() => bodies(rx, id).find((b) => b.data.status === 'submitted'), { msg: 'submitted webhook' });
  assert.ok(!(sub.statusrelay.flags ?? []).includes('unconfirmedDeposit'));
  const evm = await scripted(d, ['waiting', 'pending'], { originChainId: 8453 });
  await waitStatus(d, evm, 'waiting');
  await until(async () => (await simReq(evm)).subscribed === true, { msg: 'evm subscribed' });
  const evmReads0 = await readsAfterFacts(d, evm);
  await advanceTo(d, evm, 'pending');
  await new Promise((r) => setTimeout(r, 500));
  assert.equal((await simReq(evm)).requestsReads, evmReads0);
});

// A fake upstream whose /requests/v3 items carry their reasons at the top level only.
async function fakeUpstream(items) {
  const calls = [];
  const srv = http.createServer((req, res) => {
    const u = new URL(req.url, 'http://x');
    calls.push(u.pathname);
    res.setHeader('content-type', 'application/json');
    if (u.pathname === '/requests/v3') {
      res.end(JSON.stringify({ requests: items(), continuation: null }));
    } else if (u.pathname === '/chains') {
      res.end(JSON.stringify({ chains: [] }));
    } else {
      res.statusCode = 404;
      res.end(JSON.stringify({ message: 'Request not found', errorCode: 'REQUEST_NOT_FOUND' }));
    }
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  cleanup.push(() => new Promise((r) => srv.close(r)));
  return { url: `http://127.0.0.1:${srv.address().port}`, calls };
}

test('a /requests/v3 item whose reasons are top-level fields: kept, not UNKNOWN', async () => {
  const now = Date.now();
  const id = `0x${'ab'.repeat(31)}${(now % 256).toString(16).padStart(2, '0')}`;
  const item = {
    id, status: 'refund', user: '0x1111111111111111111111111111111111111111',
    recipient: '0x1111111111111111111111111111111111111111',
    failReason: 'SLIPPAGE', refundFailReason: 'AMOUNT_TOO_LOW_TO_REFUND',
    data: {
      failReason: null, refundFailReason: null, fees: {},
      inTxs: [{ txHash: `0x${'01'.repeat(32)}`, chainId: 10, timestamp: Math.floor(now / 1000), block: 5, status: 'success' }],
      outTxs: [],
      route: { quoted: { origin: { inputCurrency: { currency: { chainId: 10 } } }, destination: { outputCurrency: { currency: { chainId: 137 } } } } },
    },
    createdAt: new Date(now - 60000).toISOString(), updatedAt: new Date(now - 1000).toISOString(),
  };
  const up = await fakeUpstream(() => [item]);
  const d = await daemon({
    apiUrl: up.url, wsUrl: 'ws://127.0.0.1:9/',
    env: { STATUSRELAY_DISCOVER: 'true', STATUSRELAY_DISCOVER_INTERVAL: '1s' },
  });
  const rx = await hook(d);
  const st = await until(async () => {
    const r = await d.get(`/v1/requests/${id}`);
    return r.status === 200 ? r.body : null;
  }, { msg: 'discovered from the feed', timeoutMs: 15000 });
  assert.equal(st.status, 'refund');
  assert.equal(st.failReason, 'SLIPPAGE');
  assert.equal(st.refundFailReason, 'AMOUNT_TOO_LOW_TO_REFUND');
  const v3 = await (await fetch(`${d.url}/intents/status/v3?requestId=${id}`)).json();
  assert.equal(v3.failReason, 'SLIPPAGE');
  const b = await until(() => bodies(rx, id)[0], { msg: 'webhook' });
  assert.equal(b.data.failReason, 'SLIPPAGE');
  assert.equal(b.data.refundFailReason, 'AMOUNT_TOO_LOW_TO_REFUND');
  assert.ok(!(b.statusrelay.flags ?? []).some((f) => /^unknown/.test(f)), JSON.stringify(b.statusrelay));
});

function count401(stats) {
  const by = stats.http.byPath;
  return Object.values(by).reduce((n, codes) => n + (codes['401'] ?? 0) + (codes['403'] ?? 0), 0);
}

test('a key the upstream refuses: warn line, counter, /readyz upstreamAuth, polling backs off and recovers', async () => {
  // no upstream websocket: every tracked request is on fast polls (1 s), the most calls
  const d = await daemon({ wsUrl: 'ws://127.0.0.1:9/' });
  // "unknown" until the first keyed call (the chain list at start) is answered
  assert.ok(['unknown', 'ok'].includes((await d.get('/readyz')).body.upstreamAuth));
  const ids = [];
  for (let i = 0; i < 5; i++) ids.push(await scripted(d, ['waiting', 'pending']));
  await until(async () => (await d.get('/readyz')).body.upstreamAuth === 'ok', { msg: 'upstreamAuth ok' });
  await sim.control('/faults', { refuseKey: 401 });
  const s0 = count401(await sim.stats());
  const t0 = Date.now();
  const rz = await until(async () => {
    const r = await d.get('/readyz');
    return r.body.upstreamAuth === 'rejected' ? r : null;
  }, { msg: 'upstreamAuth rejected', timeoutMs: 5000 });
  assert.equal(rz.status, 200, 'readiness stays 200: cached reads and deliveries still work');
  await new Promise((r) => setTimeout(r, Math.max(0, 10000 - (Date.now() - t0))));
  const refused = count401(await sim.stats()) - s0;
  // full budget (200/min: a burst of 20, then 3.3/s) would have spent ~50 calls in 10 s
  assert.ok(refused >= 2 && refused <= 15, `refused calls in 10 s: ${refused}`);
  const m = await metrics(d);
  const c = /^statusrelay_upstream_auth_failures_total (\d+)$/m.exec(m);
  assert.ok(c && Number(c[1]) >= refused - 1, `counter: ${c?.[0]}, refused ${refused}`);
  const warns = d.proc.log().split('\n').filter((l) => /upstream API key rejected/.test(l));
  assert.equal(warns.length, 1, `one warn line a minute: ${warns.join('\n')}`);
  assert.match(warns[0], /WARN|warn/);
  console.log(`# refused key: ${refused} upstream calls in 10 s (counter ${c[1]})`);
  // the key works again: the next probe finds it, polling resumes
  await sim.control('/faults', { refuseKey: 0 });
  const t1 = Date.now();
  await until(async () => (await d.get('/readyz')).body.upstreamAuth === 'ok', { msg: 'upstreamAuth ok again', timeoutMs: 40000 });
  console.log(`# key accepted again after ${Date.now() - t1} ms`);
  await sim.control(`/requests/${ids[0]}/advance`, {});
  await waitStatus(d, ids[0], 'pending', 8000);
  // 403 counts the same
  await sim.control('/faults', { refuseKey: 403 });
  await until(async () => (await d.get('/readyz')).body.upstreamAuth === 'rejected', { msg: 'rejected on 403', timeoutMs: 8000 });
});
