// httpc.test.mjs - relay/httpc (libcurl multi on libevent) through helpers/httpc_probe,
// against node HTTP servers on 127.0.0.1 scripted per path: plain answers, Retry-After,
// redirects, and hostile endpoints (never answering, one byte a second, 100 MB bodies,
// closing mid-response) that must not stall healthy requests on the same loop.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import http from 'node:http';
import http2 from 'node:http2';
import fs from 'node:fs';
import path from 'node:path';
import { HELPERS, OUT, freePort } from './lib/proc.mjs';

const PROBE = path.join(HELPERS, 'httpc_probe');
const MB = 1024 * 1024;

/** Run httpc_probe; resolves { code, lines (per request), summary, stderr }. */
function probe(args, { timeoutMs = 60000 } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(PROBE, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    const t = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(t);
      // Every run must end cleanly: under ASan/UBSan a report makes the exit status nonzero.
      if (code !== 0 || signal !== null || /Sanitizer|runtime error/.test(err)) {
        reject(new Error(`httpc_probe ${args.join(' ')} exited ${code ?? signal}\n${err}`));
        return;
      }
      let all;
      try {
        all = out.split('\n').filter(Boolean).map((l) => JSON.parse(l));
      } catch (e) {
        reject(new Error(`bad probe output: ${e.message}\n${out}\n${err}`));
        return;
      }
      resolve({ code, signal, stderr: err, lines: all.filter((l) => !l.summary), summary: all.find((l) => l.summary) });
    });
  });
}

// ---- the scripted server -------------------------------------------------------------
const hits = new Map();          // path -> requests seen
const state = { conns: 0, hugeAborted: 0, hugeFinished: 0, hugeBytes: 0 };
let server;
let base;

function hit(p) { hits.set(p, (hits.get(p) ?? 0) + 1); }

function hugeBody(res, withLength) {
  const chunk = Buffer.alloc(64 * 1024, 0x78);
  const total = 100 * MB;
  let sent = 0;
  res.writeHead(200, { 'Content-Type': 'application/octet-stream', ...(withLength ? { 'Content-Length': String(total) } : {}) });
  res.on('close', () => { if (res.writableFinished) state.hugeFinished++; else state.hugeAborted++; });
  const pump = () => {
    while (sent < total && !res.destroyed) {
      sent += chunk.length;
      state.hugeBytes += chunk.length;
      if (!res.write(chunk)) { res.once('drain', pump); return; }
    }
    if (!res.destroyed) res.end();
  };
  pump();
}

const routes = {
  '/ok': (req, res) => { res.writeHead(200, { 'Content-Type': 'text/plain' }); res.end('hello httpc'); },
  '/echo': (req, res) => {
    const parts = [];
    req.on('data', (d) => parts.push(d));
    req.on('end', () => {
      const body = Buffer.concat(parts).toString();
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ method: req.method, body, ctype: req.headers['content-type'] ?? null, x: req.headers['x-probe'] ?? null }));
    });
  },
  '/204': (req, res) => { res.writeHead(204); res.end(); },
  '/redirect': (req, res) => { res.writeHead(302, { Location: '/target' }); res.end('moved'); },
  '/target': (req, res) => { res.end('followed!'); },
  '/ra-seconds': (req, res) => { res.writeHead(429, { 'Retry-After': '7' }); res.end(); },
  '/ra-date': (req, res) => { res.writeHead(503, { 'Retry-After': new Date(Date.now() + 30000).toUTCString() }); res.end(); },
  '/ra-past': (req, res) => { res.writeHead(503, { 'Retry-After': new Date(Date.now() - 30000).toUTCString() }); res.end(); },
  '/ra-garbage': (req, res) => { res.writeHead(503, { 'Retry-After': 'soon-ish' }); res.end(); },
  '/never': () => { /* accept, read, never answer */ },
  '/drip': (req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': '100' });
    res.flushHeaders();
    const t = setInterval(() => { if (!res.destroyed) res.write('x'); }, 1000);
    res.write('x');
    res.on('close', () => clearInterval(t));
  },
  '/huge': (req, res) => hugeBody(res, false),
  '/huge-cl': (req, res) => hugeBody(res, true),
  '/chatty': (req, res) => { res.writeHead(200, { 'Content-Type': 'text/html' }); res.end('y'.repeat(10000)); },
  '/close-mid': (req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': '1000' });
    res.write('0123456789');
    setTimeout(() => res.socket?.destroy(), 50);
  },
};

before(async () => {
  server = http.createServer((req, res) => {
    const p = new URL(req.url, 'http://x').pathname;
    hit(p);
    (routes[p] ?? ((q, r) => { r.writeHead(404); r.end('no such path'); }))(req, res);
  });
  server.keepAliveTimeout = 30000;
  server.on('connection', () => { state.conns++; });
  const port = await freePort();
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  base = `http://127.0.0.1:${port}`;
});

after(() => { server.closeAllConnections(); server.close(); });

function resetCounters() { hits.clear(); Object.assign(state, { conns: 0, hugeAborted: 0, hugeFinished: 0, hugeBytes: 0 }); }

// ---- plain answers ---------------------------------------------------------------------
test('200 with a body, content kept and reported', async () => {
  const r = await probe(['--print-body', 'GET', `${base}/ok`]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.lines.length, 1);
  const l = r.lines[0];
  assert.equal(l.status, 200);
  assert.equal(l.err, null);
  assert.equal(l.body, 'hello httpc');
  assert.equal(l.bodyLen, 11);
  assert.equal(l.retryAfterMs, -1);
  assert.equal(l.truncated, false);
  assert.equal(l.httpVersion, 11);
  assert.equal(r.summary.count, 1);
  assert.equal(r.summary.ok, 1);
});

test('POST sends the body (not copied, exact length) and the given headers', async () => {
  const r = await probe(['--print-body', '--header', 'Content-Type: application/json', '--header', 'X-Probe: 42',
    'POST', `${base}/echo`, '{"a":"b c"}']);
  const l = r.lines[0];
  assert.equal(l.status, 200);
  assert.deepEqual(JSON.parse(l.body), { method: 'POST', body: '{"a":"b c"}', ctype: 'application/json', x: '42' });
  const put = await probe(['--print-body', 'PUT', `${base}/echo`, 'xyz']);
  assert.equal(JSON.parse(put.lines[0].body).method, 'PUT');
  assert.equal(JSON.parse(put.lines[0].body).body, 'xyz');
});

test('204 has status 204 and an empty body', async () => {
  const r = await probe(['GET', `${base}/204`]);
  assert.equal(r.lines[0].status, 204);
  assert.equal(r.lines[0].err, null);
  assert.equal(r.lines[0].bodyLen, 0);
});

test('3xx is a status: the redirect is not followed', async () => {
  resetCounters();
  const r = await probe(['GET', `${base}/redirect`]);
  assert.equal(r.lines[0].status, 302);
  assert.equal(r.lines[0].err, null);
  assert.equal(hits.get('/target') ?? 0, 0, 'redirect target must not be requested');
});

test('Retry-After: delay-seconds, HTTP-date (future, past), garbage and absent', async () => {
  const urls = ['/ra-seconds', '/ra-date', '/ra-past', '/ra-garbage', '/ok'].map((p) => `${base}${p}`);
  const r = await probe(['--count', '5', 'GET', urls[0], ...urls.slice(1).flatMap((u) => ['--url', u])]);
  const by = Object.fromEntries(r.lines.map((l) => [new URL(l.url).pathname, l]));
  assert.equal(by['/ra-seconds'].status, 429);
  assert.equal(by['/ra-seconds'].retryAfterMs, 7000);
  assert.equal(by['/ra-date'].status, 503);
  assert.ok(by['/ra-date'].retryAfterMs >= 28000 && by['/ra-date'].retryAfterMs <= 31000, `date: ${by['/ra-date'].retryAfterMs}`);
  assert.equal(by['/ra-past'].retryAfterMs, 0);
  assert.equal(by['/ra-garbage'].retryAfterMs, -1);
  assert.equal(by['/ok'].retryAfterMs, -1);
});

// ---- transport errors ------------------------------------------------------------------
test('connection refused -> "connect"', async () => {
  const port = await freePort(); // bound then released: nobody listens
  const r = await probe(['GET', `http://127.0.0.1:${port}/`]);
  assert.equal(r.code, 0);
  assert.equal(r.lines[0].err, 'connect');
  assert.equal(r.lines[0].status, 0);
  assert.ok(r.lines[0].latencyMs < 1000);
});

test('not http/https -> "bad_url", nothing sent', async () => {
  const r = await probe(['GET', `ftp://127.0.0.1:21/x`]);
  assert.equal(r.lines[0].err, 'bad_url');
});

test('a server that never answers -> "timeout" at the total timeout', async () => {
  const r = await probe(['--timeout-ms', '800', 'GET', `${base}/never`]);
  const l = r.lines[0];
  assert.equal(l.err, 'timeout');
  assert.equal(l.status, 0);
  assert.ok(l.latencyMs >= 750 && l.latencyMs < 1500, `latency ${l.latencyMs}`);
});

test('one byte per second -> "timeout" at the total timeout, status kept', async () => {
  const r = await probe(['--timeout-ms', '1500', 'GET', `${base}/drip`]);
  const l = r.lines[0];
  assert.equal(l.err, 'timeout');
  assert.equal(l.status, 200, 'the head had arrived');
  assert.ok(l.latencyMs >= 1400 && l.latencyMs < 2500, `latency ${l.latencyMs}`);
  assert.ok(l.bodyLen >= 1 && l.bodyLen <= 3, `bodyLen ${l.bodyLen}`);
});

test('connection closed mid-response -> "closed"', async () => {
  const r = await probe(['GET', `${base}/close-mid`]);
  assert.equal(r.lines[0].err, 'closed');
  assert.equal(r.lines[0].status, 200);
});

test('--forbid-loopback -> "forbidden_target" and the server sees no connection', async () => {
  resetCounters();
  const port = new URL(base).port;
  const urls = [`${base}/ok`, `http://localhost:${port}/ok`, `http://[::1]:${port}/ok`, `http://[::ffff:127.0.0.1]:${port}/ok`];
  const r = await probe(['--forbid-loopback', '--count', String(urls.length), '--concurrency', '4',
    'GET', urls[0], ...urls.slice(1).flatMap((u) => ['--url', u])]);
  assert.equal(r.lines.length, urls.length);
  for (const l of r.lines) {
    assert.equal(l.err, 'forbidden_target', JSON.stringify(l));
    assert.equal(l.status, 0);
  }
  assert.equal(state.conns, 0, 'no TCP connection may reach the server');
  assert.equal(hits.size, 0);
});

test('the guard also covers a reused keep-alive connection opened without a check', async () => {
  resetCounters();
  // Request 0 (no check) opens a connection; requests 1 and 2 (checked) would reuse it.
  const r = await probe(['--forbid-loopback-from', '1', '--count', '3', '--concurrency', '1', 'GET', `${base}/ok`]);
  assert.deepEqual(r.lines.map((l) => [l.i, l.err, l.status]), [[0, null, 200], [1, 'forbidden_target', 0], [2, 'forbidden_target', 0]]);
  assert.equal(hits.get('/ok'), 1, 'no checked request reached the server');
  assert.equal(state.conns, 1, 'and no new connection was opened for them');
});

// ---- bounded responses -----------------------------------------------------------------
test('100 MB body is cut at max_response + max_drain ("too_large", status kept, memory bounded)', async () => {
  resetCounters();
  const r = await probe(['--max-response', '65536', '--count', '2', 'GET', `${base}/huge`, '--url', `${base}/huge-cl`]);
  for (const l of r.lines) {
    assert.equal(l.err, 'too_large', JSON.stringify(l));
    assert.equal(l.status, 200);
    assert.ok(l.latencyMs < 1000, `latency ${l.latencyMs}`);
  }
  const streamed = r.lines.find((l) => l.url.endsWith('/huge'));
  assert.equal(streamed.bodyLen, 65536, 'kept exactly max_response bytes');
  assert.equal(streamed.truncated, true);
  const announced = r.lines.find((l) => l.url.endsWith('/huge-cl'));
  assert.equal(announced.bodyLen, 0, 'Content-Length over the limit fails before reading');
  await new Promise((res) => setTimeout(res, 200));
  assert.equal(state.hugeFinished, 0, 'the server never got to finish a 100 MB body');
  assert.ok(state.hugeBytes < 40 * MB, `server pushed ${state.hugeBytes} bytes before the cut`);
});

test('a body over max_response but within max_drain is truncated, not an error, and the connection is reused', async () => {
  resetCounters();
  const r = await probe(['--max-response', '1024', '--max-drain', '65536', '--count', '10', 'GET', `${base}/chatty`]);
  for (const l of r.lines) {
    assert.equal(l.err, null);
    assert.equal(l.status, 200);
    assert.equal(l.bodyLen, 1024);
    assert.equal(l.truncated, true);
  }
  assert.equal(state.conns, 1, 'drained responses keep the connection alive');
  assert.equal(r.summary.connects, 1);
});

test('hostile endpoints (huge, drip, never, close-mid) do not stall healthy requests on the same loop', async () => {
  resetCounters();
  const hostile = ['/huge', '/drip', '/never', '/close-mid'];
  const urls = [...hostile, '/ok', '/ok', '/ok', '/ok', '/ok', '/ok', '/ok', '/ok'].map((p) => `${base}${p}`);
  const n = urls.length * 25; // 100 hostile, 200 healthy
  const r = await probe(['--timeout-ms', '2000', '--max-response', String(MB), '--count', String(n), '--concurrency', '48',
    'GET', urls[0], ...urls.slice(1).flatMap((u) => ['--url', u])], { timeoutMs: 60000 });
  assert.equal(r.lines.length, n);
  const healthy = r.lines.filter((l) => l.url.endsWith('/ok'));
  assert.equal(healthy.length, 200);
  for (const l of healthy) assert.equal(l.status, 200);
  const worst = Math.max(...healthy.map((l) => l.latencyMs));
  const sorted = healthy.map((l) => l.latencyMs).sort((a, b) => a - b);
  console.log(`healthy latency under hostile load: p50 ${sorted[100]} ms, max ${worst} ms; hostile outcomes:`,
    JSON.stringify(r.summary.errors));
  assert.ok(worst < 1000, `a healthy request took ${worst} ms`);
  const errOf = (p) => new Set(r.lines.filter((l) => l.url.endsWith(p)).map((l) => l.err));
  assert.deepEqual(errOf('/huge'), new Set(['too_large']));
  assert.deepEqual(errOf('/drip'), new Set(['timeout']));
  assert.deepEqual(errOf('/never'), new Set(['timeout']));
  assert.deepEqual(errOf('/close-mid'), new Set(['closed']));
});

// ---- connection reuse and volume -------------------------------------------------------
test('keep-alive: sequential requests share one TCP connection', async () => {
  resetCounters();
  const r = await probe(['--count', '30', '--concurrency', '1', 'GET', `${base}/ok`]);
  assert.equal(r.summary.ok, 30);
  assert.equal(state.conns, 1, `server saw ${state.conns} connections for 30 requests`);
});

test('1000 requests at concurrency 50 all complete, over at most 50 connections', async () => {
  resetCounters();
  const r = await probe(['--count', '1000', '--concurrency', '50', 'GET', `${base}/ok`]);
  assert.equal(r.code, 0);
  assert.equal(r.lines.length, 1000);
  assert.equal(r.summary.count, 1000);
  assert.equal(r.summary.ok, 1000);
  assert.ok(r.lines.every((l) => l.status === 200));
  assert.equal(new Set(r.lines.map((l) => l.i)).size, 1000, 'every request completed exactly once');
  assert.ok(state.conns <= 50, `server saw ${state.conns} connections`);
  console.log(`1000 @ 50: ${r.summary.rps} req/s, p99 ${r.summary.p99Ms} ms, ${state.conns} connections`);
});

test('connection cap: requests queued for a slot still end at their deadline', async () => {
  const r = await probe(['--max-conns', '1', '--timeout-ms', '700', '--count', '3', '--concurrency', '3',
    'GET', `${base}/never`]);
  assert.equal(r.lines.length, 3);
  for (const l of r.lines) {
    assert.equal(l.err, 'timeout');
    assert.ok(l.latencyMs < 1200, `latency ${l.latencyMs}`);
  }
});

// Per-host slots (httpc.c): curl gets only what it can start at once, the rest waits in httpc
// (curl 7.88's own pending list cost ~40% of the daemon's CPU with 100 endpoints on one host).
test('per-host slots: 300 requests over 10 URLs of one host at concurrency 100 keep curl at 4', async () => {
  resetCounters();
  const urls = Array.from({ length: 10 }, (_, k) => `${base}/ok?u=${k}`);
  const r = await probe(['--max-host-conns', '4', '--count', '300', '--concurrency', '100', '--quiet',
    'GET', urls[0], ...urls.slice(1).flatMap((u) => ['--url', u])]);
  assert.equal(r.summary.count, 300);
  assert.equal(r.summary.ok, 300);
  assert.ok(r.summary.peakInCurl <= 4, `curl held ${r.summary.peakInCurl} transfers at once`);
  assert.ok(r.summary.waited >= 96, `only ${r.summary.waited} requests waited for a slot`);
  assert.ok(state.conns <= 4, `server saw ${state.conns} connections`);
  assert.equal(hits.get('/ok'), 300);
});

test('per-host slots: two hosts share max_total_conns, each within its own limit, both served', async () => {
  resetCounters();
  let other = 0;
  const s2 = http.createServer((req, res) => { other++; res.writeHead(200); res.end('two'); });
  const port2 = await freePort();
  await new Promise((r) => s2.listen(port2, '127.0.0.1', r));
  try {
    const r = await probe(['--max-conns', '3', '--max-host-conns', '2', '--count', '200', '--concurrency', '60',
      '--quiet', 'GET', `${base}/ok`, '--url', `http://127.0.0.1:${port2}/x`]);
    assert.equal(r.summary.ok, 200);
    assert.ok(r.summary.peakInCurl <= 3, `curl held ${r.summary.peakInCurl} transfers at once`);
    assert.ok(r.summary.waited > 0);
    assert.equal(hits.get('/ok'), 100);
    assert.equal(other, 100); // (connections are not counted: 3 for two hosts turn over)
  } finally {
    s2.closeAllConnections();
    s2.close();
  }
});

test('per-host slots: requests waiting for a slot end with "shutdown" when httpc is freed', async () => {
  const r = await probe(['--max-host-conns', '1', '--abort-after-ms', '300', '--count', '4', '--concurrency', '4',
    'GET', `${base}/never`]);
  assert.equal(r.lines.length, 4);
  assert.ok(r.lines.every((l) => l.err === 'shutdown'), JSON.stringify(r.lines.map((l) => l.err)));
  assert.equal(r.summary.waited, 3);
});

// ---- shutdown --------------------------------------------------------------------------
test('httpc_free completes in-flight requests with "shutdown" (from the loop and from a callback)', async () => {
  const a = await probe(['--abort-after-ms', '300', '--count', '5', '--concurrency', '5', 'GET', `${base}/never`]);
  assert.equal(a.code, 0, a.stderr);
  assert.equal(a.lines.length, 5);
  for (const l of a.lines) assert.equal(l.err, 'shutdown');
  // First completion (/ok) frees httpc inside its callback; the /never ones end with shutdown.
  const b = await probe(['--free-after', '1', '--count', '4', '--concurrency', '4', 'GET', `${base}/ok`,
    '--url', `${base}/never`, '--url', `${base}/never`, '--url', `${base}/never`]);
  assert.equal(b.code, 0, b.stderr);
  assert.equal(b.lines.length, 4);
  assert.equal(b.lines[0].err, null);
  assert.deepEqual(b.lines.slice(1).map((l) => l.err), ['shutdown', 'shutdown', 'shutdown']);
});

// ---- TLS and HTTP/2 --------------------------------------------------------------------
test('https: certificate verified by default ("tls"), HTTP/2 negotiated when offered', async (t) => {
  const dir = path.join(OUT, 'httpc-tls');
  fs.mkdirSync(dir, { recursive: true });
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem'), '-days', '1', '-subj', '/CN=127.0.0.1',
      '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  } catch {
    t.skip('openssl CLI not available');
    return;
  }
  const tls = http2.createSecureServer({ key: fs.readFileSync(path.join(dir, 'key.pem')), cert: fs.readFileSync(path.join(dir, 'cert.pem')), allowHTTP1: true },
    (req, res) => { res.writeHead(200, { 'Content-Type': 'text/plain' }); res.end(`v${req.httpVersion}`); });
  let tlsConns = 0;
  tls.on('secureConnection', () => { tlsConns++; });
  const port = await freePort();
  await new Promise((r) => tls.listen(port, '127.0.0.1', r));
  try {
    const bad = await probe(['GET', `https://127.0.0.1:${port}/`]);
    assert.equal(bad.lines[0].err, 'tls', JSON.stringify(bad.lines[0]));
    tlsConns = 0;
    const ok = await probe(['--insecure', '--print-body', '--count', '40', '--concurrency', '20', 'GET', `https://127.0.0.1:${port}/`]);
    assert.equal(ok.summary.ok, 40);
    for (const l of ok.lines) {
      assert.equal(l.httpVersion, 20);
      assert.equal(l.body, 'v2.0');
    }
    assert.equal(tlsConns, 1, `HTTP/2 streams should share one connection, saw ${tlsConns}`);
  } finally {
    await new Promise((r) => tls.close(r));
  }
});
