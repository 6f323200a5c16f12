// conn_slots.test.mjs - one address cannot hold every connection slot (issue 22, high 3).
// The daemon runs with a low global cap on each port (so the test is quick) and one client
// address (127.0.0.1) opens many more connections than the cap, each sending a request and
// holding the connection open. Then another client address (127.0.0.2) and the upstream's
// signed webhook (from 127.0.0.3) must still be served on the REST port, and the page and a
// dashboard client (127.0.0.2) on the dashboard port. On 3c49df1 the caps were per listener
// only: the listener stayed paused at its cap and the others timed out.
// Also: STATUSRELAY_HTTP_KEEPALIVE_REQUESTS ends a keep-alive connection after its count, and
// the reserve lets only signed webhooks and token holders in once a crowd of addresses fills
// the listener.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { startDaemon, startRedis } from './lib/stack.mjs';
import { until } from './lib/proc.mjs';
import WebSocket from 'ws';
import { upstreamPayload, rid } from './lib/hooks.mjs';
import crypto from 'node:crypto';

const KEY = 'conn-slots-test-api-key';
const TOKEN = 'conn-slots-admin-token-0123456789';
const cleanup = [];
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** n connections to port from localAddress, each sending `request` once (if given) and then
 * held open; counts the ones the server closed. Bounded: resolves once every socket either
 * connected or failed. */
async function crowd(port, n, { localAddress = '127.0.0.1', request } = {}) {
  const socks = [];
  const st = { closed: 0, connected: 0 };
  const batch = 200;
  for (let i = 0; i < n; i += batch) {
    await Promise.all(Array.from({ length: Math.min(batch, n - i) }, () => new Promise((resolve) => {
      const s = net.connect({ port, host: '127.0.0.1', localAddress });
      socks.push(s);
      s.on('error', () => {});
      s.once('close', () => { st.closed++; });
      s.once('connect', () => { st.connected++; if (request) s.write(request); resolve(); });
      s.once('error', resolve);
      s.setTimeout(3000, resolve); // still in the backlog: counted as held
      s.on('data', () => {});
    })));
  }
  return { socks, st, close: () => { for (const s of socks) s.destroy(); } };
}

/** GET path from localAddress on a fresh connection; { status, body } or { error }. */
function getFrom(port, path, localAddress, { timeoutMs = 5000, headers = {} } = {}) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path, localAddress, agent: false, headers,
      timeout: timeoutMs }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body, headers: res.headers }));
    });
    req.on('timeout', () => { req.destroy(); resolve({ error: 'timeout' }); });
    req.on('error', (e) => resolve({ error: e.code ?? String(e) }));
  });
}

/** The signed upstream webhook, from localAddress; its status or an error. */
function ingestFrom(port, localAddress, id, { timeoutMs = 5000 } = {}) {
  const body = JSON.stringify(upstreamPayload({ rid: id, status: 'pending' }));
  const ts = String(Date.now());
  const sig = crypto.createHmac('sha256', KEY).update(`${ts}.${body}`).digest('hex');
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/v1/ingest/upstream', method: 'POST',
      localAddress, agent: false, timeout: timeoutMs,
      headers: { 'content-type': 'application/json', 'x-signature-timestamp': ts,
        'x-signature-sha256': sig, 'content-length': Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode }));
    });
    req.on('timeout', () => { req.destroy(); resolve({ error: 'timeout' }); });
    req.on('error', (e) => resolve({ error: e.code ?? String(e) }));
    req.end(body);
  });
}

const redis = await startRedis();
cleanup.push(() => redis.stop());

test('4,400 REST connections from one address leave another client and a signed webhook served', async () => {
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, env: {
    STATUSRELAY_HTTP_MAX_CONNECTIONS: '400', STATUSRELAY_WS_MAX_CONNECTIONS: '300' } });
  cleanup.push(() => d.stop());
  const t0 = Date.now();
  const c = await crowd(d.httpPort, 4400, {
    request: 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' });
  cleanup.push(() => c.close());
  // 127.0.0.1 also holds the harness's keep-alive /readyz connection: 127 of the crowd stay
  await until(() => c.st.closed >= 4400 - 128, { timeoutMs: 30000,
    msg: `connections past the per-address cap closed (closed ${c.st.closed})` });
  const other = await getFrom(d.httpPort, '/healthz', '127.0.0.2');
  assert.equal(other.status, 200, `another client: ${JSON.stringify(other)}`);
  const id = rid('slots');
  const hook = await ingestFrom(d.httpPort, '127.0.0.3', id);
  assert.ok(hook.status >= 200 && hook.status < 300, `signed webhook: ${JSON.stringify(hook)}`);
  // the crowd's own address is at its cap: a new connection from it is closed
  const same = await getFrom(d.httpPort, '/healthz', '127.0.0.1', { timeoutMs: 3000 });
  assert.ok(same.error, `a 129th connection of 127.0.0.1 is refused: ${JSON.stringify(same)}`);
  assert.ok(c.st.closed <= 4400 - 100, `the first 128 stay served (closed ${c.st.closed})`);
  console.log(`# 4,400 from one address: ${c.st.closed} closed at accept, other client and ` +
    `webhook served, ${Date.now() - t0} ms`);
  c.close();
  assert.match(d.proc.log(), /per-address connection cap reached.*listener=http addr=127\.0\.0\.1 cap=128/);
});

test('many dashboard connections from one address leave the page and another client served', async () => {
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, env: {
    STATUSRELAY_HTTP_MAX_CONNECTIONS: '400', STATUSRELAY_WS_MAX_CONNECTIONS: '300',
    STATUSRELAY_WS_MAX_CONNECTIONS_PER_ADDRESS: '50' } });
  cleanup.push(() => d.stop());
  const c = await crowd(d.wsPort, 1000, {
    request: 'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
      'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n' });
  cleanup.push(() => c.close());
  await until(() => c.st.closed >= 950, { timeoutMs: 30000,
    msg: `dashboard connections past the per-address cap closed (closed ${c.st.closed})` });
  const page = await getFrom(d.wsPort, '/', '127.0.0.2');
  assert.equal(page.status, 200, `the page: ${JSON.stringify(page).slice(0, 200)}`);
  assert.match(page.body, /<html/i);
  const greeting = await new Promise((resolve) => {
    const ws = new WebSocket(d.wsUrl, { localAddress: '127.0.0.2', perMessageDeflate: false });
    const t = setTimeout(() => { ws.terminate(); resolve({ error: 'timeout' }); }, 5000);
    ws.on('message', (m) => { clearTimeout(t); ws.close(); resolve(JSON.parse(m.toString())); });
    ws.on('error', (e) => { clearTimeout(t); resolve({ error: String(e) }); });
  });
  assert.equal(greeting.type, 'connection', `another dashboard client: ${JSON.stringify(greeting)}`);
  c.close();
  assert.match(d.proc.log(), /per-address connection cap reached.*listener=ws addr=127\.0\.0\.1 cap=50/);
});

test('a keep-alive connection serves STATUSRELAY_HTTP_KEEPALIVE_REQUESTS requests, then closes', async () => {
  const d = await startDaemon({ redisUrl: redis.url, env: { STATUSRELAY_HTTP_KEEPALIVE_REQUESTS: '3' } });
  cleanup.push(() => d.stop());
  const s = net.connect(d.httpPort, '127.0.0.1');
  let buf = '';
  let closed = false;
  s.on('data', (x) => { buf += x; });
  s.on('close', () => { closed = true; });
  s.on('error', () => {});
  await new Promise((r) => s.once('connect', r));
  for (let i = 0; i < 5; i++) {
    s.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    await sleep(100);
  }
  await until(() => closed, { timeoutMs: 5000, msg: 'closed after the third answer' });
  const answers = buf.split('HTTP/1.1 200').length - 1;
  assert.equal(answers, 3, buf);
  assert.match(buf, /Connection: close/i);
});

test('the reserve: a crowd of addresses fills the REST port, the signed webhook still gets in', async () => {
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, env: {
    STATUSRELAY_HTTP_MAX_CONNECTIONS: '160', STATUSRELAY_HTTP_MAX_CONNECTIONS_PER_ADDRESS: '40',
    STATUSRELAY_ADMIN_TOKEN: TOKEN } });
  cleanup.push(() => d.stop());
  // 4 addresses x 40 = the whole cap; the last 20 (the reserve, 160/8) are closed: 10 idle
  // ones after 2 s, 10 sending a plain request once answered (503 server_busy)
  const crowds = [];
  for (let i = 0; i < 4; i++)
    crowds.push(await crowd(d.httpPort, 40, { localAddress: `127.0.0.${10 + i}`,
      request: i % 2 === 0 ? undefined : 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' }));
  cleanup.push(() => { for (const c of crowds) c.close(); });
  await until(() => crowds.reduce((n, c) => n + c.st.closed, 0) >= 20, { timeoutMs: 10000,
    msg: 'the crowd\'s connections in the reserve are closed' });
  const plain = await getFrom(d.httpPort, '/healthz', '127.0.0.2', { timeoutMs: 4000 });
  const hook = await ingestFrom(d.httpPort, '127.0.0.3', rid('reserve'));
  assert.ok(hook.status >= 200 && hook.status < 300, `signed webhook: ${JSON.stringify(hook)}`);
  const admin = await getFrom(d.httpPort, '/v1/requests?limit=1', '127.0.0.4',
    { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(admin.status, 200, `token holder: ${JSON.stringify(admin)}`);
  // a plain request in the reserve is shed with an answer it can act on, then closed
  assert.equal(plain.status, 503, `a plain request in the reserve: ${JSON.stringify(plain)}`);
  assert.equal(JSON.parse(plain.body).error.code ?? JSON.parse(plain.body).error, 'server_busy', plain.body);
  assert.equal(plain.headers['retry-after'], '1');
  assert.equal(plain.headers.connection, 'close');
  const metrics = await getFrom(d.httpPort, '/metrics', '127.0.0.5', { headers: { authorization: `Bearer ${TOKEN}` } });
  const busy = /^statusrelay_http_reserve_busy_total (\d+)$/m.exec(metrics.body ?? '');
  assert.ok(busy && Number(busy[1]) >= 1, `counted: ${busy?.[0] ?? JSON.stringify(metrics).slice(0, 300)}`);
  for (const c of crowds) c.close();
});

test('a trusted proxy is exempt at accept; each forwarded head counts its client', async () => {
  const d = await startDaemon({ redisUrl: redis.url, env: {
    STATUSRELAY_TRUSTED_PROXIES: '127.0.0.1', STATUSRELAY_HTTP_MAX_CONNECTIONS_PER_ADDRESS: '5' } });
  cleanup.push(() => d.stop());
  /** A keep-alive connection from 127.0.0.1 (the "proxy") sending one request naming xff
   * (none: the proxy's own request); resolves its status, or 'closed'. */
  const held = [];
  cleanup.push(() => { for (const s of held) s.destroy(); });
  const one = (xff) => new Promise((resolve) => {
    const s = net.connect(d.httpPort, '127.0.0.1');
    held.push(s);
    let buf = '';
    s.on('error', () => {});
    s.on('connect', () => s.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n' +
      (xff ? `X-Forwarded-For: ${xff}\r\n` : '') + '\r\n'));
    s.on('data', (x) => { buf += x; const m = /^HTTP\/1\.1 (\d+)/.exec(buf); if (m) resolve(Number(m[1])); });
    s.on('close', () => resolve('closed'));
  });
  // the proxy's own connections (no forwarded client) are not counted: more than 5 stay open
  const own = [];
  for (let i = 0; i < 8; i++) own.push(await one());
  assert.deepEqual(own, Array(8).fill(200));
  // one client behind it: 5 connections served, the next ones closed at their head
  const a = [];
  for (let i = 0; i < 7; i++) a.push(await one(`203.0.113.50, 198.51.100.7`));
  assert.deepEqual(a, [200, 200, 200, 200, 200, 'closed', 'closed']);
  // another client behind the same proxy is served
  assert.equal(await one('198.51.100.8'), 200);
  // a client forging the first client's address on the left gets its own count (the rightmost)
  assert.equal(await one('198.51.100.7, 198.51.100.9'), 200);
  for (const s of held) s.destroy();
});
