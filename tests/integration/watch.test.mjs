// watch.test.mjs - the mirror follows the upstream to the end: settled requests reversed by
// the upstream (reorg, double spend) reach webhooks with the reversal flag, whether the
// websocket says so or only a settled-watch poll finds it; every watched request is
// subscribed by the upstream websocket holder whichever process tracked it, and again after a
// restart; watches end (waiting TTL) and then cost the upstream nothing; stuck requests are
// listed and counted; reason rules and any-typed details. Real redis-server, the simulator,
// daemons and a webhook receiver on loopback.
import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';
import { trackScripted, waitStatus } from './lib/requests.mjs';
import { startReceiver, ingest, upstreamPayload, rid } from './lib/hooks.mjs';

const KEY = 'watch-test-key';
let redis, sim;
let prefixN = 0;
const cleanup = [];

before(async () => {
  redis = await startRedis();
  sim = await startSim({ apiKey: KEY, seed: 12, rateLimit: 0 });
});
// each test stops its daemons and receivers, so the next one has the simulator to itself
afterEach(async () => {
  for (const f of cleanup.reverse()) { try { await f(); } catch {} }
  cleanup.length = 0;
  await sim.control('/faults', null, 'DELETE');
});
after(async () => {
  await sim?.stop();
  await redis?.stop();
});

async function daemon({ env = {}, prefix, name, apiKey = KEY } = {}) {
  const d = await startDaemon({
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrl, apiKey,
    env: {
      STATUSRELAY_REDIS_PREFIX: prefix ?? `watch${prefixN++}`,
      STATUSRELAY_UPSTREAM_PING_INTERVAL: '1s', STATUSRELAY_UPSTREAM_PING_TIMEOUT: '3s',
      STATUSRELAY_RETRY_SCHEDULE: '0s,200ms,400ms',
      ...env,
    },
    name: name ?? `watch-daemon-${prefixN}`,
  });
  cleanup.push(() => d.stop());
  return d;
}

const scripted = (d, path, extra) => trackScripted(sim, d, path, extra);

async function simReq(id) { return sim.control(`/requests/${id}`, null, 'GET'); }

async function wsReady(d) {
  await until(async () => {
    const m = await (await fetch(d.url + '/metrics')).text();
    return /^statusrelay_upstream_ws_state\{state="ready"\} 1$/m.test(m);
  }, { msg: 'upstream websocket ready' });
}

async function subscribedUpstream(id, timeoutMs = 5000) {
  return until(async () => (await simReq(id)).subscribed === true, { msg: `${id.slice(0, 10)} subscribed upstream`, timeoutMs });
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

test('success -> failure (reorg) over the websocket: delivered with the reversal flag, reorg details read once', async () => {
  const d = await daemon();
  const rx = await hook(d);
  const path = ['waiting', 'pending', 'success', { status: 'failure', failReason: 'DEPOSIT_REORGED', reorg: true }];
  const id = await scripted(d, path);
  await waitStatus(d, id, 'waiting');
  await wsReady(d);
  await subscribedUpstream(id);
  await advanceTo(d, id, 'pending');
  const settled = await advanceTo(d, id, 'success');
  assert.equal(settled.watch, 'settled');
  // the facts read of the settle (DESIGN "Request facts") is done before the reversal
  await until(async () => (await d.get(`/v1/requests/${id}`)).body?.request?.outTxs?.length > 0, { msg: 'settled facts' });
  const reads0 = (await simReq(id)).requestsReads;
  assert.ok(settled.watchUntil > Date.now() + 23 * 3600e3, `settled watch for 24h: ${settled.watchUntil}`);
  // still subscribed upstream after success (the upstream reverses settled requests)
  await new Promise((r) => setTimeout(r, 400));
  assert.equal((await simReq(id)).subscribed, true, 'a settled request stays subscribed');
  await sim.control(`/requests/${id}/advance`, {});
  const st = await waitStatus(d, id, 'failure');
  assert.equal(st.failReason, 'DEPOSIT_REORGED');
  assert.equal(st.watch, 'active');
  const rev = await until(() => bodies(rx, id).find((b) => b.data.status === 'failure'), { msg: 'reversal webhook' });
  assert.ok(rev.statusrelay.flags?.includes('reversal'), JSON.stringify(rev.statusrelay));
  assert.equal(rev.statusrelay.previousStatus, 'success');
  assert.equal(rev.data.failReason, 'DEPOSIT_REORGED');
  // with an API key the relay reads the request once from /requests/v3: the reorg details
  // arrive on the next event and in GET /v1/requests/{id}
  const enriched = await until(() => bodies(rx, id).find((b) => b.statusrelay.reorg), { msg: 'reorg details webhook' });
  assert.equal(enriched.data.status, 'failure');
  assert.equal(enriched.statusrelay.flags?.includes('reversal') ?? false, false, 'only the reversal event carries the flag');
  const tx = enriched.statusrelay.reorg.inTxs.find((t) => t.status === 'failure');
  assert.ok(tx, JSON.stringify(enriched.statusrelay.reorg));
  assert.equal(enriched.statusrelay.reorg.metadata.failReason, 'DEPOSIT_REORGED');
  const got = (await d.get(`/v1/requests/${id}`)).body;
  assert.equal(got.reorg.metadata.action, 'refund');
  assert.equal((await simReq(id)).requestsReads, reads0 + 1, 'one /requests/v3 read for the reversal');
  // the upstream-shaped status answers the truth, not the old success
  const v3 = await fetch(`${d.url}/intents/status/v3?requestId=${id}`);
  assert.equal((await v3.json()).status, 'failure');
  // order: every seq once, in order
  const seqs = bodies(rx, id).map((b) => b.statusrelay.seq);
  assert.deepEqual(seqs, [...new Set(seqs)].sort((a, b) => a - b));
});

test('success -> refund (double spend) seen only by a settled-watch poll (websocket silent)', async () => {
  const d = await daemon({ env: { STATUSRELAY_SETTLED_POLL_INTERVAL: '1s' } });
  const rx = await hook(d);
  const id = await scripted(d, ['waiting', 'pending', 'success', { status: 'refund', failReason: 'DOUBLE_SPEND' }]);
  await waitStatus(d, id, 'waiting');
  await wsReady(d);
  // the gap repair after connecting reads /requests/v3: let it finish, so that only a status
  // poll can find what the silent websocket does not say
  await until(() => /gap repaired/.test(d.proc.log()), { msg: 'gap repair done' });
  await subscribedUpstream(id);
  await advanceTo(d, id, 'pending');
  await advanceTo(d, id, 'success');
  // the facts read of the settle is done: only a status poll may find the refund
  await until(async () => (await d.get(`/v1/requests/${id}`)).body?.request?.outTxs?.length > 0, { msg: 'settled facts' });
  await sim.control('/faults', { silent: true });
  try {
    const polls0 = (await simReq(id)).statusPolls;
    await sim.control(`/requests/${id}/advance`, {});
    const st = await waitStatus(d, id, 'refund', 15000);
    const rev = await until(() => bodies(rx, id).find((b) => b.data.status === 'refund'), { msg: 'refund webhook' });
    const sr = await simReq(id);
    assert.ok(sr.statusPolls > polls0, `polled after the change: ${polls0} -> ${sr.statusPolls}, event ${JSON.stringify(rev.statusrelay)}`);
    assert.equal(rev.statusrelay.source, 'poll', 'found by a poll: the websocket said nothing');
    assert.ok(rev.statusrelay.flags?.includes('reversal'));
    assert.equal(rev.statusrelay.previousStatus, 'success');
    assert.equal(rev.data.failReason, 'DOUBLE_SPEND');
    assert.equal(st.watch, 'settled', 'a refund is settled again');
  } finally {
    await sim.control('/faults', null, 'DELETE');
  }
});

test('an id tracked through a standby of three daemons is subscribed upstream within 1 s, its change delivered within 1 s', async () => {
  const prefix = `watch${prefixN++}`;
  const ds = [];
  for (let i = 0; i < 3; i++) ds.push(await daemon({ prefix, name: `watch-three-${i}` }));
  const readyz = await Promise.all(ds.map(async (d) => (await d.get('/readyz')).body));
  await until(async () => {
    const st = await Promise.all(ds.map(async (d) => (await d.get('/readyz')).body.upstreamWebsocket));
    return st.filter((s) => s === 'ready').length === 1;
  }, { msg: 'one holder ready' });
  const states = await Promise.all(ds.map(async (d) => (await d.get('/readyz')).body.upstreamWebsocket));
  const standby = ds[states.indexOf('standby')];
  assert.ok(standby, JSON.stringify({ states, readyz }));
  const r = await sim.control('/requests', { path: ['waiting', 'pending', 'submitted'], stepMs: 0, autoHashes: true });
  const t0 = Date.now();
  assert.equal((await standby.post('/v1/requests', { requestId: r.id })).status, 201);
  await subscribedUpstream(r.id, 1000);
  const subMs = Date.now() - t0;
  await waitStatus(standby, r.id, 'waiting');
  const t1 = Date.now();
  await sim.control(`/requests/${r.id}/advance`, {});
  await waitStatus(standby, r.id, 'pending', 1000);
  const st = (await standby.get(`/v1/requests/${r.id}`)).body;
  // the websocket's frame, or the first-seen facts read by id (/requests/v3, queued when the
  // request was first seen) when its answer came first: either way not a status poll
  assert.ok(['ws', 'requests'].includes(st.lastSource), `seen on the websocket, not by a poll: ${st.lastSource}`);
  console.log(`# tracked via a standby: subscribed upstream after ${subMs} ms, change seen after ${Date.now() - t1} ms`);
});

test('a failed request is resubscribed after a restart and its late refund delivered', async () => {
  const prefix = `watch${prefixN++}`;
  const d1 = await daemon({ prefix });
  const id = await scripted(d1, ['waiting', { status: 'failure', failReason: 'SOLVER_CAPACITY_EXCEEDED' }, 'refund']);
  await wsReady(d1);
  await subscribedUpstream(id);
  const f = await advanceTo(d1, id, 'failure');
  assert.equal(f.watch, 'active');
  assert.ok(f.watchUntil > Date.now() + 6 * 86400e3, 'a failure is watched for the failure tail (7d)');
  await d1.stop();
  await until(async () => (await simReq(id)).subscribed === false, { msg: 'the old connection is gone' });
  const d2 = await daemon({ prefix });
  const rx = await hook(d2);
  await subscribedUpstream(id);
  await sim.control(`/requests/${id}/advance`, {});
  const st = await waitStatus(d2, id, 'refund');
  // the websocket's frame, or a /requests/v3 read (gap repair after the reconnect) whose answer
  // came first: either way not a status poll
  assert.ok(['ws', 'requests'].includes(st.lastSource), `not by a poll: ${st.lastSource}`);
  const b = await until(() => bodies(rx, id).find((x) => x.data.status === 'refund'), { msg: 'refund webhook' });
  assert.equal(b.statusrelay.previousStatus, 'failure');
  assert.equal(b.data.failReason, 'SOLVER_CAPACITY_EXCEEDED', 'the recorded reason');
});

test('a waiting request\'s watch ends after the TTL: no subscription, no further upstream calls', async () => {
  const d = await daemon({ env: { STATUSRELAY_WAITING_TTL: '2s', STATUSRELAY_POLL_SAFETY_INTERVAL: '1s' } });
  await wsReady(d);
  const id = await scripted(d, ['waiting']);
  const w = await waitStatus(d, id, 'waiting');
  assert.equal(w.watch, 'active');
  assert.ok(w.watchUntil !== null && w.watchUntil <= Date.now() + 2500, `watchUntil ${w.watchUntil}`);
  await subscribedUpstream(id);
  const ended = await until(async () => {
    const r = (await d.get(`/v1/requests/${id}`)).body;
    return r.watch === 'ended' ? r : null;
  }, { msg: 'watch ended', timeoutMs: 8000 });
  assert.equal(ended.watchUntil, null);
  assert.equal(ended.status, 'waiting', 'the last state stays readable; no status is invented');
  await until(async () => (await simReq(id)).subscribed === false, { msg: 'unsubscribed upstream' });
  const before = await simReq(id);
  await new Promise((r) => setTimeout(r, 3000));
  const later = await simReq(id);
  assert.equal(later.statusPolls, before.statusPolls, 'no poll after the watch ended');
  assert.equal(later.subscribes, before.subscribes, 'no subscribe after the watch ended');
  // tracking it again starts a new watch
  await d.post('/v1/requests', { requestId: id });
  assert.equal((await d.get(`/v1/requests/${id}`)).body.watch, 'active');
  await subscribedUpstream(id);
});

test('stuck requests: listed, counted by status; a request that just changed is not', async () => {
  const d = await daemon({ env: { STATUSRELAY_STUCK_AFTER: '2s' } });
  await wsReady(d);
  const a = await scripted(d, ['waiting', 'pending', 'submitted']);
  const b = await scripted(d, ['waiting', 'pending', 'submitted']);
  const w = await scripted(d, ['waiting']);
  await waitStatus(d, a, 'waiting');
  await waitStatus(d, b, 'waiting');
  await subscribedUpstream(a);
  await subscribedUpstream(b);
  await advanceTo(d, a, 'pending');
  await advanceTo(d, b, 'pending');
  await new Promise((r) => setTimeout(r, 2300));
  await advanceTo(d, b, 'submitted'); // b just changed: not stuck
  const list = (await d.get('/v1/requests?stuck=true')).body.requests.map((r) => r.requestId);
  assert.ok(list.includes(a), `a is stuck: ${list}`);
  assert.ok(!list.includes(b), 'b just changed');
  assert.ok(!list.includes(w), 'waiting requests are never stuck');
  const onlyPending = (await d.get('/v1/requests?stuck=true&status=pending')).body.requests.map((r) => r.requestId);
  assert.deepEqual(onlyPending, [a]);
  assert.equal((await d.get('/v1/requests?stuck=maybe')).status, 400);
  await until(async () => {
    const m = await (await fetch(d.url + '/metrics')).text();
    const s = /^statusrelay_requests_stuck\{status="pending"\} (\d+)/m.exec(m);
    const age = /^statusrelay_oldest_unsettled_age_seconds ([\d.]+)/m.exec(m);
    return s && Number(s[1]) === 1 && age && Number(age[1]) >= 2;
  }, { msg: 'stuck gauge and oldest unsettled age', timeoutMs: 12000 });
});

test('reason rules: failure without a reason is UNKNOWN, pending after it is N/A; object details kept', async () => {
  const d = await daemon();
  const rx = await hook(d);
  const id = rid('reasons');
  const t = Date.now();
  const send = async ({ status, updatedAt, failReason, details = null }) => {
    const p = upstreamPayload({ rid: id, status, updatedAt });
    p.data.failReason = failReason;
    p.data.details = details;
    assert.equal(await ingest(d, KEY, p), 200);
  };
  // a failure the upstream sent with "N/A" (the websocket may), a pending that must not
  // inherit the failure's reason, a reason the old table did not know
  await send({ status: 'pending', updatedAt: t, failReason: 'N/A' });
  await send({ status: 'failure', updatedAt: t + 1, failReason: 'N/A', details: { revert: '0x08c379a0', gas: 21000, nested: [1, true, null] } });
  await send({ status: 'pending', updatedAt: t + 2, failReason: 'SLIPPAGE' });
  await send({ status: 'failure', updatedAt: t + 3, failReason: 'DEPOSIT_CONFIRMATION_TIMEOUT' });
  const got = await until(() => { const b = bodies(rx, id); return b.length >= 4 ? b : null; }, { msg: 'four webhooks' });
  assert.deepEqual(got.map((b) => [b.data.status, b.data.failReason]),
    [['pending', 'N/A'], ['failure', 'UNKNOWN'], ['pending', 'N/A'], ['failure', 'DEPOSIT_CONFIRMATION_TIMEOUT']]);
  assert.deepEqual(got[1].data.details, { revert: '0x08c379a0', gas: 21000, nested: [1, true, null] });
  assert.ok(!(got[3].statusrelay.flags ?? []).includes('unknownFailReason'), 'a documented reason is known');
  const st = (await d.get(`/v1/requests/${id}`)).body;
  assert.equal(st.failReason, 'DEPOSIT_CONFIRMATION_TIMEOUT');
});
