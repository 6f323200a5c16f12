// api.test.mjs - the REST API (relay/api/server.c) against a real redis-server and a real
// `statusrelay serve`, with a scripted fake upstream (node http) for /intents/status/v3.
// Covers: every endpoint's status codes and shapes (DESIGN.md "REST API" and "Pinned
// details"), admin token on/off, 413 with the JSON error shape, 404/405, hostile bodies,
// upstream webhook ingest (good / bad / stale / malformed signatures, HMAC computed here
// with node crypto over the raw body), Redis down, a client leaving before its answer, and
// a port already in use.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { BIN, freePort, startProcess, until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { rawRequest } from './lib/http.mjs';

const API_KEY = 'test-upstream-api-key-0123456789';
const TOKEN = 'admin-token-0123456789abcdef';
const MB = 1024 * 1024;

const REQUEST_KEYS = ['requestId', 'status', 'updatedAt', 'seq', 'originChainId',
  'destinationChainId', 'inTxHashes', 'txHashes', 'failReason', 'refundFailReason', 'details',
  'depositAddress', 'metadata', 'tracked', 'firstSeenAt', 'lastSource', 'watch', 'watchUntil',
  'reorg'];
// GET /v1/requests/{id} adds the request facts (DESIGN "Request facts"): null until known
const REQUEST_ONE_KEYS = [...REQUEST_KEYS, 'request'];
const EVENT_KEYS = ['streamId', 'eventId', 'requestId', 'seq', 'status', 'previousStatus',
  'source', 'createdAt', 'data', 'event'];

const rid = () => '0x' + crypto.randomBytes(32).toString('hex');
const hash = () => '0x' + crypto.randomBytes(32).toString('hex');

// ---- fake upstream: GET /intents/status/v3 scripted per request id ---------------------------
const upstreamAnswers = new Map(); // id -> { status, body, delayMs }
const upstreamCalls = new Map();   // id -> count
let upstream;
let upstreamPort;

function startUpstream() {
  return new Promise((resolve) => {
    upstream = http.createServer((req, res) => {
      const u = new URL(req.url, 'http://x');
      if (u.pathname !== '/intents/status/v3') {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{"message":"Not found","errorCode":"NOT_FOUND"}');
        return;
      }
      const id = u.searchParams.get('requestId');
      upstreamCalls.set(id, (upstreamCalls.get(id) ?? 0) + 1);
      const a = upstreamAnswers.get(id) ?? {
        status: 404, body: '{"message":"Request not found","errorCode":"REQUEST_NOT_FOUND"}',
      };
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(a.status, { 'content-type': 'application/json' });
        res.end(a.body);
      };
      if (a.delayMs) setTimeout(send, a.delayMs); else send();
    });
    upstream.listen(0, '127.0.0.1', () => { upstreamPort = upstream.address().port; resolve(); });
  });
}

// ---- HTTP helpers ------------------------------------------------------------------------------
/** Any method, raw control (lib/http.mjs); a body without a Content-Type is sent as JSON. */
function request(base, method, path, opts = {}) {
  const headers = { ...(opts.headers || {}) };
  if (opts.body !== undefined && !Object.keys(headers).some((k) => k.toLowerCase() === 'content-type'))
    headers['content-type'] = 'application/json';
  return rawRequest(base, method, path, { ...opts, headers });
}

function assertError(r, status, code) {
  assert.equal(r.status, status, `expected ${status}, got ${r.status}: ${r.text}`);
  assert.match(r.headers['content-type'] ?? '', /^application\/json/);
  assert.ok(r.body && typeof r.body.error === 'object', `error shape: ${r.text}`);
  assert.equal(typeof r.body.error.message, 'string');
  if (code) assert.equal(r.body.error.code, code, r.text);
}

function sign(key, ts, body) {
  return crypto.createHmac('sha256', key).update(`${ts}.`).update(body).digest('hex');
}

function webhookBody(id, status, updatedAt, extra = {}) {
  return JSON.stringify({
    event: 'request.status.updated',
    timestamp: Date.now(),
    data: {
      status, inTxHashes: [hash()], txHashes: status === 'success' ? [hash()] : [],
      updatedAt, originChainId: 8453, destinationChainId: 42161, depositAddress: null,
      requestId: id, referrer: null, details: null,
      failReason: status === 'failure' || status === 'refund' ? 'SLIPPAGE' : 'N/A',
      refundFailReason: 'N/A', ...extra,
    },
  });
}

function ingest(base, body, { key = API_KEY, ts = String(Date.now()), sig, headers = {} } = {}) {
  return request(base, 'POST', '/v1/ingest/upstream', {
    body,
    headers: { 'content-type': 'application/json', 'x-signature-timestamp': ts, 'x-signature-sha256': sig ?? sign(key, ts, body), ...headers },
  });
}

// ---- the stack -------------------------------------------------------------------------------
let redis;
let A; // no admin token, upstream API key set (ingest on)
let B; // admin token, no upstream API key (ingest not configured)

before(async () => {
  await startUpstream();
  redis = await startRedis();
  A = await startDaemon({
    redisUrl: redis.url, apiUrl: `http://127.0.0.1:${upstreamPort}`,
    wsUrl: `ws://127.0.0.1:${upstreamPort}/`, apiKey: API_KEY, name: 'api-A',
    env: { STATUSRELAY_UPSTREAM_BUDGET: '100000' }, // tracked ids poll the fake upstream at 1/s
  });
  B = await startDaemon({
    redisUrl: `redis://127.0.0.1:${redis.port}/1`, apiUrl: `http://127.0.0.1:${upstreamPort}`,
    wsUrl: `ws://127.0.0.1:${upstreamPort}/`, name: 'api-B', env: { STATUSRELAY_ADMIN_TOKEN: TOKEN },
  });
});

after(async () => {
  await A?.stop();
  await B?.stop();
  await redis?.stop();
  upstream?.close();
  upstream?.closeAllConnections?.();
});

// ---- health, routing -------------------------------------------------------------------------
describe('health and routing', () => {
  test('GET /healthz and HEAD /healthz', async () => {
    const r = await request(A.url, 'GET', '/healthz');
    assert.equal(r.status, 200);
    assert.match(r.headers['content-type'], /^application\/json/);
    assert.deepEqual(r.body, { status: 'ok' });
    const h = await request(A.url, 'HEAD', '/healthz');
    assert.equal(h.status, 200);
    assert.equal(h.text, '');
  });

  test('GET /readyz reports redis, upstream websocket and lease', async () => {
    const r = await request(A.url, 'GET', '/readyz');
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.redis, 'up');
    assert.equal(typeof r.body.upstreamWebsocket, 'string');
    assert.ok(['held', 'standby'].includes(r.body.lease), r.text);
  });

  test('unknown path is 404 JSON, wrong method 405 JSON with Allow', async () => {
    assertError(await request(A.url, 'GET', '/nope'), 404, 'not_found');
    assertError(await request(A.url, 'GET', '/v1/requests/a/b/c'), 404, 'not_found');
    const r = await request(A.url, 'PUT', '/v1/requests');
    assertError(r, 405, 'method_not_allowed');
    assert.match(r.headers.allow, /GET/);
    assert.match(r.headers.allow, /POST/);
    const d = await request(A.url, 'POST', '/v1/requests/abc');
    assertError(d, 405, 'method_not_allowed');
    assert.match(d.headers.allow, /DELETE/);
    assertError(await request(A.url, 'POST', '/healthz'), 405, 'method_not_allowed');
    assertError(await request(A.url, 'PATCH', '/v1/events'), 405, 'method_not_allowed');
    // webhook routes (relay/api/webhooks.c) share the router
    const w = await request(A.url, 'PUT', '/v1/webhooks/wh_x');
    assertError(w, 405, 'method_not_allowed');
    assert.deepEqual(w.headers.allow.split(', ').sort(), ['DELETE', 'GET', 'HEAD', 'PATCH']);
    assertError(await request(A.url, 'GET', '/v1/webhooks/wh_x/nope'), 404, 'not_found');
  });

  test('GET /metrics is Prometheus text with HELP/TYPE lines', async () => {
    const r = await request(A.url, 'GET', '/metrics');
    assert.equal(r.status, 200);
    assert.match(r.headers['content-type'], /^text\/plain/);
    assert.match(r.text, /# HELP statusrelay_webhook_ingest_total /);
    assert.match(r.text, /# TYPE statusrelay_webhook_ingest_total counter/);
    assert.match(r.text, /statusrelay_webhook_ingest_total\{result="ok"\} \d+/);
    assert.match(r.text, /statusrelay_redis_up 1/);
    for (const line of r.text.trim().split('\n')) {
      assert.match(line, /^(# (HELP|TYPE) statusrelay_\w+ .+|statusrelay_\w+(\{[^}]*\})? -?\d+(\.\d+)?(e[+-]?\d+)?)$/, line);
    }
  });
});

// ---- admin token -----------------------------------------------------------------------------
describe('admin token', () => {
  test('health endpoints need no token', async () => {
    assert.equal((await request(B.url, 'GET', '/healthz')).status, 200);
    assert.equal((await request(B.url, 'GET', '/readyz')).status, 200);
  });

  test('everything else needs Authorization: Bearer <token>', async () => {
    const none = await request(B.url, 'GET', '/v1/requests');
    assertError(none, 401, 'unauthorized');
    assert.match(none.headers['www-authenticate'], /Bearer/);
    assertError(await request(B.url, 'GET', '/v1/requests', { headers: { authorization: `Bearer ${TOKEN}x` } }), 401, 'unauthorized');
    const sameLen = TOKEN.slice(0, -1) + (TOKEN.endsWith('f') ? 'e' : 'f');
    assertError(await request(B.url, 'GET', '/v1/requests', { headers: { authorization: `Bearer ${sameLen}` } }), 401, 'unauthorized');
    assertError(await request(B.url, 'GET', '/v1/requests', { headers: { authorization: TOKEN } }), 401, 'unauthorized');
    assertError(await request(B.url, 'GET', '/metrics'), 401, 'unauthorized');
    // the upstream-compatible status read is public (compat.test.mjs covers it)
    assert.notEqual((await request(B.url, 'GET', '/intents/status/v3?requestId=abc')).status, 401);
    assertError(await request(B.url, 'GET', '/no-such-path'), 401, 'unauthorized');
    assertError(await request(B.url, 'POST', '/v1/webhooks', { body: '{}' }), 401, 'unauthorized');
    assertError(await request(B.url, 'POST', '/v1/replay', { body: '{}' }), 401, 'unauthorized');
    const ok = await request(B.url, 'GET', '/v1/requests', { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(ok.status, 200, ok.text);
    const lower = await request(B.url, 'GET', '/v1/requests', { headers: { authorization: `bearer ${TOKEN}` } });
    assert.equal(lower.status, 200, lower.text);
    assertError(await request(B.url, 'GET', '/no-such-path', { headers: { authorization: `Bearer ${TOKEN}` } }), 404, 'not_found');
    assert.equal((await request(B.url, 'GET', '/metrics', { headers: { authorization: `Bearer ${TOKEN}` } })).status, 200);
  });

  test('ingest is authenticated by signature, not token; 503 without an API key', async () => {
    const body = webhookBody(rid(), 'pending', Date.now());
    assertError(await ingest(B.url, body), 503, 'not_configured');
  });

  test('without a configured token no Authorization is needed', async () => {
    assert.equal((await request(A.url, 'GET', '/v1/requests')).status, 200);
  });
});

// ---- body limits and hostile bodies ----------------------------------------------------------
describe('body limits and hostile input', () => {
  test('bodies over 1 MiB get 413 with the JSON error shape', async () => {
    const big = '{"requestId":"' + 'a'.repeat(MB) + '"}';
    assertError(await request(A.url, 'POST', '/v1/requests', { body: big, headers: { 'content-type': 'application/json' } }), 413, 'body_too_large');
    assertError(await request(A.url, 'POST', '/v1/ingest/upstream', { body: Buffer.alloc(2 * MB, 0x20) }), 413, 'body_too_large');
    assertError(await request(A.url, 'POST', '/v1/requests', { body: Buffer.alloc(MB + 1, 0x20), chunked: true }), 413, 'body_too_large');
    // exactly 1 MiB is allowed (and then refused as JSON, not as too large)
    const r = await request(A.url, 'POST', '/v1/requests', { body: Buffer.alloc(MB, 0x20) });
    assertError(r, 400);
    // with a token set, the size limit still answers JSON
    assertError(await request(B.url, 'POST', '/v1/requests', { body: Buffer.alloc(MB + 10, 0x20), headers: { authorization: `Bearer ${TOKEN}` } }), 413, 'body_too_large');
  });

  test('a Content-Length beyond the hard limit is refused before the body is read', async () => {
    const port = new URL(A.url).port;
    const text = await new Promise((resolve, reject) => {
      const s = net.connect(Number(port), '127.0.0.1');
      let out = '';
      s.on('data', (d) => { out += d; });
      s.on('close', () => resolve(out));
      s.on('error', reject);
      s.write('POST /v1/requests HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\n');
      setTimeout(() => s.destroy(), 2000);
    });
    assert.match(text, /^HTTP\/1\.1 413/);
    assert.equal((await request(A.url, 'GET', '/healthz')).status, 200);
  });

  test('hostile JSON bodies are 400 with a clear message', async () => {
    const post = (body) => request(A.url, 'POST', '/v1/requests', { body, headers: { 'content-type': 'application/json' } });
    const cases = [
      ['', 'invalid_body'],
      ['{', 'invalid_json'],
      ['{"requestId":"abc"', 'invalid_json'],
      ['nul\u0000', 'invalid_json'],
      [Buffer.from('{"requestId":"ab\u0000c"}'), 'invalid_json'],
      ['{"requestId":"ab\\u0000c"}', 'invalid_json'],
      ['['.repeat(200000), 'invalid_json'],
      ['{"a":'.repeat(50000) + '1' + '}'.repeat(50000), 'invalid_json'],
      ['{"requestId":"a","requestId":"b"}', 'invalid_json'],
      [Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), 'invalid_json'],
      ['null', 'invalid_body'],
      ['42', 'invalid_body'],
      ['"abc"', 'invalid_body'],
      ['["abc"]', 'invalid_body'],
      ['{}', 'invalid_body'],
      ['{"requestId":"a","requestIds":["b"]}', 'invalid_body'],
      ['{"requestId":123}', 'invalid_request_id'],
      ['{"requestId":""}', 'invalid_request_id'],
      ['{"requestId":"has space"}', 'invalid_request_id'],
      ['{"requestId":"é"}', 'invalid_request_id'],
      [JSON.stringify({ requestId: 'a'.repeat(129) }), 'invalid_request_id'],
      ['{"requestIds":"abc"}', 'invalid_body'],
      ['{"requestIds":{}}', 'invalid_body'],
      ['{"requestIds":[]}', 'invalid_body'],
      [JSON.stringify({ requestIds: Array.from({ length: 1001 }, (_, i) => `id${i}`) }), 'invalid_body'],
      [JSON.stringify({ requestIds: Array.from({ length: 100000 }, () => 1) }), 'invalid_body'],
      ['{"requestId":"abc","metadata":[1]}', 'invalid_metadata'],
      ['{"requestId":"abc","metadata":"x"}', 'invalid_metadata'],
      [JSON.stringify({ requestId: 'abc', metadata: { x: 'y'.repeat(4100) } }), 'invalid_metadata'],
    ];
    for (const [body, code] of cases) {
      const r = await post(body);
      assertError(r, 400, code);
      assert.ok(r.body.error.message.length > 5, r.text);
    }
    const bare = await post(JSON.stringify([rid()]));
    assert.match(bare.body.error.message, /array/);
    assert.equal((await request(A.url, 'GET', '/healthz')).status, 200);
  });

  test('an invalid id in requestIds names its index', async () => {
    const r = await request(A.url, 'POST', '/v1/requests', { body: JSON.stringify({ requestIds: [rid(), rid(), 'bad id!', rid()] }) });
    assertError(r, 400, 'invalid_request_id');
    assert.equal(r.body.error.field, 'requestIds[2]');
    assert.match(r.body.error.message, /requestIds\[2\]/);
    const t = await request(A.url, 'POST', '/v1/requests', { body: JSON.stringify({ requestIds: [rid(), 7] }) });
    assert.equal(t.body.error.field, 'requestIds[1]');
  });

  test('hostile paths and query strings', async () => {
    assertError(await request(A.url, 'GET', '/v1/requests/ab%00cd'), 400, 'invalid_request_id');
    assertError(await request(A.url, 'GET', '/v1/requests/' + 'a'.repeat(200)), 400, 'invalid_request_id');
    assertError(await request(A.url, 'GET', '/v1/requests/%C3%A9'), 400, 'invalid_request_id');
    assertError(await request(A.url, 'GET', '/v1/requests/abc%3Adef-unknown'), 404, 'not_found');
    assertError(await request(A.url, 'GET', '/v1/events?requestId=a%00b'), 400);
    assertError(await request(A.url, 'GET', '/v1/requests?limit=abc'), 400, 'invalid_parameter');
    assertError(await request(A.url, 'GET', '/v1/requests?limit=0'), 400, 'invalid_parameter');
    assertError(await request(A.url, 'GET', '/v1/requests?limit=-5'), 400, 'invalid_parameter');
    assertError(await request(A.url, 'GET', '/v1/requests?status=no%20spaces'), 400, 'invalid_parameter');
    assertError(await request(A.url, 'GET', '/v1/requests?cursor=garbage!!'), 400, 'invalid_cursor');
    assertError(await request(A.url, 'GET', '/v1/requests?cursor=' + Buffer.from('1|bad id').toString('base64url')), 400, 'invalid_cursor');
    assertError(await request(A.url, 'GET', '/v1/events?after=yesterday'), 400, 'invalid_parameter');
    assertError(await request(A.url, 'GET', '/v1/events?after=1-2-3'), 400, 'invalid_parameter');
    assertError(await request(A.url, 'GET', '/v1/events?after=99999999999999999999999-1'), 400, 'invalid_parameter');
  });
});

// ---- requests --------------------------------------------------------------------------------
describe('requests', () => {
  test('POST /v1/requests tracks: 201 when new, 200 when already tracked', async () => {
    const id = rid();
    const r1 = await request(A.url, 'POST', '/v1/requests', { body: JSON.stringify({ requestId: id, metadata: { order: 42, tags: ['a'] } }) });
    assert.equal(r1.status, 201, r1.text);
    assert.match(r1.headers['content-type'], /^application\/json/);
    assert.deepEqual(r1.body, { tracked: 1, created: 1 });
    const r2 = await request(A.url, 'POST', '/v1/requests', { body: JSON.stringify({ requestId: id }) });
    assert.equal(r2.status, 200);
    assert.deepEqual(r2.body, { tracked: 1, created: 0 });
    const a = rid(); const b = rid();
    const r3 = await request(A.url, 'POST', '/v1/requests', { body: JSON.stringify({ requestIds: [a, b, a, id] }) });
    assert.equal(r3.status, 201);
    assert.deepEqual(r3.body, { tracked: 3, created: 2 });
    // 1000 ids on B (its default budget throttles the polls they cause)
    const many = Array.from({ length: 1000 }, () => rid());
    const r4 = await request(B.url, 'POST', '/v1/requests', { body: JSON.stringify({ requestIds: many }), headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(r4.status, 201, r4.text);
    assert.deepEqual(r4.body, { tracked: 1000, created: 1000 });
  });

  test('metadata given with requestIds is stored for each id', async () => {
    const a = rid(); const b = rid();
    const r = await request(A.url, 'POST', '/v1/requests', { body: JSON.stringify({ requestIds: [a, b], metadata: { batch: 7 } }) });
    assert.equal(r.status, 201);
    for (const x of [a, b]) assert.deepEqual((await request(A.url, 'GET', `/v1/requests/${x}`)).body.metadata, { batch: 7 });
  });

  test('GET /v1/requests/{id}: tracked, not yet observed', async () => {
    const id = rid();
    await request(A.url, 'POST', '/v1/requests', { body: JSON.stringify({ requestId: id, metadata: { customer: 'c-1' } }) });
    const r = await request(A.url, 'GET', `/v1/requests/${id}`);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(Object.keys(r.body), REQUEST_ONE_KEYS);
    assert.equal(r.body.request, null, 'no facts without a /requests/v3 item');
    assert.equal(r.body.requestId, id);
    assert.equal(r.body.status, null);
    assert.equal(r.body.seq, 0);
    assert.equal(r.body.tracked, true);
    assert.deepEqual(r.body.metadata, { customer: 'c-1' });
    assert.deepEqual(r.body.inTxHashes, []);
    assert.equal(typeof r.body.firstSeenAt, 'number');
    assertError(await request(A.url, 'GET', `/v1/requests/${rid()}`), 404, 'not_found');
  });

  test('DELETE /v1/requests/{id}: 204, then tracked=false; 404 when unknown', async () => {
    const id = rid();
    await request(A.url, 'POST', '/v1/requests', { body: JSON.stringify({ requestId: id }) });
    const d = await request(A.url, 'DELETE', `/v1/requests/${id}`);
    assert.equal(d.status, 204);
    assert.equal(d.text, '');
    const g = await request(A.url, 'GET', `/v1/requests/${id}`);
    assert.equal(g.status, 200);
    assert.equal(g.body.tracked, false);
    assertError(await request(A.url, 'DELETE', `/v1/requests/${rid()}`), 404, 'not_found');
    assertError(await request(A.url, 'DELETE', '/v1/requests/bad%20id'), 400, 'invalid_request_id');
  });

  test('GET /v1/requests pages with an opaque cursor, every request once', async () => {
    const r0 = await request(A.url, 'GET', '/v1/requests?limit=500');
    assert.equal(r0.status, 200);
    assert.ok(Array.isArray(r0.body.requests));
    for (const o of r0.body.requests) assert.deepEqual(Object.keys(o), REQUEST_KEYS);
    // walk everything with small pages
    const seen = new Set();
    let cursor = null;
    let pages = 0;
    do {
      const r = await request(A.url, 'GET', `/v1/requests?limit=7${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      assert.equal(r.status, 200, r.text);
      assert.ok(r.body.requests.length <= 7);
      for (const o of r.body.requests) {
        assert.ok(!seen.has(o.requestId), `duplicate ${o.requestId} on page ${pages}`);
        seen.add(o.requestId);
      }
      cursor = r.body.cursor;
      pages++;
    } while (cursor !== null && pages < 1000);
    const total = Number(await redis.cmd('ZCARD', '{statusrelay}:ct'));
    assert.equal(seen.size, total);
    // the default limit is 50, values above 500 are clamped
    assert.equal((await request(A.url, 'GET', '/v1/requests')).body.requests.length, Math.min(50, total));
    assert.ok((await request(A.url, 'GET', '/v1/requests?limit=100000')).body.requests.length <= 500);
  });
});

// ---- ingest, events, status v3 ---------------------------------------------------------------
describe('upstream webhook ingest, events and /intents/status/v3', () => {
  const id = rid();
  const t0 = Date.now() - 60000;

  test('good signature (ms timestamp) is applied: 200 accepted, then duplicate', async () => {
    const body = webhookBody(id, 'pending', t0);
    const r = await ingest(A.url, body);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body, { result: 'accepted' });
    const again = await ingest(A.url, body);
    assert.equal(again.status, 200);
    assert.equal(again.body.result, 'duplicate');
    const g = await request(A.url, 'GET', `/v1/requests/${id}`);
    assert.equal(g.status, 200);
    assert.deepEqual(Object.keys(g.body), REQUEST_ONE_KEYS);
    assert.equal(g.body.request, null, 'no facts without a /requests/v3 item');
    assert.equal(g.body.status, 'pending');
    assert.equal(g.body.seq, 1);
    assert.equal(g.body.updatedAt, t0);
    assert.equal(g.body.originChainId, 8453);
    assert.equal(g.body.lastSource, 'webhook');
    assert.equal(g.body.tracked, true);
    assert.equal(g.body.failReason, 'N/A');
  });

  test('second-resolution timestamps verify too; later statuses make events', async () => {
    const ts = String(Math.floor(Date.now() / 1000));
    const r = await ingest(A.url, webhookBody(id, 'failure', t0 + 1000), { ts });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.result, 'accepted');
    const r2 = await ingest(A.url, webhookBody(id, 'refund', t0 + 2000));
    assert.equal(r2.body.result, 'accepted');
    const old = await ingest(A.url, webhookBody(id, 'pending', t0 - 1000));
    assert.equal(old.status, 200);
    assert.equal(old.body.result, 'stale');
  });

  test('bad, missing and stale signatures are 401; malformed bodies 400', async () => {
    const body = webhookBody(rid(), 'pending', Date.now());
    assertError(await ingest(A.url, body, { key: 'wrong-key' }), 401, 'bad_signature');
    assertError(await ingest(A.url, body, { sig: 'zz' }), 401, 'bad_signature');
    const ts0 = String(Date.now());
    assertError(await ingest(A.url, body + ' ', { ts: ts0, sig: sign(API_KEY, ts0, body) }), 401, 'bad_signature'); // raw bytes differ
    assertError(await ingest(A.url, body, { ts: ts0, sig: sign(API_KEY, String(Number(ts0) + 1), body) }), 401, 'bad_signature'); // other timestamp
    const sig = sign(API_KEY, String(Date.now()), body);
    assertError(await request(A.url, 'POST', '/v1/ingest/upstream', { body, headers: { 'x-signature-sha256': sig } }), 401, 'bad_signature');
    assertError(await request(A.url, 'POST', '/v1/ingest/upstream', { body, headers: { 'x-signature-timestamp': String(Date.now()) } }), 401, 'bad_signature');
    assertError(await ingest(A.url, body, { ts: String(Date.now() - 3600 * 1000) }), 401, 'stale_signature');
    assertError(await ingest(A.url, body, { ts: String(Math.floor(Date.now() / 1000) - 3600) }), 401, 'stale_signature');
    assertError(await ingest(A.url, body, { ts: String(Date.now() + 3600 * 1000) }), 401, 'stale_signature');
    assertError(await ingest(A.url, body, { ts: 'abc' }), 401);
    // correctly signed but malformed
    for (const bad of ['{', '[]', '{"event":"request.status.updated","data":{"status":"pending"}}',
      '{"event":"request.status.updated","timestamp":1,"data":{"requestId":"bad id","status":"pending","updatedAt":1}}',
      'x\u0000y']) {
      assertError(await ingest(A.url, bad), 400, 'invalid_body');
    }
    // a well-formed event type we do not handle is acknowledged, not retried by the upstream
    const other = JSON.stringify({ event: 'request.created', timestamp: Date.now(), data: {} });
    const ig = await ingest(A.url, other);
    assert.equal(ig.status, 200, ig.text);
    assert.deepEqual(ig.body, { result: 'ignored' });
    const m = await request(A.url, 'GET', '/metrics');
    const count = (k) => Number(m.text.match(new RegExp(`statusrelay_webhook_ingest_total\\{result="${k}"\\} (\\d+)`))[1]);
    assert.ok(count('ok') >= 5);
    assert.ok(count('bad_signature') >= 7);
    assert.ok(count('stale_signature') >= 3);
    assert.ok(count('malformed') >= 5);
  });

  test('GET /v1/events: shape, order, cursor, requestId filter, after=$', async () => {
    const r = await request(A.url, 'GET', `/v1/events?requestId=${id}`);
    assert.equal(r.status, 200, r.text);
    const evs = r.body.events;
    assert.equal(evs.length, 3);
    for (const e of evs) {
      assert.deepEqual(Object.keys(e), EVENT_KEYS);
      assert.equal(e.requestId, id);
      assert.match(e.eventId, /^evt_[0-9a-f]{32}$/);
      assert.equal(e.source, 'webhook');
      assert.equal(e.data.requestId, id);
      assert.equal(e.data.status, e.status);
    }
    assert.deepEqual(evs.map((e) => e.seq), [1, 2, 3]);
    assert.deepEqual(evs.map((e) => e.status), ['pending', 'failure', 'refund']);
    assert.deepEqual(evs.map((e) => e.previousStatus), [null, 'pending', 'failure']);
    assert.equal(r.body.cursor, evs[2].streamId);
    // exclusive after, with and without the filter
    const r2 = await request(A.url, 'GET', `/v1/events?requestId=${id}&after=${evs[0].streamId}`);
    assert.deepEqual(r2.body.events.map((e) => e.seq), [2, 3]);
    const r3 = await request(A.url, 'GET', `/v1/events?requestId=${id}&after=${evs[2].streamId}`);
    assert.deepEqual(r3.body.events, []);
    assert.equal(r3.body.cursor, evs[2].streamId);
    const all = await request(A.url, 'GET', `/v1/events?after=${evs[0].streamId}&limit=1000`);
    assert.ok(all.body.events.some((e) => e.streamId === evs[1].streamId));
    assert.ok(!all.body.events.some((e) => e.streamId === evs[0].streamId));
    const lim = await request(A.url, 'GET', `/v1/events?requestId=${id}&limit=2`);
    assert.equal(lim.body.events.length, 2);
    assert.equal(lim.body.cursor, evs[1].streamId);
    // tail: nothing now, cursor = newest
    const tail = await request(A.url, 'GET', '/v1/events?after=$');
    assert.deepEqual(tail.body.events, []);
    assert.match(tail.body.cursor, /^\d+-\d+$/);
    const next = webhookBody(rid(), 'waiting', Date.now());
    assert.equal((await ingest(A.url, next)).status, 200);
    const after = await request(A.url, 'GET', `/v1/events?after=${tail.body.cursor}`);
    assert.equal(after.body.events.length, 1);
    assert.equal(after.body.events[0].status, 'waiting');
    assert.deepEqual((await request(A.url, 'GET', `/v1/events?requestId=${rid()}`)).body, { events: [], cursor: null });
    // a bare ms timestamp: events created after that millisecond
    const ms = Number(evs[0].streamId.split('-')[0]);
    const byMs = await request(A.url, 'GET', `/v1/events?requestId=${id}&after=${ms - 1}`);
    assert.ok(byMs.body.events.some((e) => e.streamId === evs[0].streamId));
    const byMs2 = await request(A.url, 'GET', `/v1/events?requestId=${id}&after=${ms}`);
    assert.ok(!byMs2.body.events.some((e) => e.streamId === evs[0].streamId));
  });

  test('GET /v1/requests?status= filters by current status', async () => {
    const r = await request(A.url, 'GET', '/v1/requests?status=refund&limit=500');
    assert.equal(r.status, 200);
    assert.ok(r.body.requests.some((o) => o.requestId === id));
    for (const o of r.body.requests) assert.equal(o.status, 'refund');
    const p = await request(A.url, 'GET', '/v1/requests?status=pending&limit=500');
    assert.ok(!p.body.requests.some((o) => o.requestId === id));
    assert.deepEqual((await request(A.url, 'GET', '/v1/requests?status=nosuchstatus')).body, { requests: [], cursor: null });
  });

  test('list paging survives the cursor request leaving the status index', async () => {
    // three requests tracked together share one first-seen score: ties sort by id
    const ids = [rid(), rid(), rid()].sort();
    await request(A.url, 'POST', '/v1/requests', { body: JSON.stringify({ requestIds: ids }) });
    const now = Date.now();
    for (const x of ids) assert.equal((await ingest(A.url, webhookBody(x, 'delayed', now))).body.result, 'accepted');
    const p1 = await request(A.url, 'GET', '/v1/requests?status=delayed&limit=1');
    assert.deepEqual(p1.body.requests.map((o) => o.requestId), [ids[0]]);
    assert.equal(typeof p1.body.cursor, 'string');
    // ids[0] moves to another status: its cursor must still resume after it
    assert.equal((await ingest(A.url, webhookBody(ids[0], 'submitted', now + 1))).body.result, 'accepted');
    const p2 = await request(A.url, 'GET', `/v1/requests?status=delayed&limit=1&cursor=${p1.body.cursor}`);
    assert.deepEqual(p2.body.requests.map((o) => o.requestId), [ids[1]]);
    const p3 = await request(A.url, 'GET', `/v1/requests?status=delayed&limit=5&cursor=${p2.body.cursor}`);
    assert.deepEqual(p3.body.requests.map((o) => o.requestId), [ids[2]]);
    assert.equal(p3.body.cursor, null);
  });

  test('GET /intents/status/v3 from the cache: the upstream shape', async () => {
    const calls = upstreamCalls.get(id) ?? 0; // the poller may have asked while it was pending
    const r = await request(A.url, 'GET', `/intents/status/v3?requestId=${id}`);
    assert.equal(r.status, 200, r.text);
    assert.match(r.headers['content-type'], /^application\/json/);
    assert.equal(r.body.status, 'refund');
    assert.equal(r.body.updatedAt, t0 + 2000);
    assert.equal(r.body.failReason, 'SLIPPAGE');
    assert.equal(r.body.refundFailReason, 'N/A');
    assert.equal(r.body.requestId, undefined);
    assert.ok(Array.isArray(r.body.inTxHashes) && Array.isArray(r.body.txHashes));
    assert.equal(upstreamCalls.get(id) ?? 0, calls, 'a cache hit must not call upstream');
  });

  test('GET /intents/status/v3 miss: asks upstream once, answers verbatim, tracks', async () => {
    const miss = rid();
    const body = JSON.stringify({ status: 'pending', inTxHashes: [hash()], txHashes: [], updatedAt: Date.now(), originChainId: 1, destinationChainId: 10, failReason: 'N/A', refundFailReason: 'N/A' });
    upstreamAnswers.set(miss, { status: 200, body });
    const r = await request(A.url, 'GET', `/intents/status/v3?requestId=${miss}`);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.text, body);
    assert.ok(upstreamCalls.get(miss) >= 1);
    await until(async () => (await request(A.url, 'GET', `/v1/requests/${miss}`)).body?.tracked === true, { msg: 'miss tracked' });
    // a second read is served from the cache once the observation is applied
    await until(async () => (await request(A.url, 'GET', `/v1/requests/${miss}`)).body?.status === 'pending', { msg: 'miss applied' });
  });

  test('GET /intents/status/v3: upstream errors pass through, unknown ids are not tracked', async () => {
    const unknown = rid();
    const r = await request(A.url, 'GET', `/intents/status/v3?requestId=${unknown}`);
    assert.equal(r.status, 404);
    assert.deepEqual(r.body, { message: 'Request not found', errorCode: 'REQUEST_NOT_FOUND' });
    await sleep(200);
    assertError(await request(A.url, 'GET', `/v1/requests/${unknown}`), 404, 'not_found');
    const e = await request(A.url, 'GET', '/intents/status/v3');
    assertError(e, 400, 'invalid_parameter');
    assert.equal(e.body.errorCode, 'INVALID_INPUT_PARAMETERS');
    assert.equal(typeof e.body.message, 'string');
    const bad = await request(A.url, 'GET', '/intents/status/v3?requestId=bad%20id');
    assertError(bad, 404, 'request_not_found');
    assert.equal(bad.body.errorCode, 'REQUEST_NOT_FOUND');
  });

  test('a client that leaves before its answer does not hurt the daemon', async () => {
    const slow = rid();
    upstreamAnswers.set(slow, { status: 200, delayMs: 1500, body: JSON.stringify({ status: 'waiting', inTxHashes: [], txHashes: [], updatedAt: Date.now(), originChainId: 1, destinationChainId: 10, failReason: 'N/A', refundFailReason: 'N/A' }) });
    const ctl = new AbortController();
    const p = fetch(`${A.url}/intents/status/v3?requestId=${slow}`, { signal: ctl.signal }).catch((err) => err);
    // a raw socket that closes right after sending its request
    const s = net.connect(Number(new URL(A.url).port), '127.0.0.1', () => {
      s.end(`GET /intents/status/v3?requestId=${slow} HTTP/1.1\r\nHost: x\r\n\r\n`);
      setTimeout(() => s.destroy(), 50);
    });
    s.on('error', () => {});
    await sleep(200);
    ctl.abort();
    assert.ok((await p) instanceof Error);
    await sleep(2000);
    assert.equal((await request(A.url, 'GET', '/healthz')).status, 200);
    assert.equal(A.proc.child.exitCode, null);
    assert.doesNotMatch(A.proc.log(), /Sanitizer|runtime error|assert/i);
  });
});

// ---- Redis down, port in use (last: they disturb the stack) --------------------------------
describe('failure modes', () => {
  test('a port already in use fails start-up with a clear log line', async () => {
    const httpPort = new URL(A.url).port;
    const p = startProcess('api-port-in-use', BIN, ['serve'], {
      env: {
        STATUSRELAY_REDIS_URL: redis.url, STATUSRELAY_HTTP_LISTEN: `127.0.0.1:${httpPort}`,
        STATUSRELAY_WS_LISTEN: `127.0.0.1:${await freePort()}`,
        STATUSRELAY_UPSTREAM_API_URL: `http://127.0.0.1:${upstreamPort}`,
        STATUSRELAY_UPSTREAM_WS_URL: `ws://127.0.0.1:${upstreamPort}/`,
      },
    });
    const { code } = await Promise.race([p.exited, sleep(10000).then(() => ({ code: 'timeout' }))]);
    if (code === 'timeout') await p.stop('SIGKILL');
    assert.notEqual(code, 0);
    assert.notEqual(code, 'timeout', 'daemon must exit when the REST port is taken');
    assert.match(p.log(), /REST API cannot listen.*listen=127\.0\.0\.1:\d+/);
  });

  test('Redis down: readyz 503, writes 503, healthz 200; back when Redis returns', async () => {
    await redis.stop();
    await until(async () => (await request(A.url, 'GET', '/readyz')).status === 503, { msg: 'readyz 503' });
    const ready = await request(A.url, 'GET', '/readyz');
    assert.equal(ready.body.redis, 'down');
    assert.equal((await request(A.url, 'GET', '/healthz')).status, 200);
    assertError(await request(A.url, 'POST', '/v1/requests', { body: JSON.stringify({ requestId: rid() }) }), 503, 'store_unavailable');
    assertError(await request(A.url, 'GET', `/v1/requests/${rid()}`), 503, 'store_unavailable');
    assertError(await request(A.url, 'GET', '/v1/requests'), 503, 'store_unavailable');
    assertError(await request(A.url, 'GET', '/v1/events'), 503, 'store_unavailable');
    assertError(await ingest(A.url, webhookBody(rid(), 'pending', Date.now())), 503, 'store_unavailable');
    redis = await redis.restart();
    await until(async () => (await request(A.url, 'GET', '/readyz')).status === 200, { timeoutMs: 20000, msg: 'readyz back' });
    assert.equal((await request(A.url, 'POST', '/v1/requests', { body: JSON.stringify({ requestId: rid() }) })).status, 201);
  });
});
