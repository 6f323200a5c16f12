// status_anon.test.mjs - status reads by anonymous callers create no state and cannot drain the
// upstream budget (issue 22 item 2; docs/rest-api.md "Upstream-compatible surface" and docs/internals.md "Sources and the
// upstream budget"). In the default configuration (no admin token, loopback), a request that
// carries an Origin - any web page can make a browser send it - is anonymous: its misses take
// the per-address miss rate, leave nothing behind unless the upstream answered 200 (never on a
// 404, a spent budget or a transport error), and their upstream calls come after the urgent
// polls and from a quarter of the budget whatever the number of client addresses. A tracked
// request's change is still seen within its poll interval while the upstream websocket is
// down. Real redis-server, the simulator as the upstream, daemons on loopback (the upstream
// websocket URL of the daemons points at a closed port: it stays down).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { rawRequest } from './lib/http.mjs';
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';

const KEY = 'anon-status-key';
const ORIGIN = 'https://evil.example';
const rid = () => '0x' + crypto.randomBytes(32).toString('hex');
let redis, sim;

before(async () => {
  redis = await startRedis();
  sim = await startSim({ apiKey: KEY, seed: 22, rateLimit: 0, name: 'status-anon-sim' });
});
after(async () => {
  await sim?.stop();
  await redis?.stop();
});

/** A daemon without an admin token (loopback) whose upstream websocket never connects. */
function daemon(prefix, env = {}) {
  return startDaemon({ redisUrl: redis.url, apiUrl: sim.url, apiKey: KEY, name: prefix,
    env: { STATUSRELAY_REDIS_PREFIX: prefix, ...env } });
}
const status404s = async () => (await sim.stats()).http?.byPath?.['/intents/status/v3']?.['404'] ?? 0;

/** Track a simulator request (waiting, then pending by hand) until its first state is stored. */
async function trackedRequest(d) {
  const id = (await sim.control('/requests', { path: ['waiting', 'pending'], stepMs: 0, autoHashes: true })).id;
  assert.equal((await d.post('/v1/requests', { requestId: id })).status, 201);
  await until(async () => (await d.get(`/v1/requests/${id}`)).body?.status === 'waiting', { msg: 'tracked request observed' });
  return id;
}

/** Advance the tracked request and resolve the ms until the daemon stored its change. */
async function changeSeenAfter(d, id) {
  const t0 = Date.now();
  await sim.control(`/requests/${id}/advance`, {});
  await until(async () => (await d.get(`/v1/requests/${id}`)).body?.status === 'pending',
    { msg: 'the tracked request\'s change', timeoutMs: 20000, stepMs: 25 });
  return Date.now() - t0;
}

/** n GETs of made-up ids, `conc` at a time; from(i) gives request i's source address. */
async function flood(d, n, conc, from = () => undefined) {
  const codes = {};
  let next = 0;
  await Promise.all(Array.from({ length: conc }, async () => {
    while (next < n) {
      const i = next++;
      const r = await rawRequest(d.url, 'GET', `/intents/status/v3?requestId=${rid()}`,
        { headers: { origin: ORIGIN }, localAddress: from(i) });
      codes[r.status] = (codes[r.status] ?? 0) + 1;
    }
  }));
  return codes;
}

test('2,000 cross-site reads of made-up ids track nothing; a tracked change is still seen in time', async () => {
  const d = await daemon('sanon-a');
  try {
    const R = await trackedRequest(d);
    const n0 = await status404s();
    const floodDone = flood(d, 2000, 40);
    await sleep(300);
    const ms = await changeSeenAfter(d, R); // while the reads come in, the websocket down
    const codes = await floodDone;
    console.log(`# 2,000 cross-site reads: ${JSON.stringify(codes)}; tracked change seen after ${ms} ms (poll interval 1s)`);
    assert.ok(ms <= 2500, `the tracked request's change was seen after ${ms} ms`);
    const asked = await status404s() - n0;
    assert.ok(asked <= 10, `${asked} upstream calls for made-up ids (miss rate 10 a minute)`);
    assert.equal(codes[404] ?? 0, asked, 'the upstream\'s own 404 for those it was asked about');
    assert.equal((codes[404] ?? 0) + (codes[429] ?? 0), 2000, JSON.stringify(codes));
    // nothing of the made-up ids in Redis: no request, no watch, no holder, no poll
    const keys = await redis.cmd('KEYS', '{sanon-a}:req:*');
    assert.deepEqual(keys, [`{sanon-a}:req:${R}`]);
    assert.equal(await redis.cmd('ZCARD', '{sanon-a}:watch'), 1);
    assert.equal(await redis.cmd('ZCARD', '{sanon-a}:ct'), 1);
    assert.equal(await redis.cmd('ZCARD', '{sanon-a}:anonh'), 0);
    for (const t of ['pollu', 'poll', 'polls', 'polln']) {
      const m = await redis.cmd('ZRANGE', `{sanon-a}:${t}`, 0, -1);
      assert.deepEqual(m.filter((x) => x !== R), [], `${t} holds only the tracked request`);
    }
  } finally {
    await d.stop();
  }
});

test('a miss is not tracked on a spent budget or a transport error', async () => {
  // the budget: one call a minute, spent by the first read; the rest get 503 and leave nothing
  const d = await daemon('sanon-b', { STATUSRELAY_UPSTREAM_BUDGET: '1' });
  const bad = await daemon('sanon-c', { STATUSRELAY_UPSTREAM_API_URL: 'http://127.0.0.1:9' });
  try {
    const ids = [rid(), rid(), rid()];
    const codes = [];
    for (const id of ids) codes.push((await rawRequest(d.url, 'GET', `/intents/status/v3?requestId=${id}`)).status);
    assert.ok(codes.includes(503), `budget spent: ${codes}`);
    const down = await rawRequest(bad.url, 'GET', `/intents/status/v3?requestId=${ids[0]}`);
    assert.equal(down.status, 503, down.text);
    assert.equal(down.body.errorCode, 'UPSTREAM_UNAVAILABLE');
    await sleep(300);
    for (const [p, dd] of [['sanon-b', d], ['sanon-c', bad]]) {
      assert.deepEqual(await redis.cmd('KEYS', `{${p}}:req:*`), [], `${p}: nothing stored`);
      for (const id of ids) assert.equal((await dd.get(`/v1/requests/${id}`)).status, 404);
    }
  } finally {
    await d.stop();
    await bad.stop();
  }
});

test('many addresses: anonymous misses take at most their share of the budget, urgent polls first', async () => {
  // budget 120 a minute: the anonymous reads' share is 30 (bursts of 7, then 23 a minute);
  // a miss rate per address high enough that only the share limits 20 addresses
  const d = await daemon('sanon-d', { STATUSRELAY_UPSTREAM_BUDGET: '120', STATUSRELAY_ANON_MISS_RATE: '6000' });
  try {
    const R = await trackedRequest(d);
    const n0 = await status404s();
    const t0 = Date.now();
    const floodDone = (async () => {
      const out = {};
      while (Date.now() - t0 < 8000) {
        const c = await flood(d, 40, 20, (i) => `127.0.0.${10 + (i % 20)}`);
        for (const [k, v] of Object.entries(c)) out[k] = (out[k] ?? 0) + v;
        await sleep(50);
      }
      return out;
    })();
    await sleep(2000);
    const ms = await changeSeenAfter(d, R);
    const codes = await floodDone;
    const secs = (Date.now() - t0) / 1000;
    const asked = await status404s() - n0;
    const bound = 7 + Math.ceil(secs * 23 / 60);
    console.log(`# 20 addresses, ${secs.toFixed(1)} s: ${JSON.stringify(codes)}; ${asked} upstream calls for them (share bound ${bound}); tracked change seen after ${ms} ms`);
    assert.ok(asked <= bound, `anonymous misses took ${asked} upstream calls in ${secs} s (bound ${bound})`);
    assert.ok(ms <= 2500, `the tracked request's change was seen after ${ms} ms`);
    assert.deepEqual(await redis.cmd('KEYS', '{sanon-d}:req:*'), [`{sanon-d}:req:${R}`]);
  } finally {
    await d.stop();
  }
});

test('loopback tools without an Origin are not anonymous; a token holder is not either', async () => {
  const d = await daemon('sanon-e', { STATUSRELAY_ANON_MISS_RATE: '0' });
  const t = await daemon('sanon-f', { STATUSRELAY_ANON_MISS_RATE: '0', STATUSRELAY_ADMIN_TOKEN: 'sanon-token-0123456789' });
  try {
    const id = rid();
    // no token configured: a loopback caller without Origin asks the upstream (404 verbatim),
    // the same caller with an Origin is anonymous (miss rate 0: 429)
    assert.equal((await rawRequest(d.url, 'GET', `/intents/status/v3?requestId=${id}`)).status, 404);
    assert.equal((await rawRequest(d.url, 'GET', `/intents/status/v3?requestId=${id}`, { headers: { origin: ORIGIN } })).status, 429);
    // a token configured: with it (Origin or not) the caller is known, without it anonymous
    const auth = { authorization: 'Bearer sanon-token-0123456789' };
    assert.equal((await rawRequest(t.url, 'GET', `/intents/status/v3?requestId=${id}`, { headers: { ...auth, origin: ORIGIN } })).status, 404);
    assert.equal((await rawRequest(t.url, 'GET', `/intents/status/v3?requestId=${id}`)).status, 429);
  } finally {
    await d.stop();
    await t.stop();
  }
});

test('behind a trusted proxy without a token, the forwarded client decides: beyond loopback is anonymous', async () => {
  // the test's own connection (127.0.0.1) plays a local reverse proxy listed as trusted
  const d = await daemon('sanon-g', { STATUSRELAY_ANON_MISS_RATE: '0', STATUSRELAY_TRUSTED_PROXIES: '127.0.0.1' });
  try {
    const id = rid();
    const via = (client) => rawRequest(d.url, 'GET', `/intents/status/v3?requestId=${id}`,
      { headers: { 'x-forwarded-for': client } });
    // a client beyond loopback behind the proxy is anonymous (miss rate 0: 429), even though
    // the peer itself is on loopback and sends no Origin
    assert.equal((await via('203.0.113.7')).status, 429);
    // a client on loopback behind the same proxy is a tool on this machine: asks the upstream
    assert.equal((await via('127.0.0.5')).status, 404);
  } finally {
    await d.stop();
  }
});
