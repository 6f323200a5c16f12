// compat.test.mjs - the upstream-compatible read surface (issue 13, relay/api/compat.c and
// server.c): GET /intents/status/v3 and GET /intents/status readable without the admin token
// (and with it when STATUSRELAY_STATUS_REQUIRE_TOKEN is set), the upstream's error shape
// {"message","errorCode"} there with the simulator's codes, a top-level "message" on every other
// error body, CORS (preflight and headers, allowed and refused origins, /v1 without CORS by
// default, STATUSRELAY_ADMIN_CORS_ORIGINS, the dashboard port) and the anonymous miss limit
// (STATUSRELAY_ANON_MISS_RATE: 429 RATE_LIMITED with Retry-After, per client address, known ids
// always answered; an anonymous miss the upstream knows is read-leased, not tracked). Real redis-server, the simulator as the upstream, daemons on loopback.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { until } from './lib/proc.mjs';
import { rawRequest } from './lib/http.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';

const KEY = 'compat-test-key';
const TOKEN = 'compat-admin-token-0123456789';
const AUTH = { authorization: `Bearer ${TOKEN}` };
const rid = () => '0x' + crypto.randomBytes(32).toString('hex');

let redis, sim;
let open;    // admin token set, status reads public, CORS "*" (defaults), miss rate 3
let locked;  // status reads need the token; listed origins only; admin CORS for one origin

const request = rawRequest;

/** The upstream's error shape (what the SDK reads), plus our own "error" object. */
function assertUpstreamError(r, status, errorCode) {
  assert.equal(r.status, status, `expected ${status}, got ${r.status}: ${r.text}`);
  assert.match(r.headers['content-type'] ?? '', /^application\/json/);
  assert.equal(typeof r.body?.message, 'string', r.text);
  assert.ok(r.body.message.length > 0);
  assert.equal(r.body.errorCode, errorCode, r.text);
}

/** Any other error: top-level "message" next to the {"error": {...}} object. */
function assertMessage(r, status, code) {
  assert.equal(r.status, status, `expected ${status}, got ${r.status}: ${r.text}`);
  assert.equal(typeof r.body?.message, 'string', r.text);
  assert.ok(r.body.message.length > 0);
  assert.equal(r.body.error?.code, code, r.text);
  assert.equal(r.body.error.message, r.body.message);
}

async function simRequest(extra = {}) {
  return sim.control('/requests', { path: ['waiting', 'pending'], stepMs: 0, autoHashes: true, ...extra });
}

async function statusCalls(code) {
  const s = await sim.stats();
  return s.http?.byPath?.['/intents/status/v3']?.[code] ?? 0;
}

before(async () => {
  redis = await startRedis();
  sim = await startSim({ apiKey: KEY, seed: 13, rateLimit: 0 });
  const common = { redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrlWithKey, apiKey: KEY };
  open = await startDaemon({ ...common, name: 'compat-open',
    env: { STATUSRELAY_REDIS_PREFIX: 'compat-open', STATUSRELAY_ADMIN_TOKEN: TOKEN,
      STATUSRELAY_ANON_MISS_RATE: '3' } });
  locked = await startDaemon({ ...common, name: 'compat-locked',
    env: { STATUSRELAY_REDIS_PREFIX: 'compat-locked', STATUSRELAY_ADMIN_TOKEN: TOKEN,
      STATUSRELAY_STATUS_REQUIRE_TOKEN: 'true',
      STATUSRELAY_CORS_ORIGINS: 'https://app.example, http://localhost:3000',
      STATUSRELAY_ADMIN_CORS_ORIGINS: 'https://admin.example' } });
});

after(async () => {
  await open?.stop();
  await locked?.stop();
  await sim?.stop();
  await redis?.stop();
});

describe('token', () => {
  test('status reads need no token with the admin token set; /v1 still does', async () => {
    const r = await simRequest();
    for (const p of ['/intents/status/v3', '/intents/status']) {
      const a = await request(open.url, 'GET', `${p}?requestId=${r.id}`);
      assert.equal(a.status, 200, `${p}: ${a.text}`);
      assert.equal(a.body.status, 'waiting');
      assert.ok(Array.isArray(a.body.inTxHashes));
    }
    // the unversioned path gives the same answer (once cached, byte for byte)
    await until(async () => (await request(open.url, 'GET', `/v1/requests/${r.id}`, { headers: AUTH })).body?.status === 'waiting', { msg: 'applied' });
    const v3 = await request(open.url, 'GET', `/intents/status/v3?requestId=${r.id}`);
    const un = await request(open.url, 'GET', `/intents/status?requestId=${r.id}`);
    assert.equal(un.text, v3.text);
    const v1 = await request(open.url, 'GET', '/v1/requests');
    assertMessage(v1, 401, 'unauthorized');
    assert.match(v1.headers['www-authenticate'], /Bearer/);
    assertMessage(await request(open.url, 'GET', '/metrics'), 401, 'unauthorized');
  });

  test('STATUSRELAY_STATUS_REQUIRE_TOKEN=true: the status reads need it too', async () => {
    const r = await simRequest();
    for (const p of ['/intents/status/v3', '/intents/status']) {
      const no = await request(locked.url, 'GET', `${p}?requestId=${r.id}`);
      assertUpstreamError(no, 401, 'UNAUTHORIZED');
      assert.equal(no.body.error.code, 'unauthorized');
      const yes = await request(locked.url, 'GET', `${p}?requestId=${r.id}`, { headers: AUTH });
      assert.equal(yes.status, 200, yes.text);
      assert.equal(yes.body.status, 'waiting');
    }
  });
});

describe('error shapes', () => {
  test('status reads: the upstream shape and codes, as the simulator answers them', async () => {
    for (const p of ['/intents/status/v3', '/intents/status']) {
      for (const q of ['', '?requestId=', '?other=1']) {
        const r = await request(open.url, 'GET', p + q);
        assertUpstreamError(r, 400, 'INVALID_INPUT_PARAMETERS');
        assert.equal(r.body.error.field, 'requestId');
      }
      assertUpstreamError(await request(open.url, 'GET', `${p}?requestId=bad%20id`), 404, 'REQUEST_NOT_FOUND');
      assertUpstreamError(await request(open.url, 'GET', `${p}?requestId=${'a'.repeat(300)}`), 404, 'REQUEST_NOT_FOUND');
      const post = await request(open.url, 'POST', p, { body: '{}' });
      assertUpstreamError(post, 405, 'METHOD_NOT_ALLOWED');
      assert.match(post.headers.allow, /GET/);
    }
    // the simulator (the upstream's model) gives the same codes for the same inputs
    const simMissing = await request(sim.url, 'GET', '/intents/status/v3', { headers: { 'x-api-key': KEY } });
    assert.equal(simMissing.status, 400);
    assert.equal(simMissing.body.errorCode, 'INVALID_INPUT_PARAMETERS');
    const simBad = await request(sim.url, 'GET', '/intents/status/v3?requestId=bad%20id', { headers: { 'x-api-key': KEY } });
    assert.equal(simBad.status, 404);
    assert.equal(simBad.body.errorCode, 'REQUEST_NOT_FOUND');
    // a well-formed unknown id: the upstream's own answer, verbatim (an admin caller: no limit)
    const unknown = await request(open.url, 'GET', `/intents/status/v3?requestId=${rid()}`, { headers: AUTH });
    assert.equal(unknown.status, 404);
    assert.deepEqual(unknown.body, { message: 'Request not found', errorCode: 'REQUEST_NOT_FOUND' });
  });

  test('every other error body carries a top-level "message"', async () => {
    assertMessage(await request(open.url, 'GET', '/no-such-path'), 401, 'unauthorized');
    assertMessage(await request(open.url, 'GET', '/no-such-path', { headers: AUTH }), 404, 'not_found');
    assertMessage(await request(open.url, 'GET', `/v1/requests/${rid()}`, { headers: AUTH }), 404, 'not_found');
    assertMessage(await request(open.url, 'PUT', '/v1/requests', { headers: AUTH, body: '{}' }), 405, 'method_not_allowed');
    assertMessage(await request(open.url, 'POST', '/v1/requests', { headers: { ...AUTH, 'content-type': 'application/json' }, body: '{"requestId":' }), 400, 'invalid_json');
    const wh = await request(open.url, 'POST', '/v1/webhooks', { headers: { ...AUTH, 'content-type': 'application/json' }, body: '{"url":"ftp://x"}' });
    assertMessage(wh, 400, wh.body?.error?.code);
    const big = await request(open.url, 'POST', '/v1/requests', { headers: AUTH, body: 'x'.repeat(1024 * 1024 + 1) });
    assertMessage(big, 413, 'body_too_large');
    // no upstream errorCode outside the status reads
    assert.equal(big.body.errorCode, undefined);
  });
});

describe('CORS', () => {
  test('status reads: preflight 204 for any origin by default, headers echoed', async () => {
    for (const p of ['/intents/status/v3', '/intents/status']) {
      const r = await request(open.url, 'OPTIONS', `${p}?requestId=${rid()}`, { headers: {
        origin: 'https://any.example', 'access-control-request-method': 'GET',
        'access-control-request-headers': 'relay-sdk-version,content-type' } });
      assert.equal(r.status, 204, r.text);
      assert.equal(r.text, '');
      assert.equal(r.headers['access-control-allow-origin'], '*');
      const methods = r.headers['access-control-allow-methods'].split(/,\s*/);
      assert.ok(methods.includes('GET') && methods.includes('OPTIONS'), methods.join());
      assert.equal(r.headers['access-control-allow-headers'], 'relay-sdk-version,content-type');
      assert.ok(Number(r.headers['access-control-max-age']) > 0);
    }
    // a plain OPTIONS (no preflight) answers Allow
    const plain = await request(open.url, 'OPTIONS', '/intents/status/v3');
    assert.equal(plain.status, 204);
    assert.match(plain.headers.allow, /GET/);
  });

  test('status reads: Access-Control-Allow-Origin on answers and on errors', async () => {
    const r = await simRequest();
    const ok = await request(open.url, 'GET', `/intents/status/v3?requestId=${r.id}`, { headers: { origin: 'https://any.example' } });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers['access-control-allow-origin'], '*');
    const bad = await request(open.url, 'GET', '/intents/status', { headers: { origin: 'https://any.example' } });
    assert.equal(bad.status, 400);
    assert.equal(bad.headers['access-control-allow-origin'], '*');
    assert.match(bad.headers['access-control-expose-headers'], /Retry-After/i);
  });

  test('/v1 has no CORS by default', async () => {
    const pre = await request(open.url, 'OPTIONS', '/v1/requests', { headers: {
      origin: 'https://any.example', 'access-control-request-method': 'GET',
      'access-control-request-headers': 'authorization' } });
    assert.notEqual(pre.status, 204);
    assert.equal(pre.headers['access-control-allow-origin'], undefined);
    assert.equal(pre.headers['access-control-allow-methods'], undefined);
    const get = await request(open.url, 'GET', '/v1/requests', { headers: { ...AUTH, origin: 'https://any.example' } });
    assert.equal(get.status, 200);
    assert.equal(get.headers['access-control-allow-origin'], undefined);
  });

  test('listed origins: allowed ones are echoed, others refused', async () => {
    const pf = (origin, p = '/intents/status/v3') => request(locked.url, 'OPTIONS', p, { headers: {
      origin, 'access-control-request-method': 'GET', 'access-control-request-headers': 'relay-sdk-version' } });
    const yes = await pf('https://app.example');
    assert.equal(yes.status, 204, yes.text);
    assert.equal(yes.headers['access-control-allow-origin'], 'https://app.example');
    assert.match(yes.headers.vary, /Origin/);
    assert.equal(yes.headers['access-control-allow-headers'], 'relay-sdk-version');
    assert.equal((await pf('http://localhost:3000')).headers['access-control-allow-origin'], 'http://localhost:3000');
    const no = await pf('https://evil.example');
    assertUpstreamError(no, 403, 'FORBIDDEN_ORIGIN');
    assert.equal(no.headers['access-control-allow-origin'], undefined);
    // a GET from a refused origin carries no Access-Control-Allow-Origin (the browser hides it)
    const r = await simRequest();
    const g = await request(locked.url, 'GET', `/intents/status/v3?requestId=${r.id}`, { headers: { ...AUTH, origin: 'https://evil.example' } });
    assert.equal(g.status, 200);
    assert.equal(g.headers['access-control-allow-origin'], undefined);
    const g2 = await request(locked.url, 'GET', `/intents/status/v3?requestId=${r.id}`, { headers: { ...AUTH, origin: 'https://app.example' } });
    assert.equal(g2.headers['access-control-allow-origin'], 'https://app.example');
    assert.match(g2.headers.vary, /Origin/);
    // STATUSRELAY_ADMIN_CORS_ORIGINS opens /v1 to its own origins only
    const adm = await pf('https://admin.example', '/v1/requests');
    assert.equal(adm.status, 204, adm.text);
    assert.equal(adm.headers['access-control-allow-origin'], 'https://admin.example');
    const notAdm = await pf('https://app.example', '/v1/requests');
    assertMessage(notAdm, 403, 'forbidden_origin');
    assert.equal(notAdm.headers['access-control-allow-origin'], undefined);
    const v1 = await request(locked.url, 'GET', '/v1/requests', { headers: { ...AUTH, origin: 'https://admin.example' } });
    assert.equal(v1.headers['access-control-allow-origin'], 'https://admin.example');
  });

  test('the dashboard port honours the read origins', async () => {
    const any = await fetch(`http://127.0.0.1:${open.wsPort}/`, { headers: { origin: 'https://any.example' } });
    assert.equal(any.status, 200);
    assert.equal(any.headers.get('access-control-allow-origin'), '*');
    await any.arrayBuffer();
    const listed = await fetch(`http://127.0.0.1:${locked.wsPort}/`, { headers: { origin: 'https://app.example' } });
    assert.equal(listed.headers.get('access-control-allow-origin'), 'https://app.example');
    await listed.arrayBuffer();
    const refused = await fetch(`http://127.0.0.1:${locked.wsPort}/`, { headers: { origin: 'https://evil.example' } });
    assert.equal(refused.status, 200);
    assert.equal(refused.headers.get('access-control-allow-origin'), null);
    await refused.arrayBuffer();
  });

  test('a bad origins setting stops start-up with a clear line', async () => {
    const { spawnSync } = await import('node:child_process');
    const { BIN } = await import('./lib/proc.mjs');
    const r = spawnSync(BIN, ['serve', '--print-config'], { encoding: 'utf8',
      env: { ...process.env, STATUSRELAY_CORS_ORIGINS: 'https://app.example/path' } });
    assert.equal(r.status, 2, r.stdout + r.stderr);
    assert.match(r.stderr, /STATUSRELAY_CORS_ORIGINS/);
  });
});

describe('anonymous miss limit', () => {
  test('429 RATE_LIMITED after N misses from one address; known ids still answered', async () => {
    const known = await simRequest();
    const tracked = await simRequest();
    // known: tracked with the token and read once (cached); tracked: tracked, maybe not observed
    assert.equal((await request(open.url, 'POST', '/v1/requests', { headers: { ...AUTH, 'content-type': 'application/json' }, body: JSON.stringify({ requestId: known.id }) })).status, 201);
    await until(async () => (await request(open.url, 'GET', `/v1/requests/${known.id}`, { headers: AUTH })).body?.status === 'waiting', { msg: 'known applied' });

    const from = '127.0.0.2';
    const before404 = await statusCalls('404');
    const unknown = [rid(), rid(), rid(), rid(), rid()];
    for (let i = 0; i < 3; i++) {
      const r = await request(open.url, 'GET', `/intents/status/v3?requestId=${unknown[i]}`, { localAddress: from });
      assertUpstreamError(r, 404, 'REQUEST_NOT_FOUND');
    }
    const limited = await request(open.url, 'GET', `/intents/status/v3?requestId=${unknown[3]}`, { localAddress: from, headers: { origin: 'https://any.example' } });
    assertUpstreamError(limited, 429, 'RATE_LIMITED');
    assert.ok(Number(limited.headers['retry-after']) >= 1, JSON.stringify(limited.headers));
    assert.equal(limited.headers['access-control-allow-origin'], '*');
    // the unversioned path shares the bucket
    assertUpstreamError(await request(open.url, 'GET', `/intents/status?requestId=${unknown[3]}`, { localAddress: from }), 429, 'RATE_LIMITED');
    // the refused reads never reached the upstream
    assert.equal(await statusCalls('404') - before404, 3);

    // known ids are always answered: cached, and tracked but not (necessarily) observed
    const k = await request(open.url, 'GET', `/intents/status/v3?requestId=${known.id}`, { localAddress: from });
    assert.equal(k.status, 200, k.text);
    assert.equal(k.body.status, 'waiting');
    assert.equal((await request(open.url, 'POST', '/v1/requests', { headers: { ...AUTH, 'content-type': 'application/json' }, body: JSON.stringify({ requestId: tracked.id }) })).status, 201);
    const t = await request(open.url, 'GET', `/intents/status/v3?requestId=${tracked.id}`, { localAddress: from });
    assert.equal(t.status, 200, t.text);

    // the admin token lifts the limit; another address has its own bucket
    const admin = await request(open.url, 'GET', `/intents/status/v3?requestId=${unknown[4]}`, { localAddress: from, headers: AUTH });
    assertUpstreamError(admin, 404, 'REQUEST_NOT_FOUND');
    const other = await request(open.url, 'GET', `/intents/status/v3?requestId=${unknown[4]}`, { localAddress: '127.0.0.3' });
    assertUpstreamError(other, 404, 'REQUEST_NOT_FOUND');

    // anonymous misses the upstream does not know are not tracked
    for (const id of unknown) {
      const g = await request(open.url, 'GET', `/v1/requests/${id}`, { headers: AUTH });
      assert.equal(g.status, 404, `${id} must not be tracked: ${g.text}`);
    }
  });

  test('an anonymous miss the upstream knows is answered and watched while read, not tracked', async () => {
    // (issue 22: a read keeps an id watched only as a lease, never as tracking; this test
    // asserted tracking before)
    const r = await simRequest();
    const a = await request(open.url, 'GET', `/intents/status/v3?requestId=${r.id}`, { localAddress: '127.0.0.4' });
    assert.equal(a.status, 200, a.text);
    const g = await until(async () => {
      const b = (await request(open.url, 'GET', `/v1/requests/${r.id}`, { headers: AUTH })).body;
      return b?.watch === 'active' && b.status === 'waiting' && b;
    }, { msg: 'watched while read' });
    assert.equal(g.tracked, false);
  });

  test('rate 1: one miss, then 429 with Retry-After near a minute', async () => {
    const d = await startDaemon({ redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrlWithKey, apiKey: KEY,
      name: 'compat-rate1', env: { STATUSRELAY_REDIS_PREFIX: 'compat-rate1', STATUSRELAY_ADMIN_TOKEN: TOKEN,
        STATUSRELAY_ANON_MISS_RATE: '1' } });
    try {
      assert.equal((await request(d.url, 'GET', `/intents/status/v3?requestId=${rid()}`)).status, 404);
      const l = await request(d.url, 'GET', `/intents/status/v3?requestId=${rid()}`);
      assertUpstreamError(l, 429, 'RATE_LIMITED');
      const ra = Number(l.headers['retry-after']);
      assert.ok(ra >= 55 && ra <= 60, `Retry-After ${ra}`);
    } finally {
      await d.stop();
    }
  });
});
