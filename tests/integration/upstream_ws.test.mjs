// upstream_ws.test.mjs - the ws thread (relay/edge/ws_thread.c, upstream_ws.c, ws_server.c) through
// helpers/ws_relay_probe, against node `ws` servers on 127.0.0.1 playing the upstream: the
// ready greeting gate, subscribe frames, apiKey, frames with gen (text, binary, fragmented,
// oversize), reconnects (abrupt drop, backoff, 1012, silence after pings, connect timeout,
// RECONNECT / STOP / START), stale sends, TLS verification, and the dashboard stub.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket, { WebSocketServer } from 'ws';
import { HELPERS, OUT, freePort, until } from './lib/proc.mjs';

const PROBE = path.join(HELPERS, 'ws_relay_probe');
const MiB = 1024 * 1024;
const greeting = (id = 'sock-1') => JSON.stringify({ type: 'connection', status: 'ready', data: { id } });
const subscribe = (id) => JSON.stringify({ type: 'subscribe', event: 'request.status.updated', filters: { id } });
const ack = (id) => JSON.stringify({ type: 'subscribe', status: 'success', data: { event: 'request.status.updated', filters: { id } } });

// ---- the probe -----------------------------------------------------------------------------
class Probe {
  constructor(name, args, env = {}) {
    this.name = name;
    this.events = [];
    this.logPath = path.join(OUT, `ws_relay_probe-${name}.log`);
    const fd = fs.openSync(this.logPath, 'w');
    this.child = spawn(PROBE, args, { stdio: ['pipe', 'pipe', fd], env: { ...process.env, ...env } });
    fs.closeSync(fd);
    let buf = '';
    this.child.stdout.setEncoding('utf8'); // decodes UTF-8 split across chunks
    this.child.stdout.on('data', (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line) this.events.push({ ...JSON.parse(line), t: Date.now() });
      }
    });
    this.exited = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve({ code, signal })));
  }

  of(type) { return this.events.filter((e) => e.type === type); }
  log() { return fs.readFileSync(this.logPath, 'utf8'); }
  cmd(line) { this.child.stdin.write(`${line}\n`); }

  async waitFor(pred, msg, timeoutMs = 8000) {
    return until(() => this.events.find(pred), { timeoutMs, msg: `${this.name}: ${msg}` });
  }

  /** Current counters (the probe prints them on the "stats" command). */
  async stats() {
    const n = this.of('stats').length;
    this.cmd('stats');
    await until(() => this.of('stats').length > n, { msg: 'stats' });
    return this.of('stats').at(-1);
  }

  /** SIGTERM and a clean exit: status 0, an exit line, no sanitizer report. */
  async stop() {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    const t = setTimeout(() => this.child.kill('SIGKILL'), 10000);
    const r = await this.exited;
    clearTimeout(t);
    const log = this.log();
    assert.equal(r.code, 0, `${this.name} exit ${r.code ?? r.signal}\n${log}`);
    assert.doesNotMatch(log, /Sanitizer|runtime error/, log);
    await until(() => this.of('exit').length === 1, { timeoutMs: 2000, msg: 'exit line' });
    return r;
  }
}

function startProbe(name, url, ids = [], flags = [], env = {}) {
  return new Probe(name, [...flags, url, ...ids], env);
}

// ---- the fake upstream -----------------------------------------------------------------------
// Records every connection: request URL, frames received (and whether before the greeting),
// pings, close. Acks subscribes like the real upstream. Per-connection behaviour via onConn.
class Upstream {
  constructor({ greetDelayMs = 20, autoPong = true, onConn = null, server = null } = {}) {
    this.conns = [];
    this.wss = new WebSocketServer(server ? { server, autoPong } : { host: '127.0.0.1', port: 0, autoPong });
    this.listening = server ? Promise.resolve() : new Promise((r) => this.wss.once('listening', r));
    this.wss.on('connection', (ws, req) => {
      const c = { ws, url: req.url, t0: Date.now(), received: [], pings: 0, greeted: false, closed: null, index: this.conns.length };
      this.conns.push(c);
      ws.on('message', (data, isBinary) => {
        const text = data.toString();
        c.received.push({ text, t: Date.now(), beforeReady: !c.greeted });
        try {
          const m = JSON.parse(text);
          if (m.type === 'subscribe' && c.greeted) ws.send(ack(m.filters.id));
        } catch { /* not JSON: just recorded */ }
      });
      ws.on('ping', () => { c.pings++; });
      ws.on('close', (code, reason) => { c.closed = { code, reason: reason.toString(), t: Date.now() }; });
      ws.on('error', () => {});
      c.greet = () => { if (ws.readyState === WebSocket.OPEN) { c.greeted = true; ws.send(greeting(`sock-${c.index + 1}`)); } };
      if (onConn) onConn(c, this);
      else setTimeout(c.greet, greetDelayMs);
    });
  }

  url(p = '/') { return `ws://127.0.0.1:${this.wss.address().port}${p}`; }
  async close() {
    for (const c of this.conns) c.ws.terminate();
    await new Promise((r) => this.wss.close(r));
  }
}

async function upstream(opts) {
  const u = new Upstream(opts);
  await u.listening;
  return u;
}

const isReady = (gen) => (e) => e.type === 'ready' && e.gen === gen;
const isDown = (gen) => (e) => e.type === 'down' && e.gen === gen;

// ---- tests -----------------------------------------------------------------------------------

test('sends nothing before the ready greeting, then one subscribe per id; apiKey in the query', async () => {
  const up = await upstream({ greetDelayMs: 400 });
  const key = 'k/y z+1&=%';
  const p = startProbe('greeting', up.url('/ws?x=1'), ['0xaaa', '0xbbb'], ['--api-key', key]);
  try {
    await p.waitFor(isReady(1), 'ready gen 1');
    const c = up.conns[0];
    await until(() => c.received.length >= 2, { msg: 'two subscribes' });
    assert.equal(c.received.filter((r) => r.beforeReady).length, 0, 'nothing before the greeting');
    assert.deepEqual(c.received.map((r) => r.text), [subscribe('0xaaa'), subscribe('0xbbb')]);
    assert.ok(c.received[0].t - c.t0 >= 380, 'subscribe waited for the greeting');
    // the key travels url-encoded in the query string, after the URL's own query
    assert.equal(c.url, `/ws?x=1&apiKey=${encodeURIComponent(key).replace(/[!'()*]/g, (ch) => `%${ch.charCodeAt(0).toString(16).toUpperCase()}`)}`);
    assert.equal(new URL(c.url, 'http://x').searchParams.get('apiKey'), key);
    assert.equal(new URL(c.url, 'http://x').searchParams.get('x'), '1');
    // the acks come back as frames of gen 1, and the key never shows in the log
    await p.waitFor((e) => e.type === 'frame' && e.data === ack('0xbbb'), 'ack frame');
    const frames = p.of('frame');
    assert.deepEqual(frames.map((f) => [f.gen, f.data]), [[1, ack('0xaaa')], [1, ack('0xbbb')]]);
    assert.equal(p.of('ready')[0].socket, 'sock-1');
    assert.ok(!p.log().includes('k/y') && !p.log().includes('apiKey'), 'no secret in logs');
  } finally {
    await p.stop();
    await up.close();
  }
});

test('without an API key the URL is used as given', async () => {
  const up = await upstream();
  const p = startProbe('nokey', up.url(''), ['0x1']);
  try {
    await p.waitFor(isReady(1), 'ready');
    assert.equal(up.conns[0].url, '/');
  } finally {
    await p.stop();
    await up.close();
  }
});

test('frames carry their gen; binary and fragmented messages are reassembled', async () => {
  const up = await upstream();
  const p = startProbe('frames', up.url(), ['0x1']);
  try {
    await p.waitFor(isReady(1), 'ready');
    const ws = up.conns[0].ws;
    const ev = (s) => JSON.stringify({ event: 'request.status.updated', data: { requestId: '0x1', status: s, updatedAt: 1787049213418 }, publishedAt: 1787049213436 });
    ws.send(ev('pending'));
    ws.send(Buffer.from(ev('submitted')), { binary: true });
    const frag = ev('success');
    ws.send(frag.slice(0, 10), { fin: false });
    ws.send(frag.slice(10, 40), { fin: false });
    ws.send(frag.slice(40), { fin: true });
    const big = JSON.stringify({ event: 'x', pad: 'é'.repeat(100000) }); // multi-chunk, UTF-8
    ws.send(Buffer.from(big), { binary: true, fin: false });
    ws.send(Buffer.from('  '), { binary: true, fin: true });
    await p.waitFor((e) => e.type === 'frame' && e.data === `${big}  `, 'big fragmented binary');
    const data = p.of('frame').filter((f) => f.data !== ack('0x1'));
    assert.deepEqual(data.map((f) => f.data), [ev('pending'), ev('submitted'), frag, `${big}  `]);
    assert.ok(data.every((f) => f.gen === 1));
  } finally {
    await p.stop();
    await up.close();
  }
});

test('a message over 1 MiB is dropped and counted; the connection stays up', async () => {
  const up = await upstream();
  const p = startProbe('oversize', up.url(), []);
  try {
    await p.waitFor(isReady(1), 'ready');
    const ws = up.conns[0].ws;
    const exact = `"${'a'.repeat(MiB - 2)}"`; // exactly the limit: delivered
    ws.send('"x".repeat(1.5MiB) follows');
    ws.send('b'.repeat(MiB + MiB / 2)); // one frame over the limit
    ws.send('c'.repeat(700 * 1024), { fin: false }); // fragments adding up over the limit
    ws.send('c'.repeat(700 * 1024), { fin: true });
    ws.send(exact);
    ws.send('after');
    await p.waitFor((e) => e.type === 'frame' && e.data === 'after', 'frame after the oversize ones', 15000);
    const frames = p.of('frame').map((f) => f.data);
    assert.deepEqual(frames.map((f) => f.length), ['"x".repeat(1.5MiB) follows'.length, MiB, 5]);
    assert.equal(frames[1], exact);
    assert.equal(p.of('down').length, 0, 'no reconnect');
    const st = await p.stats();
    assert.equal(st.dropped_oversize, 2);
    assert.equal(st.state, 'ready');
    assert.match(p.log(), /message over the size limit dropped/);
  } finally {
    await p.stop();
    await up.close();
  }
});

test('an abrupt socket destroy: DOWN for the old gen, a new gen, resubscribed', async () => {
  const up = await upstream();
  const p = startProbe('destroy', up.url(), ['0xaaa']);
  try {
    await p.waitFor(isReady(1), 'ready 1');
    await until(() => up.conns[0].received.length === 1, { msg: 'subscribe 1' });
    up.conns[0].ws._socket.destroy();
    const down = await p.waitFor(isDown(1), 'down 1');
    assert.equal(down.code, 0);
    await p.waitFor(isReady(2), 'ready 2', 5000);
    await until(() => up.conns[1]?.received.length === 1, { msg: 'subscribe on the new connection' });
    assert.equal(up.conns[1].received[0].text, subscribe('0xaaa'));
    assert.ok(up.conns[1].t0 - down.t < 1000, 'first retry within the first backoff step');
    // frames of the new connection carry the new gen
    await p.waitFor((e) => e.type === 'frame' && e.gen === 2, 'frame gen 2');
    const st = await p.stats();
    assert.equal(st.reconnects, 1);
    assert.equal(st.downs, 1);
  } finally {
    await p.stop();
    await up.close();
  }
});

test('failing attempts back off exponentially with jitter; every attempt gets a new gen', async () => {
  // every connection is destroyed before the greeting
  const up = await upstream({ onConn: (c) => c.ws._socket.destroy() });
  const p = startProbe('backoff', up.url(), []);
  try {
    await sleep(4000);
    const n = up.conns.length;
    // 250 ms * 2^k ceilings: expected total of the first 5 waits ~3.9 s. Without backoff this
    // would be hundreds of attempts.
    assert.ok(n >= 3 && n <= 12, `attempts in 4 s: ${n}`);
    const downs = p.of('down');
    assert.ok(downs.length >= n - 1);
    assert.deepEqual(downs.map((d) => d.gen), downs.map((_, i) => i + 1), 'one DOWN per gen, increasing');
    assert.equal(p.of('ready').length, 0);
    // the i-th wait the probe chose (logged) is within [0, 250 ms * 2^i], and it was honoured
    const waits = [...p.log().matchAll(/connect failed.* retry_in_ms=(\d+)/g)].map((m) => Number(m[1]));
    assert.ok(waits.length >= n - 1);
    waits.forEach((w, i) => assert.ok(w <= Math.min(30000, 250 * 2 ** i), `wait ${i}: ${w} ms`));
    const gaps = up.conns.slice(1).map((c, i) => c.t0 - up.conns[i].t0);
    gaps.forEach((g, i) => assert.ok(g >= waits[i] - 5, `gap ${i}: ${g} ms < wait ${waits[i]} ms`));
    assert.match(p.log(), /upstream websocket connect failed/);
  } finally {
    await p.stop();
    await up.close();
  }
});

test('close 1012 (service restart) reconnects at once, even after earlier failures', async () => {
  let rejectFirst = 3; // raise the backoff ceiling to 2 s first
  const up = await upstream({
    onConn: (c) => (rejectFirst-- > 0 ? c.ws._socket.destroy() : setTimeout(c.greet, 10)),
  });
  const p = startProbe('restart', up.url(), ['0xaaa']);
  try {
    const r = await p.waitFor((e) => e.type === 'ready', 'first ready', 10000);
    const c = up.conns.at(-1);
    c.ws.close(1012, 'service restart');
    const down = await p.waitFor(isDown(r.gen), 'down after 1012');
    // lws 4.1.6 reports a received 1012 as 1002 (it folds 1012..1015 into 1002)
    assert.ok([1012, 1002].includes(down.code), `code ${down.code}`);
    assert.equal(down.reason, 'service restart');
    await p.waitFor(isReady(r.gen + 1), 'ready after restart', 3000);
    const next = up.conns.at(-1);
    // the decision is logged; the measured gap is a few ms (the backoff ceiling here is 2 s)
    assert.match(p.log(), new RegExp(`upstream websocket down" gen=${r.gen} code=${down.code} .*retry_in_ms=0\\b`));
    assert.ok(next.t0 - c.closed.t < 250, `reconnected after ${next.t0 - c.closed.t} ms`);
  } finally {
    await p.stop();
    await up.close();
  }
});

test('a peer that stops answering pings is dropped after the ping timeout', async () => {
  // autoPong off: the first connection never answers; later ones answer by hand
  const up = await upstream({
    autoPong: false,
    onConn: (c) => {
      if (c.index > 0) c.ws.on('ping', (d) => c.ws.pong(d));
      setTimeout(c.greet, 10);
    },
  });
  const p = startProbe('pingtimeout', up.url(), [], ['--ping-interval', '200', '--ping-timeout', '500']);
  try {
    const ready = await p.waitFor(isReady(1), 'ready 1');
    const down = await p.waitFor(isDown(1), 'down for silence', 5000);
    assert.equal(down.reason, 'ping timeout');
    const silent = down.t - ready.t;
    assert.ok(silent >= 650 && silent < 2500, `dropped ${silent} ms after ready (200 + 500)`);
    assert.ok(up.conns[0].pings >= 1);
    await p.waitFor(isReady(2), 'ready 2', 5000);
    // the second connection answers: pings flow and it stays up
    await sleep(1500);
    assert.ok(up.conns[1].pings >= 5, `pings on a healthy connection: ${up.conns[1].pings}`);
    assert.equal(p.of('down').length, 1);
    const st = await p.stats();
    assert.equal(st.ping_timeouts, 1);
    assert.equal(st.state, 'ready');
  } finally {
    await p.stop();
    await up.close();
  }
});

test('data frames also count as proof of life', async () => {
  // no pongs at all, but an event every 100 ms: never dropped
  const up = await upstream({
    autoPong: false,
    onConn: (c) => {
      setTimeout(c.greet, 10);
      c.timer = setInterval(() => c.ws.readyState === WebSocket.OPEN && c.ws.send('{"tick":1}'), 100);
      c.ws.on('close', () => clearInterval(c.timer));
    },
  });
  const p = startProbe('alive', up.url(), [], ['--ping-interval', '200', '--ping-timeout', '400']);
  try {
    await p.waitFor(isReady(1), 'ready');
    await sleep(1500);
    assert.equal(p.of('down').length, 0);
    assert.ok(up.conns[0].pings >= 4);
  } finally {
    await p.stop();
    await up.close();
  }
});

test('connect timeout: a server that accepts TCP but never upgrades, or never greets', async () => {
  const held = [];
  const tcp = net.createServer((s) => held.push(s));
  await new Promise((r) => tcp.listen(0, '127.0.0.1', r));
  const p1 = startProbe('connect-timeout', `ws://127.0.0.1:${tcp.address().port}/`, [], ['--connect-timeout', '400']);
  const up = await upstream({ onConn: () => {} }); // upgrades, never greets
  const p2 = startProbe('greet-timeout', up.url(), [], ['--connect-timeout', '400']);
  try {
    const d1 = await p1.waitFor(isDown(1), 'down (connect)', 5000);
    assert.equal(d1.reason, 'connect timeout');
    const d2 = await p2.waitFor(isDown(1), 'down (greeting)', 5000);
    assert.equal(d2.reason, 'no ready greeting in time');
    assert.equal(up.conns[0].received.length, 0, 'nothing sent without a greeting');
    await p1.waitFor(isDown(2), 'a second attempt', 5000);
    assert.ok((await p1.stats()).connect_timeouts >= 2);
  } finally {
    await p1.stop();
    await p2.stop();
    for (const s of held) s.destroy();
    tcp.close();
    await up.close();
  }
});

test('RECONNECT, stale-gen sends, STOP and START', async () => {
  const up = await upstream();
  const p = startProbe('control', up.url(), ['0xaaa']);
  try {
    await p.waitFor(isReady(1), 'ready 1');
    p.cmd('reconnect');
    const down = await p.waitFor(isDown(1), 'down 1');
    assert.equal(down.reason, 'reconnect requested');
    await p.waitFor(isReady(2), 'ready 2', 2000);
    assert.ok(p.of('ready')[1].t - down.t < 1000, 'reconnected at once');
    assert.match(p.log(), /gen=1 code=1000 reason="reconnect requested" retry_in_ms=0/);
    await until(() => up.conns[0].closed, { msg: 'old connection closed' });
    assert.equal(up.conns[0].closed.code, 1000);
    await until(() => up.conns[1].received.length === 1, { msg: 'resubscribed' });

    p.cmd('send-gen 1 {"stale":true}'); // the core's frame for a dead connection: dropped
    p.cmd('send {"fresh":true}');
    await until(() => up.conns[1].received.some((r) => r.text === '{"fresh":true}'), { msg: 'fresh send' });
    await sleep(100);
    assert.ok(!up.conns[1].received.some((r) => r.text.includes('stale')));
    assert.equal((await p.stats()).dropped_sends, 1);

    p.cmd('stop');
    const down2 = await p.waitFor(isDown(2), 'down 2');
    assert.equal(down2.code, 1000);
    await until(() => up.conns[1].closed, { msg: 'closed on stop' });
    assert.equal(up.conns[1].closed.code, 1000);
    await sleep(800);
    assert.equal(up.conns.length, 2, 'no reconnect while stopped');
    assert.equal((await p.stats()).state, 'idle');
    p.cmd('start');
    await p.waitFor(isReady(3), 'ready 3 after start');
    assert.equal(up.conns.length, 3);
  } finally {
    await p.stop();
    await up.close();
  }
});

test('SIGTERM closes the upstream with 1001 and exits cleanly', async () => {
  const up = await upstream();
  const p = startProbe('sigterm', up.url(), ['0xaaa']);
  await p.waitFor(isReady(1), 'ready');
  const r = await p.stop();
  assert.equal(r.code, 0);
  await until(() => up.conns[0].closed, { msg: 'close seen by the server' });
  assert.equal(up.conns[0].closed.code, 1001);
  assert.deepEqual(p.of('down').map((d) => [d.gen, d.code]), [[1, 1001]]);
  await up.close();
});

// A test CA and a server certificate for DNS:localhost only. The probe trusts the CA through
// SSL_CERT_FILE, which OpenSSL's default verify paths honour: the same path as the OS CA store.
function makePki(t) {
  const dir = fs.mkdtempSync(path.join(OUT, 'tls-'));
  const f = (n) => path.join(dir, n);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  try {
    execFileSync('openssl', ['req', '-x509', ...ec, '-subj', '/CN=statusrelay-test-ca', '-days', '1',
      '-keyout', f('ca.key'), '-out', f('ca.pem')], { stdio: 'ignore' });
    execFileSync('openssl', ['req', ...ec, '-subj', '/CN=localhost', '-keyout', f('srv.key'), '-out', f('srv.csr')],
      { stdio: 'ignore' });
    fs.writeFileSync(f('ext.cnf'), 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n');
    execFileSync('openssl', ['x509', '-req', '-in', f('srv.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'),
      '-CAcreateserial', '-days', '1', '-out', f('srv.pem'), '-extfile', f('ext.cnf')], { stdio: 'ignore' });
  } catch {
    return null;
  }
  return { ca: f('ca.pem'), key: fs.readFileSync(f('srv.key')), cert: fs.readFileSync(f('srv.pem')) };
}

async function tlsUpstream(pki) {
  const server = https.createServer({ key: pki.key, cert: pki.cert });
  server.tlsErrors = 0;
  server.on('tlsClientError', () => { server.tlsErrors++; });
  await new Promise((r) => server.listen({ port: 0, host: '::', ipv6Only: false }, r));
  const up = await upstream({ server });
  return { server, up, port: server.address().port };
}

test('wss:// verifies the certificate chain and the host name', async (t) => {
  const pki = makePki();
  if (!pki) { t.skip('openssl not available'); return; }
  const { server, up, port } = await tlsUpstream(pki);
  const trusted = { SSL_CERT_FILE: pki.ca };
  const ok = startProbe('tls-ok', `wss://localhost:${port}/`, ['0x1'], [], trusted);
  const untrusted = startProbe('tls-untrusted', `wss://localhost:${port}/`, ['0x1'], [],
    { SSL_CERT_FILE: '/nonexistent' });
  const wrongName = startProbe('tls-wrong-name', `wss://127.0.0.1:${port}/`, ['0x1'], [], trusted);
  try {
    // trusted chain + matching name: a working connection
    await ok.waitFor(isReady(1), 'ready over TLS');
    await ok.waitFor((e) => e.type === 'frame' && e.data === ack('0x1'), 'ack over TLS');
    // unknown issuer, and a certificate for another name: refused before any upgrade
    const d1 = await untrusted.waitFor(isDown(1), 'untrusted refused');
    assert.match(d1.reason, /^certificate verify failed: unable to get local issuer certificate/);
    const d2 = await wrongName.waitFor(isDown(1), 'name mismatch refused');
    assert.match(d2.reason, /^certificate verify failed: .*mismatch/);
    assert.equal(untrusted.of('ready').length + wrongName.of('ready').length, 0);
    assert.equal(up.conns.length, 1, 'only the verified client reached the websocket');
    assert.match(untrusted.log(), /upstream websocket connect failed.*url=wss:\/\/localhost:\d+\/ .*certificate verify failed/);
  } finally {
    await ok.stop();
    await untrusted.stop();
    await wrongName.stop();
    await up.close();
    server.close();
  }
});

// ---- the dashboard stub ----------------------------------------------------------------------

async function dashProbe(name, flags = []) {
  const up = await upstream();
  const p = startProbe(name, up.url(), [], ['--listen', '127.0.0.1:0', ...flags]);
  const l = await p.waitFor((e) => e.type === 'listening', 'listening');
  return { up, p, port: l.port };
}

function wsClient(url) {
  const ws = new WebSocket(url);
  const c = { ws, msgs: [], closed: null, error: null };
  c.open = new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  ws.on('message', (d) => c.msgs.push(d.toString()));
  ws.on('close', (code, reason) => { c.closed = { code, reason: reason.toString() }; });
  ws.on('error', (e) => { c.error = e; });
  return c;
}

test('dashboard stub: the page, 404, sessions with ids, echo through the core, close codes', async () => {
  const { up, p, port } = await dashProbe('dash');
  try {
    assert.ok(port > 0);
    const page = await fetch(`http://127.0.0.1:${port}/`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type'), /text\/html/);
    assert.match(await page.text(), /<title>statusrelay · live requests<\/title>/);
    assert.equal((await fetch(`http://127.0.0.1:${port}/nope`)).status, 404);

    const a = wsClient(`ws://127.0.0.1:${port}/`);
    const b = wsClient(`ws://127.0.0.1:${port}/?token=x`);
    await a.open;
    await b.open;
    const opens = await until(() => p.of('dash_open').length === 2 && p.of('dash_open'), { msg: 'two opens' });
    assert.deepEqual(opens.map((o) => o.session).sort(), [1, 2]);
    assert.equal(opens[0].peer, '127.0.0.1');
    a.ws.send('hello');
    b.ws.send('x'.repeat(5000), { fin: false }); // fragmented client message
    b.ws.send('y', { fin: true });
    await until(() => a.msgs.length === 1 && b.msgs.length === 1, { msg: 'echoes' });
    assert.deepEqual(a.msgs, ['echo:hello']);
    assert.equal(b.msgs[0], `echo:${'x'.repeat(5000)}y`);

    a.ws.send('close-me'); // the core answers with XMSG_DASH_CLOSE 4001 "bye"
    await until(() => a.closed, { msg: 'a closed' });
    assert.deepEqual(a.closed, { code: 4001, reason: 'bye' });
    const gone = await p.waitFor((e) => e.type === 'dash_gone', 'gone');
    const aid = p.of('dash_msg').find((m) => m.data === 'close-me').session;
    assert.equal(gone.session, aid);

    const big = wsClient(`ws://127.0.0.1:${port}/`); // a message over 64 KiB closes with 1009
    await big.open;
    big.ws.send('z'.repeat(70000));
    await until(() => big.closed, { msg: 'big closed' });
    assert.equal(big.closed.code, 1009);

    const other = wsClient(`ws://127.0.0.1:${port}/other`); // only "/" upgrades
    await assert.rejects(other.open);
    await p.stop(); // shutdown closes the remaining session with 1001
    await until(() => b.closed, { msg: 'b closed on shutdown' });
    assert.equal(b.closed.code, 1001);
    assert.equal(p.of('dash_gone').length, 3, 'one GONE per OPEN');
  } finally {
    await p.stop();
    await up.close();
  }
});

test('dashboard stub: a session whose outbox overflows is closed, others are unaffected', async () => {
  const { up, p, port } = await dashProbe('dash-slow', ['--queue-max', '16']);
  try {
    const a = wsClient(`ws://127.0.0.1:${port}/`);
    const b = wsClient(`ws://127.0.0.1:${port}/`);
    await a.open;
    await b.open;
    a.ws.send('flood 2000'); // 2000 frames pushed at once: far over the cap of 16
    b.ws.send('flood 10');
    await until(() => a.closed && b.msgs.length === 10, { msg: 'a closed, b served' });
    assert.equal(a.closed.code, 1013);
    assert.ok(b.ws.readyState === WebSocket.OPEN);
    assert.equal((await p.stats()).dash_slow_closed, 1);
    b.ws.close();
  } finally {
    await p.stop();
    await up.close();
  }
});

test('dashboard listen address in use: start-up fails with one clear line', async () => {
  const port = await freePort();
  const holder = net.createServer();
  await new Promise((r) => holder.listen(port, '127.0.0.1', r));
  const p = startProbe('inuse', 'ws://127.0.0.1:9/', [], ['--listen', `127.0.0.1:${port}`]);
  try {
    const r = await p.exited;
    assert.equal(r.code, 1);
    assert.equal(p.of('start_failed').length, 1);
    assert.match(p.log(), /level=error .*msg="dashboard listen address in use" listen=127\.0\.0\.1:\d+/);
    assert.doesNotMatch(p.log(), /Sanitizer/);
  } finally {
    holder.close();
  }
});
