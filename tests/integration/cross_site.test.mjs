// cross_site.test.mjs - a hostile web page against the REST API (issue 15, high 1): with the
// default setup (loopback, no admin token) a browser can send "simple" cross-site POSTs
// (text/plain or form bodies, no preflight). State-changing requests need a JSON body type and,
// when they carry an Origin, an allowed one. Real redis-server and daemon on loopback.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startRedis, startDaemon } from './lib/stack.mjs';

const cleanup = [];
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });

async function stack(env = {}) {
  const redis = await startRedis();
  const d = await startDaemon({ redisUrl: redis.url, env });
  cleanup.push(() => d.stop(), () => redis.stop());
  return d;
}

const post = async (d, p, body, headers) => {
  const r = await fetch(d.url + p, { method: 'POST', headers, body });
  const t = await r.text();
  return { status: r.status, body: t ? JSON.parse(t) : null };
};
const hook = JSON.stringify({ url: 'http://127.0.0.1:9/attacker' });
const count = async (d) => (await d.get('/v1/webhooks')).body.webhooks.length;

test('simple cross-site bodies are refused: text/plain, form, none (415), nothing is created', async () => {
  const d = await stack();
  for (const ct of ['text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x', undefined]) {
    const r = await post(d, '/v1/webhooks', hook, ct ? { 'content-type': ct } : {});
    assert.equal(r.status, 415, `${ct}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, 'unsupported_media_type');
    assert.match(r.body.message, /application\/json/);
  }
  const rp = await post(d, '/v1/replay', '{"dead":true}', { 'content-type': 'text/plain' });
  assert.equal(rp.status, 415);
  assert.equal(await count(d), 0, 'no webhook was created');
  // JSON with parameters is fine
  const ok = await post(d, '/v1/webhooks', hook, { 'content-type': 'Application/JSON; charset=utf-8' });
  assert.equal(ok.status, 201, JSON.stringify(ok.body));
  assert.equal(await count(d), 1);
});

test('a state-changing request from a foreign Origin is refused (403), an allowed one passes', async () => {
  const d = await stack({ STATUSRELAY_ADMIN_CORS_ORIGINS: 'https://admin.example' });
  const json = { 'content-type': 'application/json' };
  const evil = await post(d, '/v1/webhooks', hook, { ...json, origin: 'https://evil.example' });
  assert.equal(evil.status, 403, JSON.stringify(evil.body));
  assert.equal(evil.body.error.code, 'forbidden_origin');
  const nul = await post(d, '/v1/requests', '{"requestIds":["0xabc"]}', { ...json, origin: 'null' });
  assert.equal(nul.status, 403);
  const del = await fetch(`${d.url}/v1/webhooks/wh_nope`, { method: 'DELETE', headers: { origin: 'https://evil.example' } });
  assert.equal(del.status, 403);
  assert.equal(await count(d), 0);
  const good = await post(d, '/v1/webhooks', hook, { ...json, origin: 'https://admin.example' });
  assert.equal(good.status, 201, JSON.stringify(good.body));
  // clients that are not browsers send no Origin
  assert.equal((await post(d, '/v1/webhooks', hook, json)).status, 201);
  // reads stay readable (the browser hides answers without CORS headers)
  const g = await fetch(`${d.url}/v1/webhooks`, { headers: { origin: 'https://evil.example' } });
  assert.equal(g.status, 200);
  assert.equal(g.headers.get('access-control-allow-origin'), null);
});

// GET with a given Host header (fetch does not let a page - or us - choose it; a rebound page's
// Host is its own name)
function getWithHost(d, p, host, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: d.httpPort, path: p, method: 'GET', agent: false,
      headers: { host, ...headers } }, (res) => {
      let t = '';
      res.on('data', (c) => { t += c; });
      res.on('end', () => resolve({ status: res.statusCode, body: t ? JSON.parse(t) : null }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('DNS rebinding: without a token only loopback Hosts (and STATUSRELAY_ALLOWED_HOSTS) are answered', async () => {
  const d = await stack({ STATUSRELAY_ALLOWED_HOSTS: 'relay.internal, other.internal' });
  const evil = await getWithHost(d, '/v1/webhooks', `evil.example:${d.httpPort}`);
  assert.equal(evil.status, 403, JSON.stringify(evil.body));
  assert.equal(evil.body.error.code, 'forbidden_host');
  assert.equal((await getWithHost(d, '/v1/requests', '127.0.0.1.evil.example')).status, 403);
  for (const h of [`127.0.0.1:${d.httpPort}`, `localhost:${d.httpPort}`, 'localhost', `[::1]:${d.httpPort}`,
    `127.1:${d.httpPort}`, 'relay.internal:8080', 'RELAY.internal', 'other.internal'])
    assert.equal((await getWithHost(d, '/v1/webhooks', h)).status, 200, h);
  // with an admin token the token protects: any Host, token required
  const t = await stack({ STATUSRELAY_ADMIN_TOKEN: 'tok-1234567890abcdef' });
  assert.equal((await getWithHost(t, '/v1/webhooks', 'evil.example')).status, 401);
  assert.equal((await getWithHost(t, '/v1/webhooks', 'relay.example', { authorization: 'Bearer tok-1234567890abcdef' })).status, 200);
});
