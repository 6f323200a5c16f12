// dash_limits.test.mjs - a hostile web page and hostile clients against the dashboard port
// (issue 15, medium 5 and 6, low "1009"): DNS rebinding (a foreign Host on the page,
// /chains.json and the websocket upgrade), history amplification by a client that never reads
// (closed by the outbox byte limit, RSS growth bounded), and an oversized fragmented message
// (close 1009). Real redis-server and daemon on loopback.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import crypto from 'node:crypto';
import WebSocket from 'ws';
import { BIN, until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { ingest, upstreamPayload, rid } from './lib/hooks.mjs';

const EVENT = 'request.status.updated';
const KEY = 'dash-limits-key';
// Under ASan freed memory waits in its quarantine (256 MB by default) before it is reused, so
// RSS bounds add that much there (the unfixed server grew by 455 MB in optimised builds).
const SANITIZED = (() => {
  try { return fs.readFileSync(BIN).includes('__asan_init'); } catch { return false; }
})();
const QUARANTINE_MB = SANITIZED ? 256 : 0;
const cleanup = [];
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });

async function stack(env = {}) {
  const redis = await startRedis();
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, env });
  cleanup.push(() => d.stop(), () => redis.stop());
  return d;
}

// A GET on the dashboard port with a chosen Host header (a rebound page's Host is its own name).
function getWithHost(d, p, host) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: d.wsPort, path: p, method: 'GET', agent: false,
      headers: { host } }, (res) => {
      let t = '';
      res.on('data', (c) => { t += c; });
      res.on('end', () => resolve({ status: res.statusCode, text: t, type: res.headers['content-type'] }));
    });
    req.on('error', reject);
    req.end();
  });
}

// A websocket upgrade with a chosen Host (and Origin): 'open' (with the greeting) or the
// refusal's HTTP status.
function upgradeWithHost(d, host, origin) {
  return new Promise((resolve) => {
    const ws = new WebSocket(d.wsUrl, { headers: { host, ...(origin ? { origin } : {}) }, perMessageDeflate: false });
    ws.on('message', (m) => {
      const f = JSON.parse(m.toString());
      if (f.type === 'connection') { ws.close(); resolve({ open: true }); }
    });
    ws.on('unexpected-response', (req, res) => { resolve({ open: false, status: res.statusCode }); req.destroy(); });
    ws.on('error', (e) => resolve({ open: false, error: e.message }));
  });
}

test('DNS rebinding: without a stream token a foreign Host is refused on the page, /chains.json and the upgrade', async () => {
  const d = await stack({ STATUSRELAY_ALLOWED_HOSTS: 'dash.internal, other.internal' });
  const evil = `rebind.evil.example:${d.wsPort}`;
  for (const p of ['/', '/index.html', '/app.js', '/chains.json']) {
    const r = await getWithHost(d, p, evil);
    assert.equal(r.status, 403, `${p}: ${r.status} ${r.text.slice(0, 200)}`);
    assert.match(r.type, /application\/json/);
    assert.equal(JSON.parse(r.text).error.code, 'forbidden_host');
  }
  assert.equal((await getWithHost(d, '/', '127.0.0.1.evil.example')).status, 403);
  // the rebinding page's upgrade: Origin and Host match (same-origin for the old rule), refused
  const up = await upgradeWithHost(d, evil, `http://${evil}`);
  assert.equal(up.open, false, 'a foreign Host cannot open the stream');
  assert.equal(up.status, 403, JSON.stringify(up));
  // loopback spellings and the listed names pass
  for (const h of [`127.0.0.1:${d.wsPort}`, `localhost:${d.wsPort}`, 'localhost', `127.1:${d.wsPort}`,
    `[::1]:${d.wsPort}`, 'dash.internal:443', 'DASH.internal', 'other.internal']) {
    const r = await getWithHost(d, '/', h);
    assert.equal(r.status, 200, h);
    assert.notEqual((await getWithHost(d, '/chains.json', h)).status, 403, h);
    assert.deepEqual(await upgradeWithHost(d, h, `http://${h}`), { open: true }, h);
  }
  assert.match(d.proc.log(), /dashboard request with a foreign Host refused/);
  // with a stream token configured the token protects broad subscriptions: any Host is served
  const t = await stack({ STATUSRELAY_STREAM_TOKEN: 'stream-tok-1234567890' });
  assert.equal((await getWithHost(t, '/', 'dash.example.com')).status, 200);
  assert.deepEqual(await upgradeWithHost(t, 'dash.example.com', 'https://dash.example.com'), { open: true });
});

// ---- history amplification -----------------------------------------------------------------

const rssKb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);

/** A request with n events, each frame carrying ~3.9 KB of tracking metadata (a history answer
 *  of ~n x 4.5 KB for ~60 bytes asked). */
async function bigHistory(d, n) {
  const id = rid('amplify');
  const META = { blob: 'x'.repeat(3900) };
  assert.equal((await d.post('/v1/requests', { requestId: id, metadata: META })).status, 201);
  const t0 = Date.now() - 10 * 60 * 1000;
  for (let i = 0; i < n; i++)
    assert.equal(await ingest(d, KEY, upstreamPayload({ rid: id, status: i % 2 ? 'waiting' : 'pending',
      updatedAt: t0 + i * 1000, inTx: [`0x${String(i).padStart(64, '0')}`] })), 200);
  return id;
}

function client(url, headers = {}) {
  const ws = new WebSocket(url, { headers, perMessageDeflate: false, maxPayload: 64 * 1024 * 1024 });
  const c = { ws, frames: [], closed: null };
  c.open = new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  ws.on('message', (m) => c.frames.push(JSON.parse(m.toString())));
  ws.on('close', (code, reason) => { c.closed = { code, reason: reason.toString() }; });
  ws.on('error', () => {});
  c.send = (o) => ws.send(typeof o === 'string' ? o : JSON.stringify(o));
  return c;
}

test('history amplification: a client that never reads is cut off by queued bytes (1013), RSS bounded; anonymous answers are capped', async () => {
  const d = await stack();
  const id = await bigHistory(d, 100);
  // a reading client gets the whole answer (a tool on loopback: not anonymous)
  const ok = client(d.wsUrl);
  await ok.open;
  ok.send({ type: 'history', filters: { id } });
  const full = await until(() => ok.frames.find((f) => f.type === 'history'), { msg: 'history answer' });
  assert.equal(full.status, 'success');
  assert.equal(full.data.events.length, 100);
  const answerBytes = JSON.stringify(full).length;
  assert.ok(answerBytes > 400_000, `answer ${answerBytes} bytes`);
  ok.ws.close();
  // at most 4 history answers in flight per connection: a burst of 20 gets every answer, the
  // ones over the limit as a too_many_requests error frame (the connection stays open)
  const burst = client(d.wsUrl);
  await burst.open;
  for (let i = 0; i < 20; i++) burst.send({ type: 'history', filters: { id } });
  await until(() => burst.frames.filter((f) => f.type === 'history').length === 20, { msg: '20 history answers', timeoutMs: 20000 });
  const answers = burst.frames.filter((f) => f.type === 'history');
  const busy = answers.filter((f) => f.status === 'error');
  assert.ok(busy.length >= 1 && busy.length <= 16, `${busy.length} refused`);
  for (const f of busy) assert.equal(f.error.code, 'too_many_requests');
  assert.equal(answers.filter((f) => f.status === 'success').length, 20 - busy.length);
  assert.equal(burst.closed, null);
  burst.ws.close();
  // an anonymous page (another origin) gets at most 20 events and 64 KiB, newest first kept
  const anon = client(d.wsUrl, { origin: 'https://elsewhere.example' });
  await anon.open;
  anon.send({ type: 'history', filters: { id } });
  const capped = await until(() => anon.frames.find((f) => f.type === 'history'), { msg: 'anonymous history' });
  assert.equal(capped.status, 'success');
  assert.ok(capped.data.events.length > 0 && capped.data.events.length <= 20, `${capped.data.events.length} events`);
  assert.ok(JSON.stringify(capped).length <= 64 * 1024 + 512, `${JSON.stringify(capped).length} bytes`);
  assert.equal(capped.data.truncated, true);
  assert.equal(capped.data.events.at(-1).data.updatedAt, full.data.events.at(-1).data.updatedAt, 'the newest event is kept');
  anon.ws.close();

  // the attacker: ~60 bytes per request, 8 s of history requests within the message rate, never reads
  const pid = d.proc.child.pid;
  const rss0 = rssKb(pid);
  let peak = rss0;
  const bad = client(d.wsUrl);
  await bad.open;
  bad.ws._socket.pause(); // stop reading: the kernel buffers fill, then the server's queue
  const msg = JSON.stringify({ type: 'history', filters: { id } });
  const t0 = Date.now();
  let sent = 0;
  while (Date.now() - t0 < 8000 && !/dashboard session too slow: closed/.test(d.proc.log())) {
    for (let i = 0; i < 8; i++, sent++) bad.send(msg); // 80 a second, under the 100/s rate
    peak = Math.max(peak, rssKb(pid));
    await new Promise((r) => setTimeout(r, 100));
  }
  for (let i = 0; i < 10; i++) { peak = Math.max(peak, rssKb(pid)); await new Promise((r) => setTimeout(r, 100)); }
  const growthMb = (peak - rss0) / 1024;
  console.log(`# history spam: sent=${sent} in ${Date.now() - t0} ms, answer=${answerBytes} B, rss0=${rss0} KB peak=${peak} KB growth=${growthMb.toFixed(1)} MB`);
  assert.match(d.proc.log(), /dashboard session too slow: closed.*bytes=/, 'closed for the bytes it queued');
  assert.ok(growthMb < 64 + QUARANTINE_MB, `RSS grew ${growthMb.toFixed(1)} MB`);
  // reading again, it finds the close code (the queue was dropped: a few frames, then 1013)
  bad.ws._socket.resume();
  await until(() => bad.closed, { msg: 'close', timeoutMs: 15000 });
  assert.equal(bad.closed.code, 1013, JSON.stringify(bad.closed));
  // others are unaffected
  const after = client(d.wsUrl);
  await after.open;
  after.send({ type: 'history', filters: { id } });
  assert.equal((await until(() => after.frames.find((f) => f.type === 'history'), { msg: 'history after' })).data.events.length, 100);
  after.ws.close();
  assert.doesNotMatch(d.proc.log(), /Sanitizer|runtime error|level=error/, 'daemon log');
});

// ---- message size ----------------------------------------------------------------------------

test('a message over 64 KiB is closed with 1009, in one frame or in fragments', async () => {
  const d = await stack();
  // fragmented four times: the old EOF depended on timing (it reset ~1 in 2 runs here)
  for (const fragmented of [false, true, true, true, true]) {
    const c = client(d.wsUrl);
    await c.open; // at once: the server is still greeting while the fragments arrive
    const big = `{"type":"history","filters":{"id":"${'a'.repeat(200 * 1024)}"}}`;
    if (!fragmented) c.ws.send(big);
    else { // many small fragments: the client is still sending when the server gives up
      const parts = big.match(/[^]{1,100}/g);
      parts.forEach((p, i) => c.ws.send(p, { fin: i === parts.length - 1 }));
    }
    await until(() => c.closed, { msg: `close (${fragmented ? 'fragmented' : 'one frame'})`, timeoutMs: 15000 });
    assert.equal(c.closed.code, 1009, `${fragmented ? 'fragmented' : 'one frame'}: ${JSON.stringify(c.closed)}`);
  }
  // a fragmented message under the limit is one message
  const c = client(d.wsUrl);
  await c.open;
  const m = JSON.stringify({ type: 'history', filters: { id: 'frag-ok' } });
  c.ws.send(m.slice(0, 10), { fin: false });
  c.ws.send(m.slice(10, 20), { fin: false });
  c.ws.send(m.slice(20), { fin: true });
  const h = await until(() => c.frames.find((f) => f.type === 'history'), { msg: 'fragmented history' });
  assert.equal(h.status, 'success');
  assert.equal(c.closed, null);
  c.ws.close();
});
