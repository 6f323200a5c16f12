// status_fresh.test.mjs - fresh status reads (issue 21 item 1; DESIGN "Fresh status reads",
// docs/rest-api.md "Upstream-compatible surface"): GET /intents/status/v3 of an id no watch follows
// answers the upstream's current state - asked again unless the stored state was confirmed
// within STATUSRELAY_STATUS_MAX_AGE, one upstream call for concurrent reads of an id -, a read
// holds the id watched as a lease renewed by each read (never tracking: it ends when reads
// stop), and an upstream that cannot give a state gets the stored one with statusrelay-stale.
// The upstream's own SDK (@relayprotocol/relay-sdk) drives the first scenario: it subscribes
// over the dashboard websocket, sees `failure`, closes; the upstream then moves the request to
// `pending` and `refund`, and the relay's status read must follow within 2 s.
// Real redis-server, the simulator as the upstream, daemons on loopback.
import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import WS from 'ws';
import { createClient, execute } from '@relayprotocol/relay-sdk';
import { rawRequest } from './lib/http.mjs';
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';

const KEY = 'fresh-test-key';
const TOKEN = 'fresh-admin-token-0123456789abcdef';
const AUTH = { authorization: `Bearer ${TOKEN}` };
const USER = '0x1111111111111111111111111111111111111111';
let redis, sim;
let sdkDaemon; // admin token set: the SDK (no token) is anonymous
let fresh;     // STATUSRELAY_STATUS_MAX_AGE=1h
let quick;     // STATUSRELAY_STATUS_MAX_AGE=300ms, short read lease

// the SDK's trackRequestStatus uses window.WebSocket: Node gets `ws`, recording each socket
const sockets = [];
class RecordingWebSocket extends WS {
  constructor(url, protocols) {
    super(url, protocols);
    const rec = { url: String(url), frames: [], closeCode: null };
    sockets.push(rec);
    this.addEventListener('message', (e) => { try { rec.frames.push(JSON.parse(String(e.data))); } catch {} });
    this.addEventListener('close', (e) => { rec.closeCode = e.code; });
  }
}
globalThis.window ??= globalThis;
globalThis.WebSocket = RecordingWebSocket;

const hex = (n) => [...crypto.getRandomValues(new Uint8Array(n))].map((b) => b.toString(16).padStart(2, '0')).join('');

function daemon(name, env) {
  return startDaemon({
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrlWithKey, apiKey: KEY, name,
    env: { STATUSRELAY_REDIS_PREFIX: name, STATUSRELAY_ADMIN_TOKEN: TOKEN, ...env },
  });
}

before(async () => {
  redis = await startRedis();
  sim = await startSim({ apiKey: KEY, seed: 21, rateLimit: 0, name: 'fresh-sim' });
  sdkDaemon = await daemon('fresh-sdk', {});
  // a poll interval far beyond each test, so that counted upstream calls are the reads' own
  fresh = await daemon('fresh-1h', { STATUSRELAY_STATUS_MAX_AGE: '1h', STATUSRELAY_POLL_INTERVAL: '20s' });
  quick = await daemon('fresh-quick', { STATUSRELAY_STATUS_MAX_AGE: '300ms', STATUSRELAY_POLL_INTERVAL: '20s',
    STATUSRELAY_WS_ANON_LEASE: '2s' });
});
afterEach(async () => { await sim.control('/faults', null, 'DELETE'); });
after(async () => {
  for (const d of [sdkDaemon, fresh, quick]) await d?.stop();
  await sim?.stop();
  await redis?.stop();
});

const read = (d, id, opts = {}) => rawRequest(d.url, 'GET', `/intents/status/v3?requestId=${id}`, opts);
const simReq = (id) => sim.control(`/requests/${id}`);
const polls = async (id) => (await simReq(id)).statusPolls;
async function stateOf(d, id) {
  const r = await rawRequest(d.url, 'GET', `/v1/requests/${id}`, { headers: AUTH });
  return r.status === 404 ? null : r.body;
}
/** A simulator request at the start of path (advanced by hand). */
async function simRequest(path) {
  return (await sim.control('/requests', { path, stepMs: 0, autoHashes: true, originChainId: 1, destinationChainId: 8453 })).id;
}
/** Track id with the token until its first state is stored, then untrack it: an id with a
 *  stored state that no watch follows any more. */
async function storedUnwatched(d, id, status) {
  assert.equal((await d.post('/v1/requests', { requestId: id })).status, 201);
  await until(async () => (await stateOf(d, id))?.status === status, { msg: `${id} observed ${status}` });
  assert.equal((await d.del(`/v1/requests/${id}`)).status, 204);
  await until(async () => (await stateOf(d, id))?.watch === 'ended', { msg: `${id} watch ended` });
}
/** Read until the answer's status is want; resolves ms since t0. */
async function readUntil(d, id, want, t0, timeoutMs = 10000) {
  let last;
  try {
    await until(async () => { last = await read(d, id); return last.body?.status === want; },
      { timeoutMs, stepMs: 100, msg: `${id} read as ${want}` });
  } catch (e) {
    throw new Error(`${e.message}; last answer ${last?.status} ${last?.text}`);
  }
  return Date.now() - t0;
}

test('the SDK scenario: websocket sees failure and closes; status reads follow pending and refund within 2 s', async () => {
  const id = await simRequest(['waiting', 'pending', 'failure', 'pending', 'refund']);
  createClient({ baseApiUrl: sdkDaemon.url, source: 'statusrelay-fresh-test', pollingInterval: 300,
    maxPollingAttemptsBeforeTimeout: 40, websocket: { enabled: true, url: sdkDaemon.wsUrl } });
  const quote = {
    steps: [{ id: 'deposit', action: 'Confirm transaction in your wallet', description: 'Depositing funds',
      kind: 'transaction', requestId: id,
      items: [{ status: 'incomplete', data: { from: USER, to: '0x2222222222222222222222222222222222222222', data: '0x', value: '1000', chainId: 1 },
        check: { endpoint: `/intents/status?requestId=${id}`, method: 'GET' } }] }],
    fees: {},
    details: { operation: 'bridge', sender: USER, recipient: USER,
      currencyIn: { currency: { chainId: 1 } }, currencyOut: { currency: { chainId: 8453 } } },
  };
  const sent = [];
  const wallet = {
    vmType: 'evm', getChainId: async () => 1, address: async () => USER,
    handleSignMessageStep: async () => { throw new Error('no signature steps here'); },
    handleSendTransactionStep: async (chainId, item) => { sent.push(item); return `0x${hex(32)}`; },
    handleConfirmTransactionStep: () => new Promise(() => {}), // the chain never answers
    switchChain: async () => {},
  };
  const n0 = sockets.length;
  const outcome = execute({ quote, wallet }).then((r) => ({ result: r }), (e) => ({ error: e }));
  await until(() => sent.length > 0 && sockets[n0]?.frames.some((f) => f.type === 'subscribe'),
    { msg: 'the SDK subscribed over the dashboard websocket' });
  const socket = sockets[n0];
  await until(async () => (await stateOf(sdkDaemon, id))?.watch === 'active', { msg: 'watched while subscribed' });
  for (const want of ['pending', 'failure']) {
    await sim.control(`/requests/${id}/advance`, {});
    await until(() => socket.frames.some((f) => f.data?.status === want), { msg: `the SDK saw ${want}` });
  }
  // the SDK treats failure as terminal after 2 s without a change: execute() fails, the socket closes
  const r = await Promise.race([outcome, sleep(15000).then(() => ({ timeout: true }))]);
  assert.ok(r.error, `execute() should fail on failure: ${JSON.stringify(r)}`);
  await until(() => socket.closeCode !== null, { msg: 'the SDK closed its websocket' });
  await until(async () => (await stateOf(sdkDaemon, id))?.watch === 'ended', { msg: 'the watch ended with the subscription' });
  const before = await read(sdkDaemon, id);
  assert.equal(before.body.status, 'failure');

  // the upstream moves on: pending, then refund. Reads (anonymous, like the SDK's) follow.
  let t0 = Date.now();
  await sim.control(`/requests/${id}/advance`, {});
  const msPending = await readUntil(sdkDaemon, id, 'pending', t0);
  assert.ok(msPending <= 2000, `pending read ${msPending} ms after the upstream's change`);
  const st = await stateOf(sdkDaemon, id);
  assert.equal(st.watch, 'active', 'watched while read');
  assert.equal(st.tracked, false, 'a read lease, not tracking');
  t0 = Date.now();
  await sim.control(`/requests/${id}/advance`, {});
  const msRefund = await readUntil(sdkDaemon, id, 'refund', t0);
  assert.ok(msRefund <= 2000, `refund read ${msRefund} ms after the upstream's change`);
  console.log(`# status reads followed the upstream: pending after ${msPending} ms, refund after ${msRefund} ms`);
});

test('an unwatched id whose state is fresh is answered without an upstream call', async () => {
  const id = await simRequest(['waiting']);
  await storedUnwatched(fresh, id, 'waiting');
  const p0 = await polls(id);
  for (let i = 0; i < 5; i++) {
    const r = await read(fresh, id);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.status, 'waiting');
    assert.equal(r.headers['statusrelay-stale'], undefined);
  }
  assert.equal(await polls(id), p0, 'confirmed within STATUSRELAY_STATUS_MAX_AGE: no upstream call');
});

test('an unwatched id confirmed too long ago is read through once, concurrent reads share the call', async () => {
  const id = await simRequest(['waiting', 'pending']);
  await storedUnwatched(quick, id, 'waiting');
  await sim.control(`/requests/${id}/advance`, {}); // the upstream moved on while nobody watched
  await sleep(400); // beyond the max age (300ms)
  await sim.control('/faults', { httpDelayMs: 400 }); // the call stays open while the reads come
  const p0 = await polls(id);
  const rs = await Promise.all(Array.from({ length: 8 }, () => read(quick, id, { headers: AUTH })));
  for (const r of rs) {
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.status, 'pending', 'the upstream\'s current state');
  }
  assert.equal(await polls(id) - p0, 1, 'one upstream call for 8 concurrent reads');
  // the read holds the id watched (a lease, not tracking)
  const st = await until(async () => { const s = await stateOf(quick, id); return s?.watch === 'active' && s; }, { msg: 'watched while read' });
  assert.equal(st.tracked, false);
});

test('repeated reads keep an id watched (lease) at one watch\'s cost; it ends when reads stop', async () => {
  const id = await simRequest(['pending']);
  // an anonymous read (no token) of an id never seen here: the upstream answers 200
  const first = await read(quick, id);
  assert.equal(first.status, 200, first.text);
  assert.equal(first.body.status, 'pending');
  await until(async () => (await stateOf(quick, id))?.watch === 'active', { msg: 'watched after the read' });
  const p0 = await polls(id);
  const reads = 12;
  for (let i = 0; i < reads; i++) { // 6 s of reads, three times the lease (2s)
    const r = await read(quick, id);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.status, 'pending');
    const s = await stateOf(quick, id);
    assert.equal(s.watch, 'active', `still watched after read ${i}`);
    assert.equal(s.tracked, false, 'never tracked');
    await sleep(500);
  }
  const spent = await polls(id) - p0;
  assert.ok(spent <= 2, `${reads} reads of a watched id cost ${spent} upstream calls`);
  // reads stop: the lease ends, and the watch with it
  const t0 = Date.now();
  await until(async () => (await stateOf(quick, id))?.watch === 'ended', { msg: 'watch ended after the reads', timeoutMs: 10000 });
  console.log(`# ${reads} reads cost ${spent} upstream calls; the watch ended ${Date.now() - t0} ms after the last read (lease 2s)`);
  assert.equal(await redis.cmd('ZCARD', '{fresh-quick}:anonh'), 0, 'no holder left');
  assert.equal(await redis.cmd('ZSCORE', '{fresh-quick}:polln', id), null, 'not polled any more');
});

test('the upstream cannot give a state: the stored one, with statusrelay-stale', async () => {
  const id = await simRequest(['waiting', 'pending']);
  await storedUnwatched(quick, id, 'waiting');
  // older than the max age (300 ms): a read by id for the facts may confirm it meanwhile
  const cfOf = async () => Number(await redis.cmd('HGET', `{fresh-quick}:req:${id}`, 'cf'));
  await until(async () => Date.now() - await cfOf() > 400, { msg: 'stored state older than 400 ms' });
  // 5xx on every status call
  await sim.control('/faults', { httpErrorRate: 1, httpErrorStatus: 503, httpErrorPath: '/intents/status/v3' });
  const p0 = await polls(id);
  // the age is counted from when the upstream last confirmed the stored state (the hash's cf:
  // a read by id for the request's facts may have confirmed it during the sleep)
  const cf = await cfOf();
  const before = Date.now();
  const r = await read(quick, id, { headers: { origin: 'https://app.example' } });
  const after = Date.now();
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.status, 'waiting', 'the stored state');
  const age = Number(r.headers['statusrelay-stale']);
  assert.ok(cf > 0 && Number.isInteger(age) && age >= before - cf - 5 && age <= after - cf + 5,
    `statusrelay-stale: ${r.headers['statusrelay-stale']} (confirmed ${before - cf}..${after - cf} ms before)`);
  assert.match(r.headers['access-control-expose-headers'], /statusrelay-stale/i, 'readable by pages');
  assert.equal(await polls(id) - p0, 1, 'the upstream was asked');
  await sim.control('/faults', null, 'DELETE');
  // the budget spent (here: the anonymous miss rate of the address, then the upstream budget)
  // is answered the same way, without a call
  const d = await daemon('fresh-nobudget', { STATUSRELAY_STATUS_MAX_AGE: '0s', STATUSRELAY_ANON_MISS_RATE: '0',
    STATUSRELAY_POLL_INTERVAL: '20s' });
  try {
    const id2 = await simRequest(['waiting']);
    await storedUnwatched(d, id2, 'waiting');
    const q0 = await polls(id2);
    const s = await read(d, id2); // anonymous, miss rate 0
    assert.equal(s.status, 200, s.text);
    assert.equal(s.body.status, 'waiting');
    assert.ok(Number(s.headers['statusrelay-stale']) >= 0, JSON.stringify(s.headers));
    assert.equal(await polls(id2), q0, 'not asked');
    // with the token the upstream is asked and the answer is current (no header)
    const t = await read(d, id2, { headers: AUTH });
    assert.equal(t.status, 200, t.text);
    assert.equal(t.headers['statusrelay-stale'], undefined);
    assert.equal(await polls(id2) - q0, 1);
  } finally {
    await d.stop();
  }
});
