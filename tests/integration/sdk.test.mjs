// sdk.test.mjs - the upstream's real JavaScript SDK (@relayprotocol/relay-sdk 7.x, unchanged)
// pointed at statusrelay: createClient({baseApiUrl: statusrelay's REST URL, websocket: {enabled,
// url: statusrelay's dashboard port}}) and the SDK's own execute(), which runs executeSteps ->
// handleTransactionStepItem -> sendTransactionSafely (its status polling of check.endpoint, the
// unversioned /intents/status rewritten to /intents/status/v3 by the SDK) and trackRequestStatus
// (its websocket: subscribe with filters.id, `type:"subscribe"` frames read as acks, event frames
// to handleWebSocketUpdate, polling when the socket errors or closes). The wallet is an
// AdaptedWallet (the SDK's interface for wallets) that "sends" the deposit and never sees it
// confirmed on chain, so only statusrelay's answers can finish execute(). The quote is built here
// (the simulator models status, not quoting); the deposit notice the SDK posts to
// /transactions/index goes through the pass-through to the simulator.
//
// Upstream: the simulator. statusrelay: an admin token, the REST port on 0.0.0.0 (so the token is
// mandatory for /v1), the pass-through on, a stream token and STATUSRELAY_WS_ANONYMOUS=false: a
// websocket URL with ?token= may subscribe, one without is refused.
//
// Contract (DESIGN.md, Pinned details, "Upstream-compatible surface"): /intents/status/v3 answers
// without the admin token; a refused dashboard subscription gets its error frame and then a
// close, so the SDK falls back to polling.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import WS from 'ws';
import { createClient, execute, axios as sdkAxios } from '@relayprotocol/relay-sdk';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';
import { freePort, until } from './lib/proc.mjs';

const TOKEN = 'admin-token-0123456789abcdef';
const STREAM_TOKEN = 'stream-token-0123456789abcdef';
const ORIGIN = 1;      // the SDK's default chain list holds mainnet
const DEST = 8453;
const USER = '0x1111111111111111111111111111111111111111';
let redis, sim, daemon;

// ---- what the SDK did, observed from outside its code ----------------------------------------
// trackRequestStatus uses window.WebSocket (browser only): Node gets `ws`, recording each socket.
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

// every HTTP answer the SDK's own axios instance got (after the SDK's interceptor)
const calls = [];
sdkAxios.interceptors.response.use(
  (r) => { calls.push({ url: r.config.url, status: r.status, data: r.data }); return r; },
  (e) => { calls.push({ url: e.endpoint, error: e.message, data: e.rawError }); return Promise.reject(e); });

const hex = (n) => [...crypto.getRandomValues(new Uint8Array(n))].map((b) => b.toString(16).padStart(2, '0')).join('');

before(async () => {
  redis = await startRedis();
  sim = await startSim({ apiKey: 'sim-key', name: 'sdk-sim' });
  const httpPort = await freePort();
  daemon = await startDaemon({
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrlWithKey, apiKey: 'sim-key', httpPort,
    name: 'sdk',
    env: {
      STATUSRELAY_ADMIN_TOKEN: TOKEN,
      STATUSRELAY_HTTP_LISTEN: `0.0.0.0:${httpPort}`,
      STATUSRELAY_PASSTHROUGH: 'true',
      STATUSRELAY_STREAM_TOKEN: STREAM_TOKEN,
      STATUSRELAY_WS_ANONYMOUS: 'false',
      STATUSRELAY_POLL_INTERVAL: '250ms',
    },
  });
  // the configuration really is "beyond loopback": /v1 needs the token
  assert.equal((await fetch(`${daemon.url}/v1/requests`)).status, 401);
});

after(async () => {
  await daemon?.stop();
  await sim?.stop();
  await redis?.stop();
});

/** A quote as the upstream's /quote/v2 shapes it: one deposit transaction whose status is read
 *  at check.endpoint (the unversioned path: the SDK itself rewrites it to /intents/status/v3). */
function quoteFor(id) {
  return {
    steps: [{
      id: 'deposit', action: 'Confirm transaction in your wallet', description: 'Depositing funds',
      kind: 'transaction', requestId: id,
      items: [{
        status: 'incomplete',
        data: { from: USER, to: '0x2222222222222222222222222222222222222222', data: '0x', value: '1000', chainId: ORIGIN },
        check: { endpoint: `/intents/status?requestId=${id}`, method: 'GET' },
      }],
    }],
    fees: {},
    details: {
      operation: 'bridge', sender: USER, recipient: USER,
      currencyIn: { currency: { chainId: ORIGIN } }, currencyOut: { currency: { chainId: DEST } },
    },
  };
}

/** An AdaptedWallet: sends the deposit (a made-up hash), never confirms it on chain. */
function wallet(sent) {
  return {
    vmType: 'evm',
    getChainId: async () => ORIGIN,
    address: async () => USER,
    handleSignMessageStep: async () => { throw new Error('no signature steps here'); },
    handleSendTransactionStep: async (chainId, item) => { sent.push({ chainId, item }); return `0x${hex(32)}`; },
    handleConfirmTransactionStep: () => new Promise(() => {}), // the chain never answers
    switchChain: async () => {},
  };
}

/**
 * Run the SDK's execute() for a new simulator request. lifecycle/path: the simulator's script
 * (advanced by hand, `gapMs` apart, once `ready()` holds); ws: the websocket URL, or null for
 * polling only. Resolves {result | error, progress, socket, polls, ms}.
 */
async function runExecute({ lifecycle, path, ws, ready, gapMs = 300, timeoutMs = 25000 }) {
  const id = `0x${hex(32)}`;
  await sim.control('/requests', { id, ...(lifecycle ? { lifecycle } : { path }), originChainId: ORIGIN, destinationChainId: DEST });
  createClient({
    baseApiUrl: daemon.url, source: 'statusrelay-sdk-test', pollingInterval: 300,
    maxPollingAttemptsBeforeTimeout: 40,
    websocket: { enabled: ws != null, url: ws ?? undefined },
  });
  const nSockets = sockets.length;
  const nCalls = calls.length;
  const sent = [];
  const progress = [];
  const t0 = Date.now();
  const exec = execute({ quote: quoteFor(id), wallet: wallet(sent), onProgress: (p) => progress.push(p) })
    .then((r) => ({ result: r.data }), (e) => ({ error: e }));
  const view = () => ({
    socket: sockets.slice(nSockets)[0],
    polls: calls.slice(nCalls).filter((c) => c.url?.includes('/intents/status')),
    posts: calls.slice(nCalls).filter((c) => c.url?.includes('/transactions/index')),
  });
  let driveErr;
  const drive = (async () => {
    await until(() => sent.length > 0 && ready(view()), { timeoutMs: 10000, msg: `the SDK is tracking ${id}` });
    for (;;) {
      const st = await sim.control(`/requests/${id}`);
      if (st.terminal || st.pos >= st.path.length - 1) break;
      await sim.control(`/requests/${id}/advance`, {});
      await sleep(gapMs);
    }
  })().catch((e) => { driveErr = e; });
  let timer;
  const out = await Promise.race([
    exec,
    new Promise((resolve) => { timer = setTimeout(() => resolve({ timeout: true }), timeoutMs); }),
  ]);
  clearTimeout(timer);
  await drive;
  const v = view();
  const explain = `${id}: ws frames ${JSON.stringify(v.socket?.frames ?? null)} close ${v.socket?.closeCode}; ` +
    `polls ${JSON.stringify(v.polls.slice(-3))}; driver ${driveErr?.message ?? 'ok'}`;
  return { id, ...out, progress, sent, ms: Date.now() - t0, explain, ...v };
}

const statusFrames = (s, id) => (s?.frames ?? []).filter((f) => f.event === 'request.status.updated' && f.data?.status)
  .map((f) => f.data.status);

test('success over the websocket: execute() completes from statusrelay\'s frames alone', async () => {
  const r = await runExecute({
    lifecycle: 'success',
    ws: `${daemon.wsUrl}?token=${STREAM_TOKEN}`,
    ready: (v) => v.socket?.frames.some((f) => f.type === 'subscribe' && f.status === 'success'),
  });
  assert.ok(!r.timeout, `execute() did not finish: ${r.explain}`);
  assert.equal(r.error, undefined, `execute() failed: ${r.error?.message ?? r.error}; ${r.explain}`);
  const item = r.result.steps[0].items[0];
  assert.equal(item.status, 'complete');
  assert.equal(item.checkStatus, 'success');
  assert.ok(statusFrames(r.socket).includes('success'), r.explain);
  assert.equal(r.polls.length, 0, 'the websocket did it: no status polls');
  assert.equal(r.sent.length, 1, 'the wallet sent the deposit once');
  // the SDK's deposit notice reached the simulator through the pass-through (its own 404 body)
  await until(() => calls.some((c) => c.url === `${daemon.url}/transactions/index`), { msg: 'the deposit notice' });
  const notice = calls.find((c) => c.url === `${daemon.url}/transactions/index`);
  assert.equal(notice.error, 'Route not found', 'the simulator\'s own answer, not ours');
});

test('refund over the websocket (pending, failure, pending, refund): execute() ends "Refunded"', async () => {
  const r = await runExecute({
    lifecycle: 'refund',
    ws: `${daemon.wsUrl}?token=${STREAM_TOKEN}`,
    ready: (v) => v.socket?.frames.some((f) => f.type === 'subscribe' && f.status === 'success'),
  });
  assert.ok(!r.timeout, `execute() did not finish: ${r.explain}`);
  assert.ok(r.error, `execute() should fail with a refund: ${r.explain}`);
  assert.match(r.error.message, /Refunded/);
  assert.equal(r.progress.at(-1).refunded, true, 'onProgress reports refunded');
  assert.equal(r.progress.at(-1).steps[0].items[0].checkStatus, 'refund');
  assert.deepEqual(statusFrames(r.socket).slice(-4), ['pending', 'failure', 'pending', 'refund'], r.explain);
  assert.equal(r.polls.length, 0, 'no status polls');
});

test('a refused subscription closes the socket and the SDK falls back to polling (no admin token)', async () => {
  const r = await runExecute({
    lifecycle: 'success',
    ws: daemon.wsUrl, // no ?token=: anonymous subscriptions are off
    ready: (v) => v.polls.some((p) => p.status === 200),
  });
  // the refusal is not a "subscribe" frame (the SDK would read any as an ack) but an error
  // frame about the subscribe request, then a close with 4401 (docs/dashboard.md)
  assert.ok(!r.socket?.frames.some((f) => f.type === 'subscribe'), `no subscribe ack: ${r.explain}`);
  const refusal = r.socket?.frames.find((f) => f.type === 'error' && f.request === 'subscribe');
  assert.equal(refusal?.status, 'error', `the subscription is refused: ${r.explain}`);
  assert.equal(refusal.error.code, 'unauthorized');
  assert.equal(r.socket.closeCode, 4401, `the server closes the socket after the refusal: ${r.explain}`);
  assert.ok(!r.timeout, `execute() did not finish: ${r.explain}`);
  assert.equal(r.error, undefined, `execute() failed: ${r.error?.message ?? r.error}; ${r.explain}`);
  assert.equal(r.result.steps[0].items[0].checkStatus, 'success');
  // the SDK polled the versioned path (its rewrite of check.endpoint) without any token
  assert.ok(r.polls.length > 0);
  for (const p of r.polls) assert.match(p.url, new RegExp(`^${daemon.url}/intents/status/v3\\?requestId=${r.id}&referrer=`));
  assert.equal(r.polls.at(-1).status, 200);
  assert.equal(r.polls.at(-1).data.status, 'success');
});

test('polling only (websocket off), pending then refund: execute() ends "Refunded"', async () => {
  const r = await runExecute({
    path: ['waiting', 'pending', 'refund'],
    ws: null,
    ready: (v) => v.polls.some((p) => p.status === 200),
  });
  assert.ok(!r.timeout, `execute() did not finish: ${r.explain}`);
  assert.equal(r.socket, undefined, 'no websocket');
  assert.ok(r.error, `execute() should fail with a refund: ${r.explain}`);
  assert.match(r.error.message, /Refunded/);
  assert.equal(r.progress.at(-1).refunded, true);
  assert.equal(r.polls.at(-1).data.status, 'refund');
  assert.equal(r.polls.at(-1).data.failReason !== null, true, '"N/A" or a reason, never null');
});

test('the SDK in use is the real 7.x package', () => {
  assert.match(createClient({ baseApiUrl: daemon.url }).version, /^7\./);
});
