// fd_limit.test.mjs - descriptor exhaustion (issue 15, high 2): the daemon runs in a child
// under a low descriptor limit (prlimit --nofile=N:N) and clients open more idle connections
// than it can take on both ports. What a user sees is asserted: the daemon's CPU time
// (/proc/<pid>/stat) stays low instead of spinning, its log stays a handful of lines instead
// of a flood, it answers again once the connections close, and a webhook delivery made while
// descriptors are exhausted is delivered afterwards (valid signature) with no attempt burnt.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import { Webhook } from 'standardwebhooks';
import { startRedis } from './lib/stack.mjs';
import { BIN, freePort, startProcess, until } from './lib/proc.mjs';
import { startReceiver, upstreamPayload, rid } from './lib/hooks.mjs';

const KEY = 'fd-limit-test-api-key';
const NOFILE = 160;
const TICKS = 100; // USER_HZ of /proc/<pid>/stat on Linux
const cleanup = [];
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });

/** CPU seconds (user + system) the process used so far. */
function cpuSeconds(pid) {
  const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' '); // f[0] is field 3 (state)
  return (Number(f[11]) + Number(f[12])) / TICKS;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** `statusrelay serve` under prlimit; resolves once /readyz answers 200. */
async function startLimited(redis, env = {}) {
  const httpPort = await freePort();
  const wsPort = await freePort();
  const name = `fd-daemon-${httpPort}`;
  const proc = startProcess(name, 'prlimit', [`--nofile=${NOFILE}:${NOFILE}`, BIN, 'serve'], {
    env: {
      STATUSRELAY_REDIS_URL: redis.url,
      STATUSRELAY_HTTP_LISTEN: `127.0.0.1:${httpPort}`,
      STATUSRELAY_WS_LISTEN: `127.0.0.1:${wsPort}`,
      STATUSRELAY_UPSTREAM_API_URL: 'http://127.0.0.1:9',
      STATUSRELAY_UPSTREAM_WS_URL: 'ws://127.0.0.1:9/',
      STATUSRELAY_UPSTREAM_API_KEY: KEY,
      STATUSRELAY_ALLOW_PRIVATE_TARGETS: 'true',
      STATUSRELAY_LOG_LEVEL: 'info',
      ...env,
    },
  });
  cleanup.push(() => proc.stop());
  const url = `http://127.0.0.1:${httpPort}`;
  await until(async () => {
    if (proc.child.exitCode !== null) throw new Error(`daemon exited: ${proc.log().slice(-2000)}`);
    return (await fetch(url + '/readyz')).status === 200;
  }, { timeoutMs: 15000, msg: `daemon ready (log: ${proc.logPath})` });
  return { proc, pid: proc.child.pid, httpPort, wsPort, url };
}

/** n idle TCP connections to port (nothing sent); resolves once all are connected. */
async function idle(port, n) {
  const socks = await Promise.all(Array.from({ length: n }, () => new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.once('connect', () => resolve(s));
    s.once('error', () => resolve(s));
  })));
  return { socks, close: () => { for (const s of socks) s.destroy(); } };
}

/** One keep-alive HTTP/1.1 connection, opened before descriptors run out, reused after. */
function keepAlive(port) {
  const s = net.connect(port, '127.0.0.1');
  s.on('error', () => {});
  let buf = Buffer.alloc(0);
  const waiting = [];
  s.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    for (;;) {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0 || waiting.length === 0) return;
      const head = buf.subarray(0, end).toString();
      const m = /content-length:\s*(\d+)/i.exec(head);
      const len = m ? Number(m[1]) : 0;
      if (buf.length < end + 4 + len) return;
      const body = buf.subarray(end + 4, end + 4 + len).toString();
      buf = buf.subarray(end + 4 + len);
      const status = Number(/^HTTP\/1\.1 (\d+)/.exec(head)[1]);
      waiting.shift()({ status, body, json: () => JSON.parse(body) });
    }
  });
  const ready = new Promise((r) => s.once('connect', r));
  return {
    async request(method, path, body, headers = {}) {
      await ready;
      const b = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
      const h = { host: `127.0.0.1:${port}`, 'content-length': Buffer.byteLength(b), ...headers };
      if (b) h['content-type'] = 'application/json';
      const p = new Promise((r) => waiting.push(r));
      s.write(`${method} ${path} HTTP/1.1\r\n` +
        Object.entries(h).map(([k, v]) => `${k}: ${v}\r\n`).join('') + '\r\n' + b);
      return p;
    },
    close: () => s.destroy(),
  };
}

function signedIngest(c, payload) {
  const body = JSON.stringify(payload);
  const ts = String(Date.now());
  const sig = crypto.createHmac('sha256', KEY).update(`${ts}.${body}`).digest('hex');
  return c.request('POST', '/v1/ingest/upstream', body,
    { 'x-signature-timestamp': ts, 'x-signature-sha256': sig });
}

/** GET path on a new connection: the status, or 'waiting' when no answer came in ms. */
function freshGet(port, path, ms) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    const t = setTimeout(() => { s.destroy(); resolve('waiting'); }, ms);
    let buf = '';
    s.on('error', () => {});
    s.on('connect', () => s.write(`GET ${path} HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nconnection: close\r\n\r\n`));
    s.on('data', (d) => {
      buf += d;
      const m = /^HTTP\/1\.1 (\d+)/.exec(buf);
      if (m) { clearTimeout(t); s.destroy(); resolve(Number(m[1])); }
    });
  });
}

const logLines = (p, re) => p.log().split('\n').filter((l) => re.test(l));

/** Accept lines allowed after ms of running: one per condition and listener every 10 s
 *  (accept_guard.h), plus the start-up warning. */
const acceptBound = (ms) => 1 + 4 * (1 + Math.floor(ms / 10000));

test('more idle connections than the caps: paused, not spinning; answers again after', async () => {
  const redis = await startRedis();
  cleanup.push(() => redis.stop());
  const t0 = Date.now();
  const d = await startLimited(redis);
  const lim = logLines(d.proc, /msg="descriptor limit"/);
  assert.equal(lim.length, 1, 'one descriptor limit line');
  // docs/configuration.md formula: of what the reserve leaves, a quarter for REST (at least 256, or half when
  // less is left), the rest for the dashboard port; at this limit both get half
  const avail = NOFILE - (24 + Math.floor(NOFILE / 8));
  const httpCap = Math.floor(avail / 4) >= 256 ? Math.floor(avail / 4) : Math.min(256, Math.floor(avail / 2));
  const cap = Number(/http_max_connections=(\d+)/.exec(lim[0])[1]);
  assert.equal(cap, httpCap, 'docs/configuration.md formula (REST)');
  assert.equal(Number(/ws_max_connections=(\d+)/.exec(lim[0])[1]), avail - httpCap, 'docs/configuration.md formula (dashboard)');
  assert.equal(avail - httpCap, cap, 'at this limit both caps are equal');

  const h = await idle(d.httpPort, cap + 15);
  const w = await idle(d.wsPort, cap + 15);
  await until(() => logLines(d.proc, /msg="accept: connection cap reached"/).length >= 2,
    { timeoutMs: 10000, msg: 'both listeners at their cap' });
  const c0 = cpuSeconds(d.pid);
  await sleep(3000);
  const used = cpuSeconds(d.pid) - c0;
  assert.ok(used < 0.5, `daemon used ${used}s CPU in 3s with both listeners at their cap`);
  // over the cap, a new client is not served (it waits in the backlog)...
  assert.equal(await freshGet(d.httpPort, '/healthz', 1000), 'waiting', 'over the cap: waits');
  assert.equal(await freshGet(d.wsPort, '/', 1000), 'waiting', 'over the cap: waits (ws port)');
  // ...until connections close
  h.close();
  w.close();
  assert.equal(await freshGet(d.httpPort, '/healthz', 10000), 200, 'answers again');
  assert.equal(await freshGet(d.wsPort, '/', 10000), 200, 'the dashboard port answers again');
  const acc = logLines(d.proc, /accept/);
  assert.ok(acc.length <= acceptBound(Date.now() - t0), `accept lines: ${acc.length}\n${acc.join('\n')}`);
  assert.ok(d.proc.log().split('\n').length < 100, 'no log flood');
});

test('out of descriptors: no spin, bounded log, the delivery waits and is not burnt', async () => {
  const redis = await startRedis();
  cleanup.push(() => redis.stop());
  const rx = await startReceiver();
  cleanup.push(() => rx.stop());
  // the dashboard cap above what the limit leaves: the daemon runs out of descriptors
  const t0 = Date.now();
  const d = await startLimited(redis, {
    STATUSRELAY_WS_MAX_CONNECTIONS: String(NOFILE - 24),
    STATUSRELAY_RETRY_SCHEDULE: '0s,200ms',
  });
  assert.equal(logLines(d.proc, /msg="connection caps exceed the descriptor limit/).length, 1);
  const c = keepAlive(d.httpPort);
  const wh = await c.request('POST', '/v1/webhooks', { url: rx.url('/fd') });
  assert.equal(wh.status, 201, wh.body);
  const { id: whId, secret } = wh.json();

  // more than the daemon has descriptors for
  const h = await idle(d.httpPort, 40);
  const w = await idle(d.wsPort, NOFILE);
  await until(() => logLines(d.proc, /msg="accept: out of descriptors" listener=ws/).length >= 1,
    { timeoutMs: 10000, msg: 'the dashboard listener out of descriptors' });
  const h2 = await idle(d.httpPort, 10); // under the REST cap, but no descriptor left
  await until(() => logLines(d.proc, /msg="accept: out of descriptors" listener=http/).length >= 1,
    { timeoutMs: 10000, msg: 'the REST listener out of descriptors' });
  const r = rid('fd');
  assert.equal((await signedIngest(c, upstreamPayload({ rid: r, status: 'pending' }))).status, 200);
  let lastm = '';
  await until(async () => {
    const m = await c.request('GET', '/metrics');
    lastm = m.body.split('\n').filter((l) => /^statusrelay_webhook/.test(l)).join('\n');
    const v = /^statusrelay_webhook_local_failures_total (\d+)/m.exec(m.body);
    return v && Number(v[1]) >= 2; // the fan-out's first attempt and the dispatcher's
  }, { timeoutMs: 15000, msg: 'attempts failing locally' }).catch((e) => { throw new Error(`${e.message}\n${lastm}`); });

  const c0 = cpuSeconds(d.pid);
  await sleep(3000);
  const used = cpuSeconds(d.pid) - c0;
  assert.ok(used < 0.5, `daemon used ${used}s CPU in 3s out of descriptors`);
  assert.equal(rx.records().length, 0, 'nothing delivered yet');
  const pend = (await c.request('GET', `/v1/webhooks/${whId}/deliveries?state=pending`)).json();
  assert.equal(pend.deliveries.length, 1, JSON.stringify(pend));
  assert.deepEqual(pend.deliveries[0].attempts, [], 'no attempt recorded for a local failure');
  const dead = (await c.request('GET', `/v1/webhooks/${whId}/deliveries?state=dead`)).json();
  assert.equal(dead.deliveries.length, 0, 'not dead-lettered');

  w.close();
  h.close();
  h2.close();
  await until(() => rx.records().length >= 1, { timeoutMs: 30000, msg: 'delivered after' });
  const rec = rx.records()[0];
  const body = new Webhook(secret).verify(rec.body, rec.headers);
  assert.equal(body.data.requestId, r);
  const done = (await c.request('GET', `/v1/webhooks/${whId}/deliveries?state=delivered`)).json();
  assert.equal(done.deliveries.length, 1);
  assert.equal(done.deliveries[0].attempts.length, 1, JSON.stringify(done.deliveries[0]));
  const sc = done.deliveries[0].attempts[0].statusCode;
  assert.ok(sc >= 200 && sc < 300, `delivered: ${sc}`);
  assert.equal(await freshGet(d.httpPort, '/healthz', 10000), 200);
  c.close();

  const acc = logLines(d.proc, /accept/);
  assert.ok(acc.length <= acceptBound(Date.now() - t0), `accept lines: ${acc.length}\n${acc.join('\n')}`);
  const local = logLines(d.proc, /failed locally/);
  const localMax = 1 + Math.floor((Date.now() - t0) / 10000); // one line per 10 s at most
  assert.ok(local.length >= 1 && local.length <= localMax, `local failure lines: ${local.length}`);
  assert.ok(d.proc.log().split('\n').length < 150, 'no log flood');
});
