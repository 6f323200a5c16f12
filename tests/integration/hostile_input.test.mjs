// hostile_input.test.mjs - issue 22 items 5-7: hostile input from receivers, the upstream and
// clients, each made on loopback against a real redis-server and `statusrelay serve`:
// - a receiver answering with a 200 KB response header: dead-lettered after the schedule
//   with error "protocol", not retried forever as a local failure;
// - a signed upstream webhook with a far-future updatedAt: refused (400), the request's
//   state unchanged and the next real update applied;
// - a flood of websocket pings on the dashboard: closed 1008 like a message flood;
// - Host with userinfo, a non-numeric port, or twice: 403 forbidden_host on both ports;
// - webhook custom headers with control characters, names differing only in case, and
//   oversized values: refused with a message saying which;
// - /readyz during a Redis pause (CLIENT PAUSE): 503 within about a second.
// (The cluster URL and lastEventId items are unit tests: test_relay_store_slot, test_dash_msg.)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { client } from './lib/dash_client.mjs';
import { startRawServer, upstreamPayload, ingest, rid } from './lib/hooks.mjs';

const KEY = 'hostile-input-test-key';
let redis;
let d;
const cleanup = [];

before(async () => {
  redis = await startRedis();
  d = await startDaemon({
    redisUrl: redis.url, apiKey: KEY, name: 'hostile-daemon',
    env: { STATUSRELAY_REDIS_PREFIX: 'hostile', STATUSRELAY_RETRY_SCHEDULE: '0s,200ms,200ms' },
  });
});
after(async () => {
  for (const f of cleanup.reverse()) { try { await f(); } catch {} }
  await d?.stop();
  await redis?.stop();
});

const metric = async (re) => {
  const m = await (await fetch(d.url + '/metrics')).text();
  const v = re.exec(m);
  return v ? Number(v[1]) : 0;
};

test('a receiver answering with a 200 KB response header: attempts fail with "protocol" and the delivery goes dead', async () => {
  const big = 'a'.repeat(200 * 1024);
  const rx = await startRawServer((s) => {
    s.end(`HTTP/1.1 200 OK\r\nX-Big: ${big}\r\nContent-Length: 2\r\n\r\nok`);
  });
  cleanup.push(() => rx.stop());
  const local0 = await metric(/^statusrelay_webhook_local_failures_total (\d+)/m);
  const wh = await d.post('/v1/webhooks', { url: rx.url('/big-head'), filters: {} });
  assert.equal(wh.status, 201, wh.text);
  const r = rid('bighead');
  assert.equal(await ingest(d, KEY, upstreamPayload({ rid: r, status: 'pending' })), 200);
  const dead = await until(async () => {
    const x = await d.get(`/v1/webhooks/${wh.body.id}/deliveries?state=dead`);
    return x.status === 200 && x.body.deliveries.length === 1 ? x.body.deliveries[0] : null;
  }, { timeoutMs: 20000, msg: 'the delivery dead-lettered' });
  assert.equal(dead.requestId, r);
  assert.equal(dead.attempts.length, 3, JSON.stringify(dead.attempts));
  for (const a of dead.attempts) assert.equal(a.error, 'protocol', JSON.stringify(a));
  assert.equal(rx.hits(), 3, 'each attempt reached the receiver once');
  assert.equal(await metric(/^statusrelay_webhook_local_failures_total (\d+)/m), local0,
    'not counted as a local failure');
  await d.del(`/v1/webhooks/${wh.body.id}`);
});

test('a signed observation with a far-future updatedAt is refused; the request is not frozen', async () => {
  const r = rid('future');
  const t0 = Date.now();
  assert.equal(await ingest(d, KEY, upstreamPayload({ rid: r, status: 'pending', updatedAt: t0 })), 200);
  const rej0 = await metric(/^statusrelay_events_rejected_total\{source="webhook",reason="future_updated_at"\} (\d+)/m);
  // 30 days ahead (a signed payload, or an upstream clock gone wrong)
  const body = JSON.stringify(upstreamPayload({ rid: r, status: 'success', updatedAt: t0 + 30 * 86400e3 }));
  const ts = String(Date.now());
  const sig = crypto.createHmac('sha256', KEY).update(`${ts}.${body}`).digest('hex');
  const res = await fetch(`${d.url}/v1/ingest/upstream`, {
    method: 'POST', body,
    headers: { 'content-type': 'application/json', 'x-signature-timestamp': ts, 'x-signature-sha256': sig },
  });
  const j = await res.json();
  assert.equal(res.status, 400, JSON.stringify(j));
  assert.equal(j.error.code, 'invalid_body');
  assert.equal(j.error.field, 'data.updatedAt');
  assert.match(j.error.message, /ahead of this relay's clock.*STATUSRELAY_MAX_CLOCK_SKEW/);
  let st = await d.get(`/v1/requests/${r}`);
  assert.equal(st.body.status, 'pending', 'state unchanged');
  assert.equal(st.body.updatedAt, t0);
  assert.equal(await metric(/^statusrelay_events_rejected_total\{source="webhook",reason="future_updated_at"\} (\d+)/m), rej0 + 1);
  assert.match(d.proc.log(), /observation refused, updatedAt ahead of this clock.*source=webhook/);
  // the next real update applies
  assert.equal(await ingest(d, KEY, upstreamPayload({ rid: r, status: 'submitted', updatedAt: t0 + 1000 })), 200);
  st = await d.get(`/v1/requests/${r}`);
  assert.equal(st.body.status, 'submitted', 'a later real update applies');
  assert.equal(st.body.seq, 2);
});

test('a flood of websocket pings on the dashboard gets the connection closed (1008) like a message flood', async () => {
  const c = client(d.wsUrl);
  await c.ready;
  // a legitimate client pinging now and then is not affected
  for (let i = 0; i < 20; i++) c.ws.ping();
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(c.closed, null, 'a few pings are fine');
  const t0 = Date.now();
  let sent = 0;
  while (c.closed === null && Date.now() - t0 < 8000) {
    if (c.ws.readyState === 1 && c.ws._socket.writableLength < 1 << 20)
      for (let i = 0; i < 500; i++, sent++) c.ws.ping();
    await new Promise((r) => setImmediate(r));
  }
  await until(() => c.closed, { timeoutMs: 10000, msg: `closed after ${sent} pings` });
  console.log(`# ping flood: ${sent} pings sent in ${Date.now() - t0} ms before the close`);
  assert.equal(c.closed.code, 1008, JSON.stringify(c.closed));
  assert.match(d.proc.log(), /dashboard session over its control frame rate: closed/);
  // others are unaffected
  const o = client(d.wsUrl);
  await o.ready;
  o.close();
});

/** One raw HTTP/1.1 request with exactly these header lines; resolves { status, text }. */
function rawGet(port, path, headerLines) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let buf = '';
    s.on('connect', () => s.write(`GET ${path} HTTP/1.1\r\n${headerLines.map((l) => `${l}\r\n`).join('')}Connection: close\r\n\r\n`));
    s.on('data', (c) => { buf += c.toString('latin1'); });
    s.on('error', reject);
    s.on('close', () => {
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(buf);
      resolve({ status: m ? Number(m[1]) : 0, text: buf.slice(buf.indexOf('\r\n\r\n') + 4) });
    });
    s.setTimeout(10000, () => s.destroy(new Error('no answer')));
  });
}

test('Host with userinfo, a non-numeric port or twice is refused on the REST and dashboard ports', async () => {
  const cases = [
    ['userinfo', [`Host: 127.0.0.1:${d.httpPort}@evil.example`]],
    ['port not a number', ['Host: localhost:http']],
    ['two Host headers', [`Host: 127.0.0.1:${d.httpPort}`, 'Host: evil.example']],
    ['two Host headers, both loopback', [`Host: 127.0.0.1:${d.httpPort}`, 'Host: localhost']],
  ];
  for (const [what, lines] of cases) {
    const r = await rawGet(d.httpPort, '/v1/webhooks', lines);
    assert.equal(r.status, 403, `REST ${what}: ${r.text}`);
    assert.equal(JSON.parse(r.text).error.code, 'forbidden_host', what);
    const w = await rawGet(d.wsPort, '/chains.json', lines.map((l) => l.replace(String(d.httpPort), String(d.wsPort))));
    assert.equal(w.status, 403, `dashboard ${what}: ${w.text}`);
  }
  // the plain spellings still work
  assert.equal((await rawGet(d.httpPort, '/v1/webhooks', [`Host: 127.0.0.1:${d.httpPort}`])).status, 200);
  assert.equal((await rawGet(d.httpPort, '/v1/webhooks', ['Host: localhost'])).status, 200);
  assert.notEqual((await rawGet(d.wsPort, '/chains.json', [`Host: 127.0.0.1:${d.wsPort}`])).status, 403);
});

test('webhook custom headers: control characters, names differing only in case and oversized values are refused', async () => {
  const url = 'http://127.0.0.1:9/h';
  const refused = async (headers, re, what) => {
    const r = await d.post('/v1/webhooks', { url, headers });
    assert.equal(r.status, 400, `${what}: ${r.text}`);
    assert.equal(r.body.error.code, 'invalid_request', what);
    assert.match(r.body.error.message, re, what);
  };
  // NUL never gets this far (the JSON reader refuses \u0000), the rest are the header rule's
  assert.equal((await d.post('/v1/webhooks', { url, headers: { 'X-A': 'a\u0000b' } })).status, 400);
  for (const c of ['\u0001', '\u0008', '\u000b', '\u000c', '\u001b', '\u007f'])
    await refused({ 'X-A': `a${c}b` }, /control character/, `0x${c.charCodeAt(0).toString(16)}`);
  await refused({ 'X-Team': 'a', 'x-team': 'b' }, /differ only in case/, 'case');
  await refused({ 'X-Big': 'v'.repeat(100 * 1024) }, /too long \(102400 bytes; at most 4096\)/, '100 kB');
  await refused({ 'X-Big': 'v'.repeat(4097) }, /too long/, '4097 B');
  // and the same through PATCH
  const ok = await d.post('/v1/webhooks', { url, headers: { 'X-Tab': 'a\tb', 'X-Max': 'v'.repeat(4096), 'X-Utf8': 'caf\u00e9' } });
  assert.equal(ok.status, 201, ok.text);
  const p = await fetch(`${d.url}/v1/webhooks/${ok.body.id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ headers: { 'X-A': 'x', 'x-a': 'y' } }) });
  assert.equal(p.status, 400, await p.text());
  await d.del(`/v1/webhooks/${ok.body.id}`);
});

test('/readyz turns 503 within about a second of a Redis pause, and back to 200 after it', async () => {
  const readyz = async () => { const r = await fetch(`${d.url}/readyz`); return { status: r.status, body: await r.json() }; };
  await until(async () => (await readyz()).status === 200, { msg: 'ready before' });
  const PAUSE_MS = 4000;
  assert.equal(await redis.cmd('CLIENT', 'PAUSE', String(PAUSE_MS), 'ALL'), 'OK');
  const t0 = Date.now();
  // probed every 200 ms, as an orchestrator would (more slowly); the command timeout (5 s)
  // is longer than the pause, so only the readiness bound can turn it 503 meanwhile
  const down = await until(async () => {
    const r = await readyz();
    return r.status === 503 ? r : null;
  }, { timeoutMs: PAUSE_MS - 500, stepMs: 200, msg: 'readyz 503 during the pause' });
  const took = Date.now() - t0;
  console.log(`# readyz: 503 after ${took} ms of a ${PAUSE_MS} ms Redis pause: ${JSON.stringify(down.body)}`);
  assert.equal(down.body.redis, 'not_answering');
  assert.ok(down.body.redisUnansweredMs > 1000, JSON.stringify(down.body));
  assert.ok(took < 3000, `503 only after ${took} ms`);
  await until(async () => (await readyz()).status === 200, { timeoutMs: 15000, msg: 'ready again after the pause' });
});
