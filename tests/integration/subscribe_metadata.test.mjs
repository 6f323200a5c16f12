// subscribe_metadata.test.mjs - two parts of issue 13 end to end, against a real redis-server
// and `statusrelay serve` on loopback:
//  - a refused dashboard subscription is an error frame that is not of type "subscribe", then
//    a close with a documented code (4400 / 4401 / 4429), so a client written like the
//    upstream's SDK (any "subscribe" frame is an ack; a close means "poll instead") falls back
//    to polling; other bad messages keep the connection open;
//  - the tracking metadata given to POST /v1/requests travels as "statusrelay.metadata" in
//    every webhook body (first attempt, retry, replay: the same bytes) and dashboard frame
//    (live, snapshot, history); a request tracked without metadata carries none;
//  - the live page, refused for want of the stream token (4401), asks for it and waits.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { until } from './lib/proc.mjs';
import { startReceiver, ingest, upstreamPayload, rid } from './lib/hooks.mjs';

const KEY = 'subscribe-metadata-key';
const EVENT = 'request.status.updated';
const cleanup = [];
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });

async function stack(env = {}, args = []) {
  const redis = await startRedis();
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, env, args });
  cleanup.push(() => d.stop(), () => redis.stop());
  return { redis, d };
}

/** A websocket client keeping every frame, and how the connection closed. */
function client(url) {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  const c = { ws, frames: [], closed: null };
  ws.on('message', (d) => { try { c.frames.push(JSON.parse(d.toString())); } catch { c.frames.push({ raw: d.toString() }); } });
  ws.on('close', (code, reason) => { c.closed = { code, reason: reason.toString() }; });
  ws.on('error', () => {});
  c.ready = until(() => c.frames.some((f) => f.type === 'connection'), { msg: 'greeting' });
  c.send = (o) => ws.send(JSON.stringify(o));
  c.wait = (pred, msg) => until(() => c.frames.find(pred), { msg, timeoutMs: 8000 });
  c.close = () => { try { ws.close(); } catch {} };
  cleanup.push(() => c.close());
  return c;
}

const ok2xx = (x) => x.status >= 200 && x.status < 300;
const sub = (filters, extra = {}) => ({ type: 'subscribe', event: EVENT, ...(filters ? { filters } : {}), ...extra });

/**
 * What the upstream's SDK does with its status socket (its trackRequestStatus): subscribe to
 * one id on open; a frame of type "connection" or "subscribe" is only logged (any
 * "subscribe" frame counts as confirmed); an event frame goes to onUpdate; a close before a
 * terminal status falls back to polling GET /intents/status/v3.
 */
function sdkLikeTracker(wsUrl, httpUrl, requestId) {
  const t = { confirmed: false, updates: [], polled: null, closeCode: null };
  const ws = new WebSocket(wsUrl);
  ws.on('error', () => {});
  ws.on('open', () => ws.send(JSON.stringify({ type: 'subscribe', event: EVENT, filters: { id: requestId } })));
  ws.on('message', (d) => {
    const msg = JSON.parse(d.toString());
    if (msg.type === 'connection') return;
    if (msg.type === 'subscribe') { t.confirmed = true; return; }
    if (msg.event === EVENT && msg.data) t.updates.push(msg.data);
  });
  ws.on('close', async (code) => {
    t.closeCode = code;
    const r = await fetch(`${httpUrl}/intents/status/v3?requestId=${requestId}`);
    t.polled = { status: r.status, body: await r.json() };
  });
  cleanup.push(() => { try { ws.close(); } catch {} });
  return t;
}

// ---- refused subscriptions -----------------------------------------------------------------

test('a refused subscription: error frame (not type "subscribe"), then close 4400/4401/4429; SDK-style clients poll', async () => {
  const tok = 'stream-token-for-refusals';
  const { d } = await stack({ STATUSRELAY_STREAM_TOKEN: tok, STATUSRELAY_WS_ANONYMOUS: 'false',
    STATUSRELAY_WS_MAX_SUBSCRIPTIONS: '2' });
  const X = rid('refused');
  assert.equal(await ingest(d, KEY, upstreamPayload({ rid: X, status: 'pending' })), 200);

  // an SDK-style client: anonymous ids are off, so its subscribe is refused; it must not read
  // the refusal as an ack, and the close sends it to polling, which answers
  const sdk = sdkLikeTracker(d.wsUrl, d.url, X);
  await until(() => sdk.polled, { msg: 'the SDK-style client fell back to polling' });
  assert.equal(sdk.confirmed, false, 'no frame of type "subscribe" for a refused subscription');
  assert.equal(sdk.closeCode, 4401);
  assert.equal(sdk.polled.status, 200);
  assert.equal(sdk.polled.body.status, 'pending');

  // each refusal: exactly one error frame, then the documented close code and reason
  const cases = [
    [sub({ id: X }), 'unauthorized', 4401],                      // anonymous ids turned off
    [sub(), 'unauthorized', 4401],                               // broad without the token
    [{ type: 'subscribe', event: 'statusrelay.stats' }, 'unauthorized', 4401],
    [sub(null, { token: 'wrong' }), 'unauthorized', 4401],
    [sub({ id: X }, { token: tok, lastEventId: 'yesterday' }), 'bad_cursor', 4400],
    [sub({ colour: 'red' }, { token: tok }), 'bad_request', 4400],
    [sub({ id: 'has space' }, { token: tok }), 'invalid_request_id', 4400],
    [{ type: 'subscribe', event: 'nope', token: tok }, 'unsupported_event', 4400],
  ];
  for (const [msg, code, closeCode] of cases) {
    const c = client(d.wsUrl);
    await c.ready;
    c.send(msg);
    await until(() => c.closed, { msg: `closed after ${code}` });
    const answers = c.frames.filter((f) => f.type !== 'connection');
    assert.equal(answers.length, 1, JSON.stringify(answers));
    assert.deepEqual(Object.keys(answers[0]), ['type', 'status', 'request', 'error']);
    assert.equal(answers[0].type, 'error');
    assert.equal(answers[0].status, 'error');
    assert.equal(answers[0].request, 'subscribe');
    assert.equal(answers[0].error.code, code, JSON.stringify(msg));
    assert.equal(typeof answers[0].error.message, 'string');
    assert.deepEqual(c.closed, { code: closeCode, reason: `subscription refused: ${code}` });
  }

  // the limit: two subscriptions are acked and live; the third is refused and closes (4429)
  const Y = rid('second');
  const c = client(`${d.wsUrl}?token=${tok}`);
  await c.ready;
  c.send(sub({ id: X }));
  c.send(sub({ id: Y }));
  await until(() => c.frames.filter((f) => f.type === 'subscribe' && f.status === 'success').length === 2, { msg: 'two acks' });
  c.send(sub({ id: rid('third') }));
  await until(() => c.closed, { msg: 'closed at the limit' });
  const last = c.frames.at(-1);
  assert.equal(last.type, 'error');
  assert.equal(last.error.code, 'too_many_subscriptions');
  assert.match(last.error.message, /at most 2 subscriptions/);
  assert.deepEqual(c.closed, { code: 4429, reason: 'subscription refused: too_many_subscriptions' });

  // other bad messages keep the connection open, and it keeps working
  const ok = client(`${d.wsUrl}?token=${tok}`);
  await ok.ready;
  ok.send({ type: 'unsubscribe', event: EVENT, filters: { id: 'has space' } });
  ok.send({ type: 'dance' });
  ok.send({ type: 'history', filters: {} });
  await until(() => ok.frames.filter((f) => f.status === 'error').length === 3, { msg: 'three error frames' });
  assert.deepEqual(ok.frames.filter((f) => f.status === 'error').map((f) => f.type), ['unsubscribe', 'error', 'history']);
  ok.send(sub({ id: X }));
  await ok.wait((f) => f.type === 'subscribe' && f.status === 'success', 'ack after errors');
  assert.equal(await ingest(d, KEY, upstreamPayload({ rid: X, status: 'success' })), 200);
  await ok.wait((f) => f.event === EVENT && f.data.status === 'success', 'event after errors');
  assert.equal(ok.closed, null);
  assert.match(d.proc.log(), /dashboard subscription refused: closed.*code=too_many_subscriptions close=4429/);
});

// ---- tracking metadata ---------------------------------------------------------------------

test('tracking metadata travels as statusrelay.metadata in webhook bodies and dashboard frames', async () => {
  const { d, redis } = await stack({}, ['--retry-schedule', '0s,200ms,400ms']);
  const rx = await startReceiver({ script: ['/retry=500'] }); // the first /retry attempt fails
  cleanup.push(() => rx.stop());
  for (const p of ['/all', '/retry']) {
    const r = await d.post('/v1/webhooks', { url: rx.url(p) });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  }
  const META = { orderId: 'A-1042', quote: { id: 'q_9', amounts: [1, 2.5] }, note: 'café "x"' };
  const A = rid('meta'), B = rid('plain');
  assert.equal((await d.post('/v1/requests', { requestId: A, metadata: META })).status, 201);
  assert.equal((await d.post('/v1/requests', { requestId: B })).status, 201);
  // the record's bounds: 4 KiB (pinned) and 32 levels of nesting
  const deep = (n) => { let v = 1; for (let i = 0; i < n; i++) v = [v]; return { a: v }; };
  const tooDeep = await d.post('/v1/requests', { requestId: rid('deep'), metadata: deep(32) });
  assert.equal(tooDeep.status, 400, JSON.stringify(tooDeep.body));
  assert.equal(tooDeep.body.error.code, 'invalid_metadata');
  assert.match(tooDeep.body.error.message, /nested at most 32/);
  assert.equal((await d.post('/v1/requests', { requestId: rid('deep'), metadata: deep(31) })).status, 201);

  // a dashboard following both ids, live
  const c = client(d.wsUrl);
  await c.ready;
  c.send(sub({ id: A }));
  c.send(sub({ id: B }));
  await until(() => c.frames.filter((f) => f.type === 'subscribe' && f.status === 'success').length === 2, { msg: 'acks' });

  for (const [id, status] of [[A, 'waiting'], [B, 'waiting'], [A, 'pending']])
    assert.equal(await ingest(d, KEY, upstreamPayload({ rid: id, status })), 200);
  const bodiesOf = (id, p) => rx.records().filter((x) => x.path === p && JSON.parse(x.body).data.requestId === id);
  await until(() => bodiesOf(A, '/all').length === 2 && bodiesOf(B, '/all').length === 1 &&
    bodiesOf(A, '/retry').filter(ok2xx).length === 2, { msg: 'deliveries', timeoutMs: 15000 });

  // webhook bodies: the object, last in "statusrelay", as compact JSON
  const tail = `,"metadata":${JSON.stringify(META)}}}`;
  for (const x of bodiesOf(A, '/all')) {
    assert.ok(x.body.endsWith(tail), x.body);
    assert.deepEqual(JSON.parse(x.body).statusrelay.metadata, META);
  }
  for (const x of bodiesOf(B, '/all')) {
    const b = JSON.parse(x.body);
    assert.equal('metadata' in b.statusrelay, false, x.body);
    assert.equal(b.data.requestId, B);
  }
  // a retried delivery is the same bytes (the body is rendered from the stored record)
  const retried = bodiesOf(A, '/retry');
  const first = retried.find((x) => x.status === 500);
  const again = retried.find((x) => ok2xx(x) && x.headers['webhook-id'] === first.headers['webhook-id']);
  assert.ok(first && again, JSON.stringify(retried.map((x) => x.status)));
  assert.equal(again.body, first.body);
  assert.ok(first.body.endsWith(tail));

  // dashboard frames: live events of A carry it, B's do not
  await until(() => c.frames.filter((f) => f.event === EVENT).length >= 3, { msg: 'three live frames' });
  for (const f of c.frames.filter((f) => f.event === EVENT)) {
    if (f.data.requestId === A) assert.deepEqual(f.statusrelay.metadata, META, JSON.stringify(f));
    else assert.equal('metadata' in f.statusrelay, false, JSON.stringify(f));
  }
  // a snapshot and a history answer are rendered from the same records
  const late = client(d.wsUrl);
  await late.ready;
  late.send(sub({ id: A }));
  const snap = await late.wait((f) => f.event === EVENT && f.statusrelay.snapshot, 'snapshot');
  assert.deepEqual(snap.statusrelay.metadata, META);
  late.send({ type: 'history', filters: { id: A } });
  const hist = await late.wait((f) => f.type === 'history' && f.status === 'success', 'history');
  assert.equal(hist.data.events.length, 2);
  for (const e of hist.data.events) assert.deepEqual(e.statusrelay.metadata, META);
  late.send({ type: 'history', filters: { id: B } });
  const histB = await late.wait((f) => f.type === 'history' && f.data?.filters?.id === B, 'history of B');
  assert.equal('metadata' in histB.data.events[0].statusrelay, false);

  // a replay sends the first event's bytes again, metadata included
  const before = bodiesOf(A, '/all');
  const rp = await d.post('/v1/replay', { requestId: A });
  assert.equal(rp.status, 202, JSON.stringify(rp.body));
  await until(() => rx.records().some((x) => x.headers['statusrelay-replay'] === '1'), { msg: 'replayed' });
  await until(() => rx.records().filter((x) => x.path === '/all' && x.headers['statusrelay-replay'] === '1').length === 2, { msg: 'replays to /all' });
  for (const x of rx.records().filter((x) => x.path === '/all' && x.headers['statusrelay-replay'] === '1')) {
    const orig = before.find((y) => y.headers['webhook-id'] === x.headers['webhook-id']);
    assert.ok(orig);
    assert.equal(x.body, orig.body);
  }

  // tracking again with new metadata: later events carry the new value
  const META2 = { orderId: 'A-1043' };
  assert.equal((await d.post('/v1/requests', { requestId: A, metadata: META2 })).status, 200);
  assert.equal(await ingest(d, KEY, upstreamPayload({ rid: A, status: 'success' })), 200);
  const fin = await c.wait((f) => f.event === EVENT && f.data.requestId === A && f.data.status === 'success', 'success frame');
  assert.deepEqual(fin.statusrelay.metadata, META2);
  await until(() => bodiesOf(A, '/all').some((x) => JSON.parse(x.body).data.status === 'success'), { msg: 'success body' });
  const sb = bodiesOf(A, '/all').find((x) => JSON.parse(x.body).data.status === 'success');
  assert.ok(sb.body.endsWith(`,"metadata":${JSON.stringify(META2)}}}`), sb.body);

  // metadata an older version stored (no "mdok" mark) is checked when an event is written:
  // a valid one travels, one the record could not carry stays out and the request works on
  const L = rid('legacy'), LD = rid('legacy-deep'), LB = rid('legacy-bad');
  const legacy = { legacy: true, list: Array.from({ length: 40 }, (_, i) => ({ i })) }; // 41 containers
  let deepText = '1';
  for (let i = 0; i < 40; i++) deepText = `[${deepText}]`;
  for (const [id, text] of [[L, JSON.stringify(legacy)], [LD, `{"a":${deepText}}`], [LB, '{"a":']]) {
    assert.equal((await d.post('/v1/requests', { requestId: id })).status, 201);
    await redis.cmd('HSET', `{statusrelay}:req:${id}`, 'meta', text);
  }
  for (const id of [L, LD, LB]) assert.equal(await ingest(d, KEY, upstreamPayload({ rid: id, status: 'pending' })), 200);
  await until(() => [L, LD, LB].every((id) => bodiesOf(id, '/all').length === 1), { msg: 'legacy deliveries' });
  assert.deepEqual(JSON.parse(bodiesOf(L, '/all')[0].body).statusrelay.metadata, legacy);
  for (const id of [LD, LB]) {
    assert.equal('metadata' in JSON.parse(bodiesOf(id, '/all')[0].body).statusrelay, false);
    assert.equal((await d.get(`/v1/requests/${id}`)).body.status, 'pending');
  }
  assert.doesNotMatch(d.proc.log(), /Sanitizer|runtime error|metadata unreadable|record unreadable/);
});

// ---- the live page after a refusal ---------------------------------------------------------

test('the page: a refused subscription (4401) shows the token form and waits; the token reconnects', { timeout: 120000 }, async (t) => {
  if (!fs.existsSync('/usr/bin/chromium')) { t.skip('chromium is not installed (make deps)'); return; }
  const { chromium } = await import('playwright-core');
  const tok = 'page-stream-token';
  const { d } = await stack({ STATUSRELAY_STREAM_TOKEN: tok });
  const A = rid('page');
  assert.equal(await ingest(d, KEY, upstreamPayload({ rid: A, status: 'pending' })), 200);
  const udd = fs.mkdtempSync(path.join(os.tmpdir(), 'sr-chromium-'));
  const browser = await chromium.launchPersistentContext(udd, {
    executablePath: '/usr/bin/chromium', headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
  });
  cleanup.push(async () => { await browser.close(); fs.rmSync(udd, { recursive: true, force: true }); });
  const page = await browser.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(e.message));
  await page.goto(`http://127.0.0.1:${d.wsPort}/`);
  await page.waitForSelector('#auth:not([hidden])', { timeout: 10000 });
  await page.waitForFunction(() => document.getElementById('conn').textContent === 'token needed', null, { timeout: 5000 });
  await sleep(1500); // no reconnect loop while it waits for the token
  assert.equal(await page.textContent('#conn'), 'token needed');
  assert.equal(d.proc.log().match(/dashboard subscription refused: closed/g).length, 1, 'one refusal, no retry loop');
  await page.fill('#auth-token', tok);
  await page.click('#auth-form button[type=submit]');
  await page.waitForSelector('#conn.pill-ok', { timeout: 10000 });
  await page.waitForSelector(`#rows tr[data-id="${A}"]`, { timeout: 10000 });
  assert.equal(await page.isHidden('#auth'), true);
  assert.deepEqual(problems, []);
});
