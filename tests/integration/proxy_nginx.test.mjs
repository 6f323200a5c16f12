// proxy_nginx.test.mjs - statusrelay behind a real nginx (Debian's) terminating TLS on both
// ports (issue 21 item 2; DESIGN "Client addresses behind proxies"). The test makes a
// self-signed certificate (openssl CLI) and runs nginx as a private non-root instance (its own
// prefix and config in a temp dir, as bench/run.mjs does), configured as docs/operations.md "Behind a
// reverse proxy" says: TLS, websocket upgrade headers, and
// `proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for`. statusrelay trusts nginx's
// address (STATUSRELAY_TRUSTED_PROXIES=127.0.0.1).
//
// Clients connect to nginx from distinct loopback addresses (127.1.x.y, bound with
// localAddress), so nginx appends a distinct real address for each. Some clients also send an
// X-Forwarded-For of their own (a spoofing attempt): nginx appends the real one after it, and
// the relay must take the rightmost element that is not a trusted proxy - the real client.
//
// What a user sees: 2,000 dashboard clients (wss://) each get their own anonymous-id allowance
// (STATUSRELAY_WS_ANON_IDS_PER_ADDRESS=1: every one of them is acknowledged) while one address
// is still limited, whatever X-Forwarded-For it forges; the anonymous status-miss rate is per
// client address through https://; the upstream's SDK (its axios for status reads, its
// trackRequestStatus over wss://) and the page work through the proxy. On 3c49df1 every
// client had nginx's address: 1 of the 2,000 acknowledged, and one client's misses limited
// everyone.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';
import { freePort, startProcess, until, waitPort } from './lib/proc.mjs';
import { rid } from './lib/hooks.mjs';

const KEY = 'proxy-nginx-test-key';
const TOKEN = 'proxy-nginx-admin-token-0123456789';
const EVENT = 'request.status.updated';
const CLIENTS = 2000;
const cleanup = [];
let redis, sim, d, nginx, restTls, wsTls, dir;

// the certificate is ours: the SDK's axios (https module) and ws accept it
process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';

/** nginx.conf as docs/operations.md "Behind a reverse proxy" documents it, for this temp dir and ports. */
function nginxConf({ dir, restTls, wsTls, rest, ws }) {
  const tls = `ssl_certificate ${dir}/cert.pem;\n        ssl_certificate_key ${dir}/key.pem;`;
  return `worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
worker_rlimit_nofile 16384;
events { worker_connections 8192; }
http {
    access_log off;
    client_body_temp_path ${dir}/body;
    proxy_temp_path ${dir}/proxy;
    fastcgi_temp_path ${dir}/fastcgi;
    uwsgi_temp_path ${dir}/uwsgi;
    scgi_temp_path ${dir}/scgi;
    map $http_upgrade $connection_upgrade { default upgrade; '' close; }
    server {    # REST: https -> STATUSRELAY_HTTP_LISTEN
        listen 127.0.0.1:${restTls} ssl backlog=4096;
        ${tls}
        location / {
            proxy_pass http://127.0.0.1:${rest};
            proxy_http_version 1.1;
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header Forwarded "";
            proxy_set_header Connection "";
        }
    }
    server {    # dashboard: page and wss -> STATUSRELAY_WS_LISTEN
        listen 127.0.0.1:${wsTls} ssl backlog=4096;
        ${tls}
        location / {
            proxy_pass http://127.0.0.1:${ws};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header Forwarded "";
            proxy_read_timeout 1h;
            proxy_send_timeout 1h;
        }
    }
}
`;
}

before(async () => {
  redis = await startRedis();
  cleanup.push(() => redis.stop());
  sim = await startSim({ apiKey: KEY, seed: 21, rateLimit: 0 });
  cleanup.push(() => sim.stop());
  d = await startDaemon({
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrl, apiKey: KEY,
    env: {
      STATUSRELAY_TRUSTED_PROXIES: '127.0.0.1',
      STATUSRELAY_ADMIN_TOKEN: TOKEN,
      STATUSRELAY_WS_ANON_IDS_PER_ADDRESS: '1',
      STATUSRELAY_ANON_MISS_RATE: '2',
      STATUSRELAY_WS_MAX_CONNECTIONS_PER_ADDRESS: '20',
      STATUSRELAY_LOG_LEVEL: 'warn',
    },
  });
  cleanup.push(() => d.stop());
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'statusrelay-nginx-'));
  cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
    '-nodes', '-keyout', `${dir}/key.pem`, '-out', `${dir}/cert.pem`, '-days', '1',
    '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'], { stdio: 'ignore' });
  restTls = await freePort();
  wsTls = await freePort();
  fs.writeFileSync(`${dir}/nginx.conf`, nginxConf({ dir, restTls, wsTls, rest: d.httpPort, ws: d.wsPort }));
  nginx = startProcess(`nginx-${restTls}`, 'nginx', ['-p', dir, '-c', `${dir}/nginx.conf`, '-e', `${dir}/error.log`]);
  cleanup.push(() => nginx.stop());
  await waitPort(restTls);
  await waitPort(wsTls);
});
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });

/** HTTPS GET through nginx from localAddress with extra headers: { status, body }. */
function get(port, p, { localAddress = '127.0.0.1', headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const req = https.get({ host: '127.0.0.1', port, path: p, localAddress, headers, agent: false,
      rejectUnauthorized: false, timeout: 10000 }, (res) => {
      let body = '';
      res.on('data', (x) => { body += x; });
      res.on('end', () => resolve({ status: res.statusCode, body, headers: res.headers }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

/** A wss:// dashboard client through nginx from localAddress; subscribe(id) resolves the ack
 * or the refusal. */
function dash(localAddress, headers = {}) {
  const ws = new WebSocket(`wss://127.0.0.1:${wsTls}/`, { localAddress, headers,
    rejectUnauthorized: false, perMessageDeflate: false });
  const c = { ws, frames: [], closed: null };
  ws.on('message', (m) => { try { c.frames.push(JSON.parse(m.toString())); } catch {} });
  ws.on('close', (code) => { c.closed = code; });
  ws.on('error', (e) => { c.error = String(e); });
  c.ready = until(() => c.error ? Promise.reject(new Error(c.error)) : c.frames.some((f) => f.type === 'connection'),
    { timeoutMs: 30000, msg: `greeting (${localAddress})` });
  c.subscribe = (id) => {
    const from = c.frames.length;
    ws.send(JSON.stringify({ type: 'subscribe', event: EVENT, filters: { id } }));
    return until(() => c.frames.slice(from).find((f) =>
      (f.type === 'subscribe' && f.data?.filters?.id === id) || (f.type === 'error' && f.request === 'subscribe')),
    { timeoutMs: 30000, msg: `answer to subscribe (${localAddress})` });
  };
  c.close = () => { try { ws.terminate(); } catch {} };
  return c;
}

const addr = (i) => `127.1.${Math.floor(i / 250)}.${(i % 250) + 1}`; // distinct for i < 62,500

test('2,000 wss clients behind nginx each get their own anonymous allowance; one address stays limited', async () => {
  const t0 = Date.now();
  const clients = [];
  cleanup.push(() => { for (const c of clients) c.close(); });
  let acked = 0, refused = 0;
  const batch = 100;
  for (let i = 0; i < CLIENTS; i += batch) {
    await Promise.all(Array.from({ length: Math.min(batch, CLIENTS - i) }, async (_, k) => {
      const n = i + k + 1;
      // every tenth client also forges an X-Forwarded-For of its own
      const c = dash(addr(n), n % 10 === 0 ? { 'X-Forwarded-For': '203.0.113.99' } : {});
      clients.push(c);
      await c.ready;
      const a = await c.subscribe(rid(`nginx${n}`));
      if (a.type === 'subscribe' && a.status === 'success') acked++;
      else refused++;
    }));
  }
  const ms = Date.now() - t0;
  console.log(`# ${CLIENTS} wss clients through nginx: ${acked} acknowledged, ${refused} refused, ${ms} ms`);
  assert.equal(acked, CLIENTS, `every distinct client address gets its own id (refused ${refused})`);

  // one address is still limited: a second connection from 127.1.0.1 (its allowance spent),
  // whatever X-Forwarded-For it forges (nginx appends its real address: the rightmost)
  const again = dash(addr(1), { 'X-Forwarded-For': '198.51.100.7' });
  cleanup.push(() => again.close());
  await again.ready;
  const r = await again.subscribe(rid('again'));
  assert.equal(r.type, 'error', JSON.stringify(r));
  assert.equal(r.error.code, 'too_many_ids');
  await until(() => again.closed, { msg: 'closed 4429' });
  assert.equal(again.closed, 4429);
  for (const c of clients) c.close();
});

test('the dashboard connection cap per address counts the forwarded client, not nginx', async () => {
  // nginx's own connections are exempt (2,000 above went through it); one client address
  // behind it gets 20 (STATUSRELAY_WS_MAX_CONNECTIONS_PER_ADDRESS), its upgrades past that are
  // refused 503, and another client address is still served
  const mine = [];
  cleanup.push(() => { for (const c of mine) c.close(); });
  const results = await Promise.all(Array.from({ length: 25 }, () => {
    const c = dash('127.4.0.1');
    mine.push(c);
    return c.ready.then(() => 'ok', (e) => String(e));
  }));
  const ok = results.filter((r) => r === 'ok').length;
  assert.equal(ok, 20, results.join(' | '));
  assert.ok(results.filter((r) => r !== 'ok').every((r) => /503/.test(r)), results.join(' | '));
  const other = dash('127.4.0.2');
  mine.push(other);
  await other.ready;
  for (const c of mine) c.close();
  // once they are gone, the address is served again
  await until(async () => {
    const c = dash('127.4.0.1');
    mine.push(c);
    return c.ready.then(() => true, () => false);
  }, { timeoutMs: 10000, msg: '127.4.0.1 served again after closing' });
});

test('the anonymous miss rate is per client address through https://, forged X-Forwarded-For ignored', async () => {
  const miss = (localAddress, xff) => get(restTls, `/intents/status/v3?requestId=${rid('miss')}`,
    { localAddress, headers: xff ? { 'X-Forwarded-For': xff } : {} });
  // 127.2.0.1 spends its 2 misses a minute, changing its forged X-Forwarded-For each time
  const a = [];
  for (let i = 0; i < 3; i++) a.push((await miss('127.2.0.1', `192.0.2.${i + 1}`)).status);
  assert.notEqual(a[0], 429, `first miss: ${a}`);
  assert.notEqual(a[1], 429, `second miss: ${a}`);
  assert.equal(a[2], 429, `third miss of the same address: ${a}`);
  // another client address keeps its own allowance
  const b = await miss('127.2.0.2');
  assert.notEqual(b.status, 429, `another address: ${JSON.stringify(b)}`);
  // a malformed X-Forwarded-For from the client side is not read (nginx appends the real one)
  const c = await miss('127.2.0.3', 'garbage, "x');
  assert.notEqual(c.status, 429, `a garbage left part: ${JSON.stringify(c)}`);
});

test('the upstream SDK and the page through nginx (https and wss)', async () => {
  const sdk = await import('@relayprotocol/relay-sdk');
  const wsmod = await import(new URL('../node_modules/@relayprotocol/relay-sdk/_esm/src/utils/websocket.js', import.meta.url));
  const client = sdk.createClient({ baseApiUrl: `https://127.0.0.1:${restTls}`,
    websocket: { enabled: true, url: `wss://127.0.0.1:${wsTls}/` } });
  const id = (await sim.control('/requests', { path: ['pending', 'success'], stepMs: 1500, autoHashes: true })).id;
  // the SDK's websocket (window.WebSocket: ws, accepting our certificate)
  class TlsWebSocket extends WebSocket {
    constructor(url, protocols) { super(url, protocols, { rejectUnauthorized: false }); }
  }
  globalThis.window ??= globalThis;
  const saved = globalThis.WebSocket;
  globalThis.WebSocket = TlsWebSocket;
  const updates = [];
  const tracker = wsmod.trackRequestStatus({ event: EVENT, requestId: id, enabled: true,
    url: client.websocketUrl ?? `wss://127.0.0.1:${wsTls}/`, onUpdate: (u) => updates.push(u) });
  cleanup.push(() => { tracker.close(); globalThis.WebSocket = saved; });
  // the SDK's own status polling path: its axios against the relay's /intents/status/v3
  const res = await sdk.axios.get(`${client.baseApiUrl}/intents/status/v3?requestId=${id}`);
  assert.equal(res.status, 200);
  assert.ok(['pending', 'success', 'waiting'].includes(res.data.status), JSON.stringify(res.data));
  await until(() => updates.some((u) => u.status === 'success'), { timeoutMs: 20000,
    msg: `the SDK's websocket sees success (updates: ${JSON.stringify(updates.map((u) => u.status))})` });
  const last = await sdk.axios.get(`${client.baseApiUrl}/intents/status/v3?requestId=${id}`);
  assert.equal(last.data.status, 'success');
  tracker.close();
  globalThis.WebSocket = saved;
  // the page
  const page = await get(wsTls, '/', { localAddress: '127.3.0.1' });
  assert.equal(page.status, 200);
  assert.match(page.body, /<html/i);
  assert.match(page.headers['content-security-policy'] ?? '', /wss:/);
});

test('a malformed forwarded header from the trusted proxy falls back to its address, logged once', async () => {
  // straight to the relay from 127.0.0.1 (trusted): the header is the proxy's own
  const bad = async () => (await fetch(`${d.url}/intents/status/v3?requestId=${rid('bad')}`,
    { headers: { 'X-Forwarded-For': '198.51.100.1, not-an-address' } })).status;
  const got = [];
  for (let i = 0; i < 4; i++) got.push(await bad());
  assert.ok(got.every((s) => s === 404 || s === 429 || s === 200), `${got}`);
  await until(() => /malformed forwarded header from a trusted proxy/.test(d.proc.log()),
    { msg: 'logged' });
  const lines = d.proc.log().split('\n').filter((l) => /malformed forwarded header/.test(l));
  assert.equal(lines.length, 1, lines.join('\n'));
  assert.match(lines[0], /proxy=127\.0\.0\.1/);
  // every one is counted, logged or not
  const m = /^statusrelay_http_forwarded_malformed_total (\d+)$/m.exec(await (await fetch(`${d.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text());
  assert.ok(m && Number(m[1]) >= 4, `counted: ${m?.[0]}`);
});

test('a bad STATUSRELAY_TRUSTED_PROXIES entry stops start-up with one line naming it', () => {
  let out = '';
  try {
    execFileSync(process.env.STATUSRELAY_BIN ?? path.resolve('../bin/statusrelay'), ['serve'], {
      env: { ...process.env, STATUSRELAY_TRUSTED_PROXIES: '10.0.0.0/8, proxy.example' },
      stdio: ['ignore', 'pipe', 'pipe'], timeout: 10000 });
  } catch (e) { out = String(e.stderr); }
  const lines = out.trim().split('\n');
  assert.equal(lines.length, 1, out);
  assert.match(lines[0], /STATUSRELAY_TRUSTED_PROXIES/);
});
