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
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { ingest, upstreamPayload, rid } from './lib/hooks.mjs';

const EVENT = 'request.status.updated';
const KEY = 'dash-limits-key';
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
