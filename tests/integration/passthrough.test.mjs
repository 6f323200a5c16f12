// passthrough.test.mjs - STATUSRELAY_PASSTHROUGH (relay/api/proxy.c): with it on, a path the REST
// API does not serve goes to STATUSRELAY_UPSTREAM_API_URL verbatim (method, path, query, body,
// the client's own headers and key, never the relay's key nor its admin token) and the answer
// comes back verbatim (status, headers minus hop-by-hop, body), without the admin token even on
// a non-loopback listener; our own namespaces (/v1, /intents/status*, /healthz, /readyz,
// /metrics) are never forwarded; off by default. The upstream is a recording node server (to see
// exactly what arrives) and, for the key rules, the simulator; the upstream's own SDK
// (getQuote) sends a quote through.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { createClient, getQuote } from '@relayprotocol/relay-sdk';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';
import { freePort } from './lib/proc.mjs';

const TOKEN = 'admin-token-0123456789abcdef';
const RELAY_KEY = 'relay-own-upstream-key';
let redis, rec, daemon;

/** An HTTP server that records every request and answers what `reply` says. */
async function recorder() {
  const seen = [];
  let reply = () => ({ status: 200, headers: { 'content-type': 'application/json' }, body: '{}' });
  const srv = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const r = { method: req.method, url: req.url, headers: req.headers, rawHeaders: req.rawHeaders,
        body: Buffer.concat(chunks).toString('utf8') };
      seen.push(r);
      const a = reply(r);
      if (a.destroy) { res.socket.destroy(); return; }
      res.writeHead(a.status, a.headers);
      res.end(a.body ?? '');
    });
  });
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${srv.address().port}`, seen,
    setReply(f) { reply = f; },
    find: (p) => seen.filter((r) => r.url.startsWith(p)),
    // what clients sent through the relay: not the daemon's own upstream calls (its User-Agent)
    forwarded: () => seen.filter((r) => !(r.headers['user-agent'] ?? '').startsWith('statusrelay/')),
    close: () => new Promise((resolve) => { srv.closeAllConnections?.(); srv.close(resolve); }),
  };
}

/** node:http request (fetch refuses Connection headers): {status, headers, body}. */
function request(url, { method = 'GET', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers,
        body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

before(async () => {
  redis = await startRedis();
  rec = await recorder();
  const httpPort = await freePort();
  daemon = await startDaemon({
    redisUrl: redis.url, apiUrl: rec.url, apiKey: RELAY_KEY, httpPort, name: 'passthrough',
    env: {
      STATUSRELAY_PASSTHROUGH: 'true',
      STATUSRELAY_ADMIN_TOKEN: TOKEN,
      STATUSRELAY_HTTP_LISTEN: `0.0.0.0:${httpPort}`, // beyond loopback: the token is mandatory
    },
  });
});

after(async () => {
  await daemon?.stop();
  await rec?.close();
  await redis?.stop();
});

/** No recorded request may carry the relay's upstream key or its admin token anywhere. */
function assertNoRelaySecrets(r) {
  const all = JSON.stringify(r.rawHeaders);
  assert.ok(!all.includes(RELAY_KEY), `the relay's upstream key leaked: ${all}`);
  assert.ok(!all.includes(TOKEN), `the admin token leaked: ${all}`);
}

test('a POST is forwarded verbatim with the client\'s headers and answered verbatim, no admin token', async () => {
  rec.setReply(() => ({
    status: 201,
    headers: {
      'content-type': 'application/json; charset=utf-8', 'x-upstream': 'yes',
      'set-cookie': ['a=1; Path=/', 'b=2; Path=/'], connection: 'x-hop', 'x-hop': 'secret-hop',
      'cache-control': 'max-age=7',
    },
    body: '{"steps":[],"fees":{"gas":"1"}}',
  }));
  const body = '{"user":"0xabc","originChainId":1,"amount":"1000"}';
  const res = await request(`${daemon.url}/quote/v2?referrer=test&x=a%20b`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json', 'x-api-key': 'client-own-key', 'relay-sdk-version': '7.0.3',
      'x-custom': 'kept', authorization: `Bearer ${TOKEN}`, connection: 'keep-alive, x-drop-me',
      'x-drop-me': 'listed in Connection', 'x-empty': '',
      'x-forwarded-for': '203.0.113.9', forwarded: 'for=203.0.113.9', 'x-real-ip': '203.0.113.9',
    },
    body,
  });
  assert.equal(res.status, 201);
  assert.equal(res.body, '{"steps":[],"fees":{"gas":"1"}}');
  assert.equal(res.headers['x-upstream'], 'yes');
  assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
  assert.equal(res.headers['cache-control'], 'max-age=7', 'the upstream\'s own Cache-Control, not ours');
  assert.deepEqual(res.headers['set-cookie'], ['a=1; Path=/', 'b=2; Path=/']);
  assert.equal(res.headers['x-hop'], undefined, 'a response field named by Connection is hop-by-hop');

  const [r] = rec.find('/quote/v2');
  assert.ok(r, 'the upstream saw the request');
  assert.equal(r.method, 'POST');
  assert.equal(r.url, '/quote/v2?referrer=test&x=a%20b', 'path and query verbatim');
  assert.equal(r.body, body);
  assert.equal(r.headers['x-api-key'], 'client-own-key', 'the client\'s own key');
  assert.equal(r.headers['relay-sdk-version'], '7.0.3');
  assert.equal(r.headers['x-custom'], 'kept');
  assert.equal(r.headers['x-empty'], '', 'an empty header stays (empty)');
  assert.equal(r.headers['content-type'], 'application/json');
  assert.equal(r.headers['content-length'], String(Buffer.byteLength(body)));
  assert.equal(r.headers.authorization, undefined, 'the relay\'s admin token is not forwarded');
  assert.equal(r.headers['x-drop-me'], undefined, 'hop-by-hop (named by Connection) dropped');
  for (const h of ['x-forwarded-for', 'forwarded', 'x-real-ip'])
    assert.equal(r.headers[h], undefined, `the client's ${h} claim is not forwarded`);
  assert.equal(r.headers.host, new URL(rec.url).host, 'Host is the upstream\'s');
  assert.equal(r.headers.accept, undefined, 'no Accept added by us');
  assertNoRelaySecrets(r);
});

test('the client\'s own Authorization (not the admin token) is forwarded; nothing is added', async () => {
  rec.setReply(() => ({ status: 200, headers: { 'content-type': 'text/plain' }, body: 'ok' }));
  const res = await new Promise((resolve, reject) => {
    // a bare request: no Accept, no User-Agent; curl must not invent them
    const s = net.connect(new URL(daemon.url).port, '127.0.0.1');
    let buf = '';
    s.on('data', (d) => { buf += d; });
    s.on('end', () => resolve(buf));
    s.on('error', reject);
    s.write('GET /currencies/v2?chainId=1 HTTP/1.1\r\nHost: relay.example\r\n' +
      'Authorization: Bearer client-thing\r\nConnection: close\r\n\r\n');
  });
  assert.match(res, /^HTTP\/1\.1 200 /);
  assert.match(res, /\r\n\r\nok$/);
  const [r] = rec.find('/currencies/v2');
  assert.equal(r.method, 'GET');
  assert.equal(r.headers.authorization, 'Bearer client-thing');
  assert.equal(r.headers['user-agent'], undefined, 'no User-Agent of ours');
  assert.equal(r.headers.accept, undefined, 'no Accept of ours');
  assert.equal(r.headers['content-type'], undefined);
  assertNoRelaySecrets(r);
});

test('a forwarded answer carries the upstream\'s CORS headers only, even with admin CORS origins set', async () => {
  const d = await startDaemon({
    redisUrl: redis.url, apiUrl: rec.url, apiKey: RELAY_KEY, name: 'passthrough-cors',
    env: { STATUSRELAY_PASSTHROUGH: 'true', STATUSRELAY_REDIS_PREFIX: 'ptcors',
      STATUSRELAY_ADMIN_CORS_ORIGINS: 'https://app.example' },
  });
  try {
    rec.setReply(() => ({ status: 200, body: '{}',
      headers: { 'content-type': 'application/json', 'access-control-allow-origin': '*', vary: 'Accept-Encoding' } }));
    const r = await request(`${d.url}/quote?x=1`, { headers: { origin: 'https://app.example' } });
    assert.equal(r.status, 200);
    assert.equal(r.headers['access-control-allow-origin'], '*', 'one value: the upstream\'s');
    assert.equal(r.headers.vary, 'Accept-Encoding');
    // our own paths keep our CORS answer
    const own = await request(`${d.url}/v1/requests/0xnothing`, { headers: { origin: 'https://app.example' } });
    assert.equal(own.headers['access-control-allow-origin'], 'https://app.example');
  } finally { await d.stop(); }
});

test('every method goes through; HEAD keeps the upstream\'s Content-Length', async () => {
  rec.setReply((r) => ({
    status: r.method === 'DELETE' ? 204 : 200,
    headers: { 'content-type': 'application/json', 'x-method': r.method, ...(r.method === 'HEAD' ? { 'content-length': '42' } : {}) },
    body: r.method === 'HEAD' || r.method === 'DELETE' ? '' : JSON.stringify({ method: r.method, body: r.body }),
  }));
  for (const method of ['GET', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD']) {
    const withBody = ['PUT', 'PATCH'].includes(method);
    const res = await fetch(`${daemon.url}/things/${method}`, {
      method, headers: withBody ? { 'content-type': 'application/json' } : {},
      body: withBody ? '{"v":1}' : undefined,
    });
    assert.equal(res.headers.get('x-method'), method, method);
    if (method === 'HEAD') {
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-length'), '42');
    } else if (method === 'DELETE') {
      assert.equal(res.status, 204);
    } else {
      assert.deepEqual(await res.json(), { method, body: withBody ? '{"v":1}' : '' }, method);
    }
    const r = rec.find(`/things/${method}`).at(-1);
    assert.equal(r.method, method);
  }
});

test('our own paths are never forwarded and keep the admin token', async () => {
  const before = rec.forwarded().length;
  const bare = (p, init) => fetch(daemon.url + p, init);
  // (no requestId on the status paths: a valid one would make the daemon itself ask upstream)
  for (const p of ['/v1/requests', '/v1/nothing-here', '/v1', '/V1/requests', '/%76%31/requests',
    '/intents/status/v3', '/intents/status', '/intents/statusfoo', '/metrics']) {
    const res = await bare(p);
    assert.notEqual(res.status, 200, p);
    const body = await res.json();
    assert.ok(body.error || body.errorCode, `${p}: our own error shape, got ${JSON.stringify(body)}`);
  }
  assert.equal((await bare('/healthz')).status, 200);
  assert.equal((await bare('/readyz')).status, 200);
  // a known path with another method stays our 405 (with the token)
  const m = await fetch(`${daemon.url}/v1/requests`, { method: 'PUT', headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(m.status, 405);
  assert.equal(rec.forwarded().length, before, 'the upstream saw none of them');
});

test('limits and failures: body cap 413 (not forwarded), upstream down 502, too many headers 431', async () => {
  const before = rec.forwarded().length;
  const big = await fetch(`${daemon.url}/quote/v2`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: 'x'.repeat(1024 * 1024 + 1),
  });
  assert.equal(big.status, 413);
  assert.equal(rec.forwarded().length, before);

  const headers = {};
  for (let i = 0; i < 120; i++) headers[`x-h${i}`] = String(i);
  const many = await fetch(`${daemon.url}/chains`, { headers });
  assert.equal(many.status, 431);

  // an upstream that closes without answering
  rec.setReply(() => ({ destroy: true }));
  const down = await fetch(`${daemon.url}/chains`);
  assert.equal(down.status, 502);
  const b = await down.json();
  assert.equal(b.errorCode, 'UPSTREAM_UNAVAILABLE');
  assert.match(b.message, /upstream/, 'a top-level message upstream clients print');
  assert.equal(b.error.code, 'upstream_unavailable');
});

test('the upstream\'s SDK sends a quote through statusrelay with its own key', async () => {
  rec.setReply(() => ({ status: 200, headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ steps: [], fees: {}, details: { operation: 'bridge' } }) }));
  createClient({ baseApiUrl: daemon.url, source: 'statusrelay-test' });
  // the SDK sends its apiKey option only to the upstream's own hosts: with another base URL the
  // key travels as a header given to getQuote
  const q = await getQuote({
    chainId: 1, toChainId: 8453, currency: '0x0000000000000000000000000000000000000000',
    toCurrency: '0x0000000000000000000000000000000000000000', amount: '1000', tradeType: 'EXACT_INPUT',
    user: '0x1111111111111111111111111111111111111111', recipient: '0x1111111111111111111111111111111111111111',
  }, false, { 'x-api-key': 'sdk-user-key' });
  assert.equal(q.details.operation, 'bridge');
  const r = rec.find('/quote/v2').at(-1);
  assert.equal(r.method, 'POST');
  assert.equal(r.headers['x-api-key'], 'sdk-user-key');
  assert.ok(r.headers['relay-sdk-version'], 'the SDK\'s own header arrives');
  assert.equal(JSON.parse(r.body).originChainId, 1);
  assertNoRelaySecrets(r);
});

test('with the simulator upstream: its key rules see the client\'s key, never the relay\'s', async () => {
  const sim = await startSim({ apiKey: 'sim-key', name: 'passthrough-sim' });
  const r2 = await startRedis();
  const port = await freePort();
  const d = await startDaemon({
    redisUrl: r2.url, apiUrl: sim.url, wsUrl: sim.wsUrlWithKey, apiKey: 'sim-key', httpPort: port,
    name: 'passthrough-simd',
    env: { STATUSRELAY_PASSTHROUGH: 'true', STATUSRELAY_ADMIN_TOKEN: TOKEN, STATUSRELAY_HTTP_LISTEN: `0.0.0.0:${port}` },
  });
  try {
    // /requests/v3 needs a key at the simulator: the relay has the right one but must not lend it
    const none = await fetch(`${d.url}/requests/v3?limit=1`);
    assert.equal(none.status, 401);
    assert.match((await none.json()).message, /Missing API key/);
    const wrong = await fetch(`${d.url}/requests/v3?limit=1`, { headers: { 'x-api-key': 'nope' } });
    assert.equal(wrong.status, 401);
    assert.match((await wrong.json()).message, /Invalid API key/);
    const ok = await fetch(`${d.url}/requests/v3?limit=1`, { headers: { 'x-api-key': 'sim-key' } });
    assert.equal(ok.status, 200);
    assert.ok(Array.isArray((await ok.json()).requests));
    // an unknown upstream path: the simulator's own 404 body comes back
    const nf = await fetch(`${d.url}/quote/v2`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
    assert.equal(nf.status, 404);
    assert.equal((await nf.json()).errorCode, 'NOT_FOUND');
  } finally {
    await d.stop();
    await r2.stop();
    await sim.stop();
  }
});

test('off by default: unknown paths stay 401/404 and nothing is forwarded', async () => {
  const r2 = await startRedis();
  const d = await startDaemon({ redisUrl: r2.url, apiUrl: rec.url, name: 'passthrough-off',
    env: { STATUSRELAY_ADMIN_TOKEN: TOKEN } });
  const before = rec.forwarded().length;
  try {
    assert.equal((await fetch(`${d.url}/quote/v2`, { method: 'POST', body: '{}' })).status, 401);
    const res = await fetch(`${d.url}/chains`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(res.status, 404);
    assert.equal(rec.forwarded().length, before);
  } finally {
    await d.stop();
    await r2.stop();
  }
});
