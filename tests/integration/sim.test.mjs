// sim.test.mjs - the upstream simulator (`statusrelay sim`) against real clients on loopback:
// websocket protocol (greeting, acks, only subscribed events, envelopes), the HTTP endpoints
// (/intents/status/v3, /requests/v3 with pagination, /chains, error bodies), agreement
// between what the websocket said and what HTTP says, seeded lifecycles, every fault mode,
// the per-key rate limit, signed upstream webhooks, counters, load mode and clean shutdown.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { BIN, HELPERS, until, startProcess } from './lib/proc.mjs';
import { startSim } from './lib/sim.mjs';

const EVM_HASH = /^0x[0-9a-f]{64}$/;
const B58 = /^[1-9A-HJ-NP-Za-km-z]{80,90}$/;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/** A websocket client that records every message. */
function wsClient(url) {
  const ws = new WebSocket(url);
  const msgs = [];
  let wake = null;
  const closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  ws.on('error', () => {});
  ws.on('message', (data, binary) => {
    const m = { raw: data.toString('utf8'), binary, at: Date.now() };
    try { m.json = JSON.parse(m.raw); } catch { m.json = undefined; }
    msgs.push(m);
    if (wake) wake();
  });
  const opened = new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('unexpected-response', (req, res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => reject(Object.assign(new Error(`upgrade refused ${res.statusCode}`), { status: res.statusCode, body })));
    });
    ws.once('error', reject);
  });
  const c = {
    ws, msgs, closed, opened,
    send: (o) => ws.send(JSON.stringify(o)),
    subscribe: (id) => c.send({ type: 'subscribe', event: 'request.status.updated', filters: { id } }),
    unsubscribe: (id) => c.send({ type: 'unsubscribe', event: 'request.status.updated', filters: { id } }),
    /** Resolve with the first message (from index `from`) that satisfies pred. */
    async waitFor(pred, { from = 0, timeoutMs = 5000 } = {}) {
      const end = Date.now() + timeoutMs;
      for (;;) {
        const m = msgs.slice(from).find((x) => pred(x));
        if (m) return m;
        const left = end - Date.now();
        if (left <= 0) throw new Error(`no matching message; got ${JSON.stringify(msgs.map((x) => x.raw).slice(-5))}`);
        await new Promise((resolve) => { wake = resolve; setTimeout(resolve, Math.min(left, 50)); });
      }
    },
    events: (id) => msgs.filter((m) => m.json?.event === 'request.status.updated' && (id === undefined || m.json.data?.requestId === id)),
    async ready() {
      await c.opened;
      return c.waitFor((m) => m.json?.type === 'connection');
    },
    close: () => { try { ws.terminate(); } catch {} },
  };
  return c;
}

const isAck = (id) => (m) => m.json?.type === 'subscribe' && m.json.status === 'success' && m.json.data?.filters?.id === id;
const isEvent = (id, status) => (m) => m.json?.event === 'request.status.updated' && m.json.data?.requestId === id && (!status || m.json.data.status === status);

async function getJson(url, headers = {}) {
  const res = await fetch(url, { headers });
  const text = await res.text();
  let body;
  try { body = JSON.parse(text); } catch { body = text; }
  return { status: res.status, headers: res.headers, body, text };
}

let nid = 0;
const newId = () => '0x' + crypto.createHash('sha256').update(`sim-test-${process.pid}-${nid++}`).digest('hex');

describe('statusrelay sim: command line', () => {
  test('--help documents endpoints, control API, faults and every setting', () => {
    const r = spawnSync(BIN, ['sim', '--help'], { encoding: 'utf8' });
    assert.equal(r.status, 0);
    for (const s of ['/intents/status/v3', '/requests/v3', '/chains', '/_sim/requests', '/_sim/faults',
      '/_sim/stats', '/_sim/load', 'dropWs', 'silent', 'delayMs', 'httpErrorRate', 'malformed',
      'duplicate', 'reorder', 'rateLimitPerMin', 'envelope', 'STATUSRELAY_SIM_LISTEN', 'STATUSRELAY_SIM_SEED',
      'STATUSRELAY_SIM_RATE', 'STATUSRELAY_SIM_API_KEY', 'STATUSRELAY_SIM_WEBHOOK_URL', 'STATUSRELAY_SIM_DURATION',
      '--listen', '--seed', '--rate', '--api-key', '--webhook-url', '--duration', 'X-Signature-SHA256',
      'reorg', 'double-spend', 'late-refund', 'never-deposited', 'DEPOSIT_REORGED', 'metadata', 'statusPolls',
      'requestsReads', 'subscribes']) {
      assert.ok(r.stdout.includes(s), `--help mentions ${s}`);
    }
  });

  test('a bad setting stops start-up with one line naming it (flag and env)', () => {
    let r = spawnSync(BIN, ['sim', '--rate', 'lots'], { encoding: 'utf8' });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /STATUSRELAY_SIM_RATE/);
    r = spawnSync(BIN, ['sim'], { encoding: 'utf8', env: { ...process.env, STATUSRELAY_SIM_MIX: 'success:1,teleport:2' } });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /STATUSRELAY_SIM_MIX.*teleport/);
    r = spawnSync(BIN, ['sim', '--bogus-flag'], { encoding: 'utf8' });
    assert.equal(r.status, 2);
  });
});

describe('statusrelay sim: websocket and HTTP', () => {
  let sim;
  before(async () => { sim = await startSim({ apiKey: 'test-key', seed: 11 }); });
  after(async () => {
    const r = await sim.stop();
    assert.equal(r.code, 0, 'clean exit on SIGTERM');
  });

  test('greeting first, acks, exactly the subscribed events, unsubscribe stops them', async () => {
    const c = wsClient(sim.wsUrlWithKey);
    const ready = await c.ready();
    assert.equal(c.msgs[0], ready, 'the ready greeting is the first message');
    assert.deepEqual(Object.keys(ready.json), ['type', 'status', 'data']);
    assert.equal(ready.json.status, 'ready');
    assert.match(ready.json.data.id, /^[0-9a-z]{11}$/);

    const a = newId(), b = newId();
    c.subscribe(a);
    const ack = await c.waitFor(isAck(a));
    assert.deepEqual(ack.json, { type: 'subscribe', status: 'success', data: { event: 'request.status.updated', filters: { id: a } } });

    await sim.control('/requests', { id: a, path: ['waiting', 'pending', 'submitted', 'success'] });
    await sim.control('/requests', { id: b, path: ['waiting', 'pending'] });
    await sim.control(`/requests/${b}/advance`, {});
    await sim.control(`/requests/${a}/advance`, {});
    await c.waitFor(isEvent(a, 'pending'));
    assert.equal(c.events(b).length, 0, 'no events of an unsubscribed id');
    assert.deepEqual(c.events(a).map((m) => m.json.data.status), ['waiting', 'pending']);
    const ev = c.events(a)[1].json;
    assert.deepEqual(Object.keys(ev), ['event', 'data', 'publishedAt']);
    assert.ok(ev.publishedAt >= ev.data.updatedAt && ev.publishedAt > 1.7e12, 'publishedAt in ms');

    c.unsubscribe(a);
    const uack = await c.waitFor((m) => m.json?.type === 'unsubscribe');
    assert.deepEqual(uack.json, { type: 'unsubscribe', status: 'success', data: { event: 'request.status.updated' } });
    await sim.control(`/requests/${a}/advance`, {});
    await sleep(200);
    assert.equal(c.events(a).length, 2, 'no events after unsubscribe');

    c.send({ type: 'subscribe', event: 'request.status.updated' });
    const err = await c.waitFor((m) => m.json?.status === 'error');
    assert.equal(err.json.type, 'subscribe');
    c.close();
  });

  test('the websocket needs ?apiKey= when the simulator has a key', async () => {
    for (const url of [sim.wsUrl, `${sim.wsUrl}?apiKey=wrong`]) {
      const c = wsClient(url);
      const e = await c.opened.then(() => null, (x) => x);
      assert.ok(e, `upgrade to ${url} refused`);
      assert.equal(e.status, 401);
      assert.equal(JSON.parse(e.body).errorCode, 'UNAUTHORIZED');
    }
    const s = await sim.stats();
    assert.ok(s.ws.rejected >= 2);
  });

  test('control-made requests without originChainId never get a Bitcoin origin; asked for, they do', async () => {
    // a Bitcoin-origin pending gets one /requests/v3 read in the relay (unconfirmedDeposit):
    // one event more, so tests' plain paths must not land there by chance (5% of the mix)
    const origins = new Set();
    for (let i = 0; i < 200; i++)
      origins.add((await sim.control('/requests', { path: ['waiting', 'pending'], stepMs: 0 })).originChainId);
    assert.ok(!origins.has(8253038), [...origins].join(','));
    assert.ok(origins.size >= 4, `still a mix: ${[...origins]}`);
    assert.equal((await sim.control('/requests', { path: ['waiting'], stepMs: 0, originChainId: 8253038 })).originChainId, 8253038);
  });

  test('what the websocket said matches /intents/status/v3 and /requests/v3 (failure -> pending -> refund)', async () => {
    const c = wsClient(sim.wsUrlWithKey);
    await c.ready();
    const id = newId();
    c.subscribe(id);
    await c.waitFor(isAck(id));
    await sim.control('/requests', { id, lifecycle: 'refund', originChainId: 8453, destinationChainId: 42161 });
    for (let i = 0; i < 4; i++) await sim.control(`/requests/${id}/advance`, {});
    await c.waitFor(isEvent(id, 'refund'));
    const seen = c.events(id).map((m) => m.json.data);
    assert.deepEqual(seen.map((d) => d.status), ['waiting', 'pending', 'failure', 'pending', 'refund']);
    assert.notEqual(seen[2].failReason, 'N/A', 'failure carries a reason');
    assert.equal(seen[3].failReason, 'N/A', 'pending again: N/A');
    assert.equal(seen[4].failReason, seen[2].failReason, 'refund keeps the failure reason');
    assert.equal(seen[4].refundFailReason, 'N/A');
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i].updatedAt > seen[i - 1].updatedAt, 'updatedAt increases');
    const last = seen[4];
    assert.ok(last.inTxHashes.length === 1 && EVM_HASH.test(last.inTxHashes[0]));
    assert.ok(last.txHashes.length === 1 && EVM_HASH.test(last.txHashes[0]), 'refund tx');

    const st = await getJson(`${sim.url}/intents/status/v3?requestId=${id}`);
    assert.equal(st.status, 200);
    assert.deepEqual(Object.keys(st.body), ['status', 'inTxHashes', 'txHashes', 'updatedAt', 'originChainId',
      'destinationChainId', 'quoteCreatedAt', 'failReason', 'refundFailReason']);
    for (const k of ['status', 'inTxHashes', 'txHashes', 'updatedAt', 'originChainId', 'destinationChainId', 'failReason', 'refundFailReason']) {
      assert.deepEqual(st.body[k], last[k], `status v3 ${k}`);
    }
    assert.ok(st.body.quoteCreatedAt < st.body.updatedAt);

    const rq = await getJson(`${sim.url}/requests/v3?id=${id}`, { 'x-api-key': 'test-key' });
    assert.equal(rq.status, 200);
    assert.equal(rq.body.requests.length, 1);
    assert.equal(rq.body.continuation, undefined, 'no continuation on the last page');
    const item = rq.body.requests[0];
    assert.equal(item.id, id);
    assert.equal(item.status, 'refund');
    assert.match(item.createdAt, ISO);
    assert.match(item.updatedAt, ISO);
    assert.equal(Date.parse(item.updatedAt), last.updatedAt);
    assert.equal(item.data.failReason, last.failReason);
    assert.equal(item.data.refundFailReason, null, 'N/A is null in /requests/v3');
    assert.deepEqual(item.data.inTxs.map((t) => t.txHash), last.inTxHashes);
    assert.deepEqual(item.data.outTxs.map((t) => t.txHash), last.txHashes);
    for (const t of [...item.data.inTxs, ...item.data.outTxs]) {
      assert.ok(Number.isInteger(t.timestamp) && t.timestamp < 1e11, 'tx timestamp in seconds');
      assert.equal(typeof t.chainId, 'number');
    }
    assert.equal(item.data.inTxs[0].chainId, 8453);
    assert.equal(item.data.route.quoted.origin.inputCurrency.currency.chainId, 8453);
    assert.equal(item.data.route.quoted.destination.outputCurrency.currency.chainId, 42161);
    c.close();
  });

  test('status v3 errors use the upstream {message, errorCode} shape', async () => {
    let r = await getJson(`${sim.url}/intents/status/v3`);
    assert.equal(r.status, 400);
    assert.deepEqual(Object.keys(r.body), ['message', 'errorCode']);
    r = await getJson(`${sim.url}/intents/status/v3?requestId=0xnope`);
    assert.equal(r.status, 404);
    assert.equal(r.body.errorCode, 'REQUEST_NOT_FOUND');
    r = await getJson(`${sim.url}/intents/status/v3?requestId=0xnope`, { 'x-api-key': 'bad' });
    assert.equal(r.status, 401);
    assert.equal(r.body.errorCode, 'UNAUTHORIZED');
  });

  test('/requests/v3: key required, limit <= 50, opaque continuation, sortBy=updatedAt + startTimestamp (s)', async () => {
    let r = await getJson(`${sim.url}/requests/v3`);
    assert.equal(r.status, 401);
    r = await getJson(`${sim.url}/requests/v3`, { 'x-api-key': 'nope' });
    assert.equal(r.status, 401);
    r = await getJson(`${sim.url}/requests/v3?limit=51`, { 'x-api-key': 'test-key' });
    assert.equal(r.status, 400);
    assert.equal(typeof r.body.errorCode, 'string');
    r = await getJson(`${sim.url}/requests/v3?continuation=garbage!`, { 'x-api-key': 'test-key' });
    assert.equal(r.status, 400);

    const user = '0x' + crypto.randomBytes(20).toString('hex');
    const ids = [];
    for (let i = 0; i < 23; i++) {
      const id = newId();
      ids.push(id);
      await sim.control('/requests', { id, user, path: ['waiting', 'pending'] });
    }
    // Walk all pages of 5, newest first (default sort createdAt desc).
    const got = [];
    let cont;
    let pages = 0;
    do {
      const q = new URLSearchParams({ user, limit: '5' });
      if (cont) q.set('continuation', cont);
      r = await getJson(`${sim.url}/requests/v3?${q}`, { 'x-api-key': 'test-key' });
      assert.equal(r.status, 200);
      assert.ok(r.body.requests.length <= 5);
      got.push(...r.body.requests.map((x) => x.id));
      cont = r.body.continuation;
      if (cont) assert.match(cont, /^[A-Za-z0-9_-]+$/, 'opaque cursor');
      pages++;
    } while (cont);
    assert.equal(pages, 5);
    assert.deepEqual(got, [...ids].reverse(), 'every request exactly once, newest first');

    // Touch three of them, then backfill by updatedAt from just before.
    await sleep(1100);
    const sinceS = Math.floor(Date.now() / 1000);
    for (const id of [ids[3], ids[10], ids[20]]) await sim.control(`/requests/${id}/advance`, {});
    r = await getJson(`${sim.url}/requests/v3?user=${user}&sortBy=updatedAt&sortDirection=asc&startTimestamp=${sinceS}&limit=50`,
      { 'x-api-key': 'test-key' });
    assert.equal(r.status, 200);
    assert.deepEqual(r.body.requests.map((x) => x.id), [ids[3], ids[10], ids[20]]);
    assert.deepEqual(r.body.requests.map((x) => x.status), ['pending', 'pending', 'pending']);
    const ups = r.body.requests.map((x) => Date.parse(x.updatedAt));
    assert.ok(ups[0] <= ups[1] && ups[1] <= ups[2], 'ascending updatedAt');
    r = await getJson(`${sim.url}/requests/v3?user=${user}&sortBy=updatedAt&startTimestamp=${sinceS + 3600}`, { 'x-api-key': 'test-key' });
    assert.deepEqual(r.body.requests, []);
  });

  test('GET /chains lists the chains the daemon needs', async () => {
    const r = await getJson(`${sim.url}/chains`);
    assert.equal(r.status, 200);
    const ids = r.body.chains.map((c) => c.id);
    for (const id of [1, 8453, 42161, 792703809, 1337]) assert.ok(ids.includes(id), `chain ${id}`);
    const sol = r.body.chains.find((c) => c.id === 792703809);
    assert.equal(sol.vmType, 'svm');
  });

  test('deposit-address requests get depositTxHash once the deposit is seen; Solana hashes are base58', async () => {
    const c = wsClient(sim.wsUrlWithKey);
    await c.ready();
    const id = newId();
    c.subscribe(id);
    await c.waitFor(isAck(id));
    await sim.control('/requests', { id, lifecycle: 'deposit-address', originChainId: 42161, destinationChainId: 8453 });
    await sim.control(`/requests/${id}/advance`, {});
    await c.waitFor(isEvent(id, 'pending'));
    const [w, p] = c.events(id).map((m) => m.json.data);
    assert.equal(w.depositAddress.depositTxHash, null);
    assert.equal(w.depositAddress.depositor, null);
    assert.ok(['open', 'strict'].includes(w.depositAddress.depositAddressType));
    assert.match(p.depositAddress.depositTxHash, EVM_HASH);
    assert.notEqual(p.depositAddress.depositTxHash, p.inTxHashes[0], 'the sweep differs from the deposit');
    const rq = await getJson(`${sim.url}/requests/v3?id=${id}`, { 'x-api-key': 'test-key' });
    const d = rq.body.requests[0].depositAddress;
    assert.deepEqual(Object.keys(d), ['address', 'type', 'depositor', 'depositTxHash', 'recoveryAddress']);
    assert.equal(d.depositTxHash, p.depositAddress.depositTxHash);

    const sid = newId();
    c.subscribe(sid);
    await c.waitFor(isAck(sid));
    await sim.control('/requests', { id: sid, lifecycle: 'solana' });
    await sim.control(`/requests/${sid}/advance`, {});
    await sim.control(`/requests/${sid}/advance`, {});
    const ev = (await c.waitFor(isEvent(sid, 'submitted'))).json.data;
    assert.equal(ev.originChainId, 792703809);
    assert.match(ev.inTxHashes[0], B58);
    c.close();
  });

  test('scripted paths: explicit reasons, unknown statuses, set status, 404/409', async () => {
    const id = newId();
    const created = await sim.control('/requests', {
      id, path: ['waiting', { status: 'failure', failReason: 'SLIPPAGE', refundFailReason: 'AMOUNT_TOO_LOW_TO_REFUND', details: 'Fill simulation reverted' }],
    });
    assert.equal(created.status, 'waiting');
    const v = await sim.control(`/requests/${id}/advance`, {});
    assert.deepEqual(v.statusV3.failReason, 'SLIPPAGE');
    assert.equal(v.statusV3.refundFailReason, 'AMOUNT_TOO_LOW_TO_REFUND');
    assert.equal(v.statusV3.details, 'Fill simulation reverted');
    await assert.rejects(sim.control(`/requests/${id}/advance`, {}), (e) => e.status === 409);
    const s = await sim.control(`/requests/${id}/status`, { status: 'MANUAL_REFUND_REQUIRED', txHashes: ['0xabc'] });
    assert.equal(s.statusV3.status, 'MANUAL_REFUND_REQUIRED');
    assert.deepEqual(s.statusV3.txHashes, ['0xabc']);
    assert.deepEqual(s.history.map((h) => h.status), ['waiting', 'failure', 'MANUAL_REFUND_REQUIRED']);
    await assert.rejects(sim.control('/requests/0xmissing/advance', {}), (e) => e.status === 404);
    await assert.rejects(sim.control('/requests', { id }), (e) => e.status === 409);
    await assert.rejects(sim.control('/requests', { lifecycle: 'teleport' }), (e) => e.status === 400);
  });

  test('stats count connections, frames and every upstream call by path and status', async () => {
    const before = await sim.stats();
    await getJson(`${sim.url}/intents/status/v3?requestId=0xnope`);
    await getJson(`${sim.url}/chains`);
    await getJson(`${sim.url}/requests/v3`);
    const s = await sim.stats();
    const n = (st, p, code) => st.http.byPath[p]?.[code] ?? 0;
    assert.equal(n(s, '/intents/status/v3', '404') - n(before, '/intents/status/v3', '404'), 1);
    assert.equal(n(s, '/chains', '200') - n(before, '/chains', '200'), 1);
    assert.equal(n(s, '/requests/v3', '401') - n(before, '/requests/v3', '401'), 1);
    assert.equal(s.http.total - before.http.total, 3, 'control calls are not upstream calls');
    assert.ok(s.ws.connectionsTotal >= 3 && s.ws.eventFrames > 0 && s.ws.acks > 0 && s.ws.framesSent > s.ws.eventFrames);
    const reset = await sim.control('/stats', null, 'DELETE');
    assert.equal(reset.http.total, 0);
  });

  test('bulk create: count + spanMs/agoMs spread finished requests over the past; timeline counts calls', async () => {
    const t0 = Date.now();
    const r = await sim.control('/requests', { count: 50, lifecycle: 'success', spanMs: 3600000, agoMs: 600000 });
    assert.equal(r.created, 50);
    assert.equal(r.lastSeq - r.firstSeq, 49);
    const list = await sim.control(`/requests?after=${r.firstSeq - 1}&limit=50`);
    assert.equal(list.requests.length, 50);
    const first = await sim.control(`/requests/${list.requests[0].id}`);
    const last = await sim.control(`/requests/${list.requests[49].id}`);
    assert.equal(first.status, 'success', 'the whole path at once');
    assert.equal(last.status, 'success');
    // the n-th of 50 is (span x (50 - n) / 50 + ago) old: the first ~70 min, the last 10 min
    assert.ok(Math.abs(t0 - first.updatedAt - (3600000 * 49 / 50 + 600000)) < 5000, `first ${t0 - first.updatedAt}`);
    assert.ok(Math.abs(t0 - last.updatedAt - 600000) < 5000, `last ${t0 - last.updatedAt}`);
    assert.ok(first.createdAt <= first.history[0].updatedAt && first.history.every((h) => h.updatedAt < t0 - 600000));
    await assert.rejects(sim.control('/requests', { count: 2, id: '0x' + '1'.repeat(64) }), /count/);
    await assert.rejects(sim.control('/requests', { spanMs: 1000 }), /spanMs/);
    await sim.control('/stats/reset', {});
    for (let i = 0; i < 3; i++) await getJson(`${sim.url}/chains`);
    const tl = await sim.control('/timeline');
    assert.equal(tl.bucketMs, 100);
    assert.equal(tl.counts.reduce((a, b) => a + b, 0), 3);
    assert.ok(Math.abs(tl.startMs - Date.now()) < 5000);
  });
});

describe('statusrelay sim: reversals, late refunds, stuck requests and per-request counters', () => {
  const KEY = { 'x-api-key': 'test-key' };
  const REASONED = ['failure', 'fallback', 'refund'];
  let sim;
  before(async () => { sim = await startSim({ apiKey: 'test-key', seed: 23, rateLimit: 0 }); });
  after(async () => {
    const r = await sim.stop();
    assert.equal(r.code, 0, 'clean exit on SIGTERM');
  });

  /** The request's newest websocket event agrees with /intents/status/v3 and /requests/v3;
   *  failReason is N/A unless failure/fallback/refund. Resolves the /requests/v3 item. */
  async function agree(id, ev) {
    const st = await getJson(`${sim.url}/intents/status/v3?requestId=${id}`);
    assert.equal(st.status, 200);
    for (const k of ['status', 'inTxHashes', 'txHashes', 'updatedAt', 'originChainId', 'destinationChainId', 'failReason', 'refundFailReason']) {
      assert.deepEqual(st.body[k], ev[k], `${ev.status}: status v3 ${k}`);
    }
    const rq = await getJson(`${sim.url}/requests/v3?id=${id}`, KEY);
    assert.equal(rq.status, 200);
    assert.equal(rq.body.requests.length, 1, 'id= names exactly one request');
    const item = rq.body.requests[0];
    assert.equal(item.id, id);
    assert.equal(item.status, ev.status);
    assert.equal(Date.parse(item.updatedAt), ev.updatedAt);
    assert.equal(item.data.failReason, ev.failReason === 'N/A' ? null : ev.failReason);
    assert.deepEqual(item.data.inTxs.map((t) => t.txHash), ev.inTxHashes);
    assert.deepEqual(item.data.outTxs.map((t) => t.txHash), ev.txHashes);
    for (const t of [...item.data.inTxs, ...item.data.outTxs]) assert.ok(['success', 'failure'].includes(t.status));
    if (REASONED.includes(ev.status)) assert.notEqual(ev.failReason, 'N/A', `${ev.status} carries a reason`);
    else assert.equal(ev.failReason, 'N/A', `${ev.status}: failReason N/A`);
    return item;
  }

  /** Create id with body, subscribed on c, advancing by hand; checks agreement after every
   *  step and resolves {events, items}. */
  async function walk(c, id, body) {
    c.subscribe(id);
    await c.waitFor(isAck(id));
    const created = await sim.control('/requests', { id, ...body });
    const events = [];
    const items = [];
    for (let i = 0; i < created.path.length; i++) {
      if (i > 0) await sim.control(`/requests/${id}/advance`, {});
      await until(() => c.events(id).length === i + 1, { msg: `event ${i} of ${id}` });
      const ev = c.events(id)[i].json.data;
      events.push(ev);
      items.push(await agree(id, ev));
    }
    await assert.rejects(sim.control(`/requests/${id}/advance`, {}), (e) => e.status === 409);
    for (let i = 1; i < events.length; i++) assert.ok(events[i].updatedAt > events[i - 1].updatedAt, 'updatedAt strictly increases');
    return { events, items, view: await sim.control(`/requests/${id}`) };
  }

  test('reorg: waiting > pending > submitted > success > failure DEPOSIT_REORGED, deposit inTx failed, metadata.reorg', async () => {
    const c = wsClient(sim.wsUrlWithKey);
    await c.ready();
    const id = newId();
    const { events, items, view } = await walk(c, id, { lifecycle: 'reorg', originChainId: 8453, destinationChainId: 42161 });
    assert.deepEqual(events.map((e) => e.status), ['waiting', 'pending', 'submitted', 'success', 'failure']);
    assert.equal(view.lifecycle, 'reorg');
    assert.equal(view.terminal, true);
    assert.deepEqual(view.path.map((p) => p.reorg ?? false), [false, false, false, false, true]);
    for (const it of items.slice(0, 4)) {
      assert.equal(it.metadata, undefined, 'no metadata before the reorg');
      for (const t of it.data.inTxs) assert.equal(t.status, 'success');
    }
    const last = events[4];
    assert.equal(last.failReason, 'DEPOSIT_REORGED');
    assert.equal(items[3].data.outTxs.length, 1, 'filled before the reorg');
    const it = items[4];
    assert.equal(it.data.inTxs[0].status, 'failure');
    assert.ok(it.data.outTxs.every((t) => t.status === 'success'));
    assert.equal(it.metadata.reorg.failReason, 'DEPOSIT_REORGED');
    assert.equal(it.metadata.reorg.blockNumber, it.data.inTxs[0].block);
    assert.equal(it.metadata.reorg.detectedAt, last.updatedAt);
    c.close();
  });

  test('double-spend: success > refund DOUBLE_SPEND with a refund tx next to the fill', async () => {
    const c = wsClient(sim.wsUrlWithKey);
    await c.ready();
    const id = newId();
    const { events, items } = await walk(c, id, { lifecycle: 'double-spend', originChainId: 42161, destinationChainId: 8453 });
    assert.deepEqual(events.map((e) => e.status), ['waiting', 'pending', 'submitted', 'success', 'refund']);
    const [success, refund] = events.slice(3);
    assert.equal(success.failReason, 'N/A');
    assert.equal(refund.failReason, 'DOUBLE_SPEND');
    assert.equal(refund.refundFailReason, 'N/A');
    assert.equal(success.txHashes.length, 1);
    assert.deepEqual(refund.txHashes.slice(0, 1), success.txHashes, 'the fill stays');
    assert.equal(refund.txHashes.length, 2, 'a refund tx joins it');
    assert.equal(items[4].data.outTxs[1].chainId, 42161, 'the refund goes back on the origin chain');
    assert.equal(items[4].metadata, undefined);
    c.close();
  });

  test('late-refund: failure SOLVER_CAPACITY_EXCEEDED, refund after 10x the step delay', async () => {
    const c = wsClient(sim.wsUrlWithKey);
    await c.ready();
    const id = newId();
    const { events } = await walk(c, id, { lifecycle: 'late-refund' });
    assert.deepEqual(events.map((e) => e.status), ['waiting', 'pending', 'failure', 'refund']);
    assert.equal(events[2].failReason, 'SOLVER_CAPACITY_EXCEEDED');
    assert.equal(events[3].failReason, 'SOLVER_CAPACITY_EXCEEDED', 'the refund keeps the reason');
    // Timed: steps of 100 ms (pending 100%, failure 150%, each +-50%), the refund 10x that.
    const tid = newId();
    c.subscribe(tid);
    await c.waitFor(isAck(tid));
    const v = await sim.control('/requests', { id: tid, lifecycle: 'late-refund', stepMs: 100 });
    const d = v.path.map((p) => p.delayMs);
    assert.ok(d[3] >= 500 && d[3] <= 1500, `refund delay ${d[3]}`);
    for (const x of d.slice(1, 3)) assert.ok(x <= 225 && d[3] > 2 * x, `refund ${d[3]} much later than ${x}`);
    const failure = (await c.waitFor(isEvent(tid, 'failure'))).json.data;
    const refund = (await c.waitFor(isEvent(tid, 'refund'), { timeoutMs: 5000 })).json.data;
    assert.ok(refund.updatedAt - failure.updatedAt >= 450, `refund ${refund.updatedAt - failure.updatedAt} ms after the failure`);
    c.close();
  });

  test('never-deposited: waiting, and nothing ever again', async () => {
    const c = wsClient(sim.wsUrlWithKey);
    await c.ready();
    const id = newId();
    c.subscribe(id);
    await c.waitFor(isAck(id));
    const v = await sim.control('/requests', { id, lifecycle: 'never-deposited', stepMs: 10 });
    assert.deepEqual(v.path.map((p) => p.status), ['waiting']);
    assert.equal(v.terminal, true, 'its path has ended');
    await sleep(300);
    assert.deepEqual(c.events(id).map((m) => m.json.data.status), ['waiting']);
    const ev = c.events(id)[0].json.data;
    assert.deepEqual([ev.inTxHashes, ev.txHashes], [[], []]);
    const item = await agree(id, ev);
    assert.deepEqual(item.data.inTxs, []);
    await assert.rejects(sim.control(`/requests/${id}/advance`, {}), (e) => e.status === 409);
    c.close();
  });

  test('--mix takes the new lifecycles and the generator plays them through', async () => {
    const g = await startSim({ seed: 5, rate: 80, step: '10ms', duration: '500ms',
      extraArgs: ['--mix', 'reorg:1,double-spend:1,late-refund:1,never-deposited:1'] });
    try {
      await until(async () => { const s = await g.stats(); return !s.load.running && s.requests.active === 0; }, { msg: 'all done', timeoutMs: 15000 });
      const list = (await g.control('/requests?limit=1000')).requests;
      const paths = {};
      for (const r of list) {
        if (paths[r.lifecycle]) continue;
        paths[r.lifecycle] = (await g.control(`/requests/${r.id}`)).history.map((h) => h.status).join('>');
      }
      assert.deepEqual(paths, {
        'reorg': 'waiting>pending>submitted>success>failure',
        'double-spend': 'waiting>pending>submitted>success>refund',
        'late-refund': 'waiting>pending>failure>refund',
        'never-deposited': 'waiting',
      });
    } finally {
      await g.stop();
    }
  });

  test('scripted reorg after success: the /requests/v3 item shape; "reorg" on an explicit change', async () => {
    const c = wsClient(sim.wsUrlWithKey);
    await c.ready();
    const id = newId();
    const { events, items } = await walk(c, id, {
      originChainId: 1, destinationChainId: 8453,
      path: ['waiting', 'pending', 'success', { status: 'failure', failReason: 'DEPOSIT_REORGED', reorg: true }],
    });
    assert.deepEqual(events.map((e) => e.status), ['waiting', 'pending', 'success', 'failure']);
    assert.equal(items[2].metadata, undefined);
    assert.equal(items[2].data.inTxs[0].status, 'success');
    const it = items[3];
    assert.equal(it.status, 'failure');
    assert.equal(it.data.failReason, 'DEPOSIT_REORGED');
    assert.equal(it.data.inTxs.length, 1);
    assert.equal(it.data.inTxs[0].status, 'failure');
    assert.equal(it.data.outTxs[0].status, 'success');
    assert.deepEqual(Object.keys(it.metadata), ['reorg']);
    const g = it.metadata.reorg;
    assert.deepEqual(Object.keys(g), ['detectedAt', 'source', 'reason', 'details', 'failReason', 'action', 'blockNumber', 'blockHash', 'receiptStatus']);
    assert.deepEqual({ ...g, detectedAt: 0, blockNumber: 0, blockHash: '' }, {
      detectedAt: 0, source: 'indexer', reason: 'block reorganisation', details: null, failReason: 'DEPOSIT_REORGED',
      action: 'refund', blockNumber: 0, blockHash: '', receiptStatus: 0,
    });
    assert.equal(g.detectedAt, events[3].updatedAt);
    assert.equal(g.blockNumber, it.data.inTxs[0].block);
    assert.match(g.blockHash, /^0x[0-9a-f]{64}$/);
    assert.equal((await sim.control(`/requests/${id}`)).reorged, true);

    // The same through POST /_sim/requests/{id}/status, reason defaulted.
    const sid = newId();
    c.subscribe(sid);
    await c.waitFor(isAck(sid));
    await sim.control('/requests', { id: sid, path: ['waiting', 'pending', 'submitted', 'success'] });
    for (let i = 0; i < 3; i++) await sim.control(`/requests/${sid}/advance`, {});
    const before = (await getJson(`${sim.url}/requests/v3?id=${sid}`, KEY)).body.requests[0];
    assert.equal(before.metadata, undefined);
    const v = await sim.control(`/requests/${sid}/status`, { status: 'failure', reorg: true });
    assert.equal(v.statusV3.failReason, 'DEPOSIT_REORGED');
    const ev = (await c.waitFor(isEvent(sid, 'failure'))).json.data;
    const after = await agree(sid, ev);
    assert.equal(after.data.inTxs[0].status, 'failure');
    assert.equal(after.metadata.reorg.failReason, 'DEPOSIT_REORGED');
    assert.equal(after.metadata.reorg.detectedAt, ev.updatedAt);
    await assert.rejects(sim.control(`/requests/${sid}/status`, { status: 'failure', reorg: 'yes' }), (e) => e.status === 400);
    c.close();
  });

  test('scripted success > refund DOUBLE_SPEND: the path goes on after success, updatedAt strictly increases', async () => {
    const c = wsClient(sim.wsUrlWithKey);
    await c.ready();
    const path = ['waiting', 'pending', 'submitted', 'success', { status: 'refund', failReason: 'DOUBLE_SPEND' }];
    const id = newId();
    const { events, items } = await walk(c, id, { path });
    assert.deepEqual(events.map((e) => e.status), ['waiting', 'pending', 'submitted', 'success', 'refund']);
    assert.deepEqual(events.map((e) => e.failReason), ['N/A', 'N/A', 'N/A', 'N/A', 'DOUBLE_SPEND']);
    assert.equal(events[4].txHashes.length, 2);
    assert.equal(items[4].data.failReason, 'DOUBLE_SPEND');
    assert.equal(items[4].data.outTxs.length, 2);

    // Timed by stepMs (timers keep running past success), and the steps come 1 ms apart:
    // every change still gets a newer updatedAt.
    const tid = newId();
    c.subscribe(tid);
    await c.waitFor(isAck(tid));
    const fast = path.map((p) => (typeof p === 'string' ? { status: p, delayMs: 0 } : { ...p, delayMs: 0 }));
    await sim.control('/requests', { id: tid, path: fast });
    await c.waitFor(isEvent(tid, 'refund'));
    const seen = c.events(tid).map((m) => m.json.data);
    assert.deepEqual(seen.map((e) => e.status), ['waiting', 'pending', 'submitted', 'success', 'refund']);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i].updatedAt > seen[i - 1].updatedAt, `updatedAt ${seen.map((e) => e.updatedAt)}`);
    const view = await sim.control(`/requests/${tid}`);
    assert.deepEqual(view.history.map((h) => h.updatedAt), seen.map((e) => e.updatedAt));
    assert.equal(view.terminal, true);
    c.close();
  });

  test('per-request counters: statusPolls, requestsReads, subscribes (also before creation); stats reset zeroes them', async () => {
    const id = newId();
    const c1 = wsClient(sim.wsUrlWithKey);
    const c2 = wsClient(sim.wsUrlWithKey);
    await c1.ready();
    await c2.ready();
    // Before the request exists: a 404 poll and a subscribe.
    assert.equal((await getJson(`${sim.url}/intents/status/v3?requestId=${id}`)).status, 404);
    c1.subscribe(id);
    await c1.waitFor(isAck(id));
    await sim.control('/requests', { id, path: ['waiting', 'pending'] });
    let v = await sim.control(`/requests/${id}`);
    assert.deepEqual([v.statusPolls, v.requestsReads, v.subscribes], [1, 0, 1]);
    for (let i = 0; i < 2; i++) await getJson(`${sim.url}/intents/status/v3?requestId=${id}`);
    await getJson(`${sim.url}/intents/status/v3?requestId=${newId()}`); // another id
    for (let i = 0; i < 2; i++) await getJson(`${sim.url}/requests/v3?id=${id}`, KEY);
    assert.equal((await getJson(`${sim.url}/requests/v3?id=${id}`)).status, 401, 'no key');
    await getJson(`${sim.url}/requests/v3?limit=5`, KEY); // does not name it
    c2.subscribe(id);
    await c2.waitFor(isAck(id));
    c1.subscribe(id); // again on the same connection: still a subscribe message
    await c1.waitFor(isAck(id), { from: 2 });
    v = await sim.control(`/requests/${id}`);
    assert.deepEqual([v.statusPolls, v.requestsReads, v.subscribes], [3, 3, 3]);
    assert.ok(v.history && v.statusV3 && v.id === id, 'the existing fields stay');
    await sim.control('/stats/reset', {});
    v = await sim.control(`/requests/${id}`);
    assert.deepEqual([v.statusPolls, v.requestsReads, v.subscribes], [0, 0, 0]);
    await getJson(`${sim.url}/intents/status/v3?requestId=${id}`);
    v = await sim.control(`/requests/${id}`);
    assert.equal(v.statusPolls, 1);
    c1.close();
    c2.close();
  });
});

describe('statusrelay sim: faults', () => {
  let sim;
  before(async () => { sim = await startSim({ seed: 5 }); });
  after(async () => { assert.equal((await sim.stop()).code, 0); });

  async function subscribed(path = ['waiting', 'pending', 'submitted', 'success']) {
    const c = wsClient(sim.wsUrl);
    await c.ready();
    const id = newId();
    c.subscribe(id);
    await c.waitFor(isAck(id));
    await sim.control('/requests', { id, path });
    await c.waitFor(isEvent(id, path[0]));
    return { c, id };
  }

  test('dropWs abrupt: no close frame (1006); dropWs 1012: close code 1012', async () => {
    const a = wsClient(sim.wsUrl);
    const b = wsClient(sim.wsUrl);
    await a.ready();
    await b.ready();
    let f = await sim.control('/faults', { dropWs: 'abrupt' });
    assert.equal(f.dropped, 2);
    assert.equal((await a.closed).code, 1006);
    assert.equal((await b.closed).code, 1006);
    const c = wsClient(sim.wsUrl);
    await c.ready();
    f = await sim.control('/faults', { dropWs: '1012' });
    assert.equal(f.dropped, 1);
    assert.equal((await c.closed).code, 1012);
    const s = await sim.stats();
    assert.ok(s.ws.droppedAbrupt >= 2 && s.ws.droppedClose >= 1);
    assert.equal(s.ws.connections, 0);
  });

  test('wsRefuse: upgrades get 503 until cleared', async () => {
    await sim.control('/faults', { wsRefuse: true });
    const c = wsClient(sim.wsUrl);
    const e = await c.opened.then(() => null, (x) => x);
    assert.equal(e?.status, 503);
    await sim.control('/faults', { wsRefuse: false });
    const d = wsClient(sim.wsUrl);
    await d.ready();
    d.close();
  });

  test('silent: no events while HTTP answers with the new status; acks still flow', async () => {
    const { c, id } = await subscribed();
    await sim.control('/faults', { silent: true });
    await sim.control(`/requests/${id}/advance`, {});
    const id2 = newId();
    c.subscribe(id2);
    await c.waitFor(isAck(id2));
    await sleep(200);
    assert.equal(c.events(id).length, 1, 'no event while silent');
    const st = await getJson(`${sim.url}/intents/status/v3?requestId=${id}`);
    assert.equal(st.body.status, 'pending');
    assert.ok((await sim.stats()).ws.suppressed >= 1);
    await sim.control('/faults', { silent: false });
    await sim.control(`/requests/${id}/advance`, {});
    await c.waitFor(isEvent(id, 'submitted'));
    c.close();
  });

  test('delayMs: events leave late, publishedAt shows the lag', async () => {
    const { c, id } = await subscribed();
    await sim.control('/faults', { delayMs: 400 });
    const t0 = Date.now();
    await sim.control(`/requests/${id}/advance`, {});
    const m = await c.waitFor(isEvent(id, 'pending'));
    await sim.control('/faults', { delayMs: 0 });
    assert.ok(m.at - t0 >= 350, `arrived after ${m.at - t0} ms`);
    assert.ok(m.json.publishedAt - m.json.data.updatedAt >= 390);
    c.close();
  });

  test('duplicate: every event twice', async () => {
    const { c, id } = await subscribed();
    await sim.control('/faults', { duplicate: true });
    await sim.control(`/requests/${id}/advance`, {});
    await sim.control(`/requests/${id}/advance`, {});
    await until(() => c.events(id).length >= 5, { msg: 'duplicates' });
    await sim.control('/faults', { duplicate: false });
    assert.deepEqual(c.events(id).map((m) => m.json.data.status), ['waiting', 'pending', 'pending', 'submitted', 'submitted']);
    assert.equal(c.events(id)[1].raw, c.events(id)[2].raw, 'byte-identical duplicate');
    c.close();
  });

  test('reorder: the newer event arrives before the older one', async () => {
    const { c, id } = await subscribed();
    await sim.control('/faults', { reorder: true });
    await sim.control(`/requests/${id}/advance`, {});
    await sim.control(`/requests/${id}/advance`, {});
    await until(() => c.events(id).length >= 3, { msg: 'reordered events' });
    const got = c.events(id).map((m) => m.json.data);
    assert.deepEqual(got.map((d) => d.status), ['waiting', 'submitted', 'pending']);
    assert.ok(got[1].updatedAt > got[2].updatedAt, 'older updatedAt arrives last');
    // A held event without a successor is released within about a second.
    await sim.control(`/requests/${id}/advance`, {});
    await c.waitFor(isEvent(id, 'success'), { timeoutMs: 3000 });
    await sim.control('/faults', { reorder: false });
    c.close();
  });

  test('malformed: N frames that are not valid events, then normal service', async () => {
    const { c, id } = await subscribed();
    const from = c.msgs.length;
    const f = await sim.control('/faults', { malformed: 10 });
    assert.equal(f.malformedTo, 1);
    await until(() => c.msgs.length >= from + 10, { msg: 'malformed frames' });
    const bad = c.msgs.slice(from, from + 10);
    assert.ok(bad.some((m) => m.json === undefined), 'some are not JSON');
    assert.ok(bad.some((m) => m.binary), 'one is a binary frame');
    await sim.control(`/requests/${id}/advance`, {});
    await c.waitFor(isEvent(id, 'pending'));
    assert.ok((await sim.stats()).ws.malformed >= 10);
    c.close();
  });

  test('envelope B and minimal events', async () => {
    const { c, id } = await subscribed();
    await sim.control('/faults', { envelope: 'B' });
    await sim.control(`/requests/${id}/advance`, {});
    const m = await c.waitFor((x) => x.json?.data?.event === 'request.status.updated' && x.json.data.data?.requestId === id);
    assert.deepEqual(Object.keys(m.json), ['data']);
    assert.deepEqual(Object.keys(m.json.data), ['event', 'data']);
    assert.equal(m.json.data.data.status, 'pending');
    await sim.control('/faults', { envelope: 'A', wsMinimal: true });
    await sim.control(`/requests/${id}/advance`, {});
    const n = await c.waitFor(isEvent(id, 'submitted'));
    assert.deepEqual(Object.keys(n.json.data), ['status', 'inTxHashes', 'txHashes', 'updatedAt', 'originChainId', 'destinationChainId', 'requestId']);
    await sim.control('/faults', { wsMinimal: false });
    c.close();
  });

  test('HTTP errors: rate, count, status and path filter with the upstream bodies', async () => {
    const id = newId();
    await sim.control('/requests', { id, path: ['waiting'] });
    const url = `${sim.url}/intents/status/v3?requestId=${id}`;
    const expect = { 429: 'RATE_LIMITED', 500: 'PRICE_FETCH_FAILED', 503: 'SERVICE_UNAVAILABLE', 504: 'GATEWAY_TIMEOUT' };
    for (const [code, ecode] of Object.entries(expect)) {
      await sim.control('/faults', { httpErrorRate: 1, httpErrorStatus: Number(code) });
      const r = await getJson(url);
      assert.equal(r.status, Number(code));
      assert.equal(r.body.errorCode, ecode);
      assert.equal(typeof r.body.message, 'string');
    }
    await sim.control('/faults', { httpErrorStatus: 502 });
    let r = await getJson(url);
    assert.equal(r.status, 502);
    assert.match(r.headers.get('content-type'), /text\/html/);
    assert.match(r.text, /Bad Gateway/);

    await sim.control('/faults', { httpErrorRate: 0.5, httpErrorStatus: 503 });
    let fails = 0;
    for (let i = 0; i < 60; i++) if ((await getJson(url)).status === 503) fails++;
    assert.ok(fails > 10 && fails < 50, `about half fail (${fails}/60)`);

    await sim.control('/faults', { httpErrorRate: 0, httpErrorCount: 2, httpErrorStatus: 500 });
    assert.equal((await getJson(url)).status, 500);
    assert.equal((await getJson(url)).status, 500);
    assert.equal((await getJson(url)).status, 200);

    await sim.control('/faults', { httpErrorRate: 1, httpErrorPath: '/chains' });
    assert.equal((await getJson(url)).status, 200, 'other paths unaffected');
    assert.equal((await getJson(`${sim.url}/chains`)).status, 500);
    await sim.control('/faults', null, 'DELETE');
    assert.equal((await getJson(`${sim.url}/chains`)).status, 200);
    const s = await sim.stats();
    assert.ok(s.http.injected >= 20);
    assert.ok(s.http.byPath['/intents/status/v3']['503'] >= 1);
  });

  test('httpDelayMs holds upstream answers', async () => {
    await sim.control('/faults', { httpDelayMs: 300 });
    const t0 = Date.now();
    const r = await getJson(`${sim.url}/chains`);
    const dt = Date.now() - t0;
    await sim.control('/faults', { httpDelayMs: 0 });
    assert.equal(r.status, 200);
    assert.ok(dt >= 280, `held ${dt} ms`);
  });

  test('bad fault values are refused', async () => {
    for (const body of [{ httpErrorRate: 2 }, { envelope: 'C' }, { dropWs: 'gently' }, { warpDrive: true }, { httpErrorStatus: 418 }]) {
      await assert.rejects(sim.control('/faults', body), (e) => e.status === 400, JSON.stringify(body));
    }
  });
});

describe('statusrelay sim: rate limit', () => {
  test('per-key sliding window answers 429 with Retry-After; keys have separate buckets', async () => {
    const sim = await startSim({ apiKey: 'rk', rateLimit: 5 });
    try {
      const url = `${sim.url}/chains`;
      for (let i = 0; i < 5; i++) assert.equal((await getJson(url, { 'x-api-key': 'rk' })).status, 200);
      const r = await getJson(url, { 'x-api-key': 'rk' });
      assert.equal(r.status, 429);
      assert.deepEqual(r.body, { message: r.body.message, errorCode: 'RATE_LIMITED' });
      const ra = Number(r.headers.get('retry-after'));
      assert.ok(ra >= 1 && ra <= 60, `Retry-After ${ra}`);
      assert.equal((await getJson(`${sim.url}/requests/v3`, { 'x-api-key': 'rk' })).status, 429, 'one budget for every path');
      assert.equal((await getJson(url)).status, 200, 'keyless calls have their own bucket');
      // Raised at runtime: the window starts afresh.
      await sim.control('/faults', { rateLimitPerMin: 1000 });
      assert.equal((await getJson(url, { 'x-api-key': 'rk' })).status, 200);
      const s = await sim.stats();
      assert.equal(s.http.byPath['/chains']['429'], 1);
      assert.equal(s.http.byPath['/requests/v3']['429'], 1);
      assert.equal(s.http.rateLimited, 2);
    } finally {
      await sim.stop();
    }
  });
});

describe('statusrelay sim: upstream webhooks', () => {
  test('every status change is POSTed, signed with the API key (X-Signature-SHA256), retried on failure', async () => {
    const got = [];
    let failFirst = true;
    const server = http.createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (d) => { body += d; });
      req.on('end', () => {
        got.push({ headers: req.headers, body, method: req.method, url: req.url });
        if (failFirst) { failFirst = false; res.writeHead(500).end('try later'); return; }
        res.writeHead(200).end('ok');
      });
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const key = 'whk-' + crypto.randomBytes(8).toString('hex');
    const sim = await startSim({ apiKey: key, webhookUrl: `http://127.0.0.1:${server.address().port}/hook`, extraArgs: ['--webhook-retries', '3'] });
    try {
      const id = newId();
      await sim.control('/requests', { id, lifecycle: 'success', stepMs: 50 });
      await until(() => got.length >= 5, { msg: 'webhook posts', timeoutMs: 10000 });
      for (const g of got) {
        assert.equal(g.method, 'POST');
        assert.equal(g.url, '/hook');
        assert.equal(g.headers['content-type'], 'application/json');
        const ts = g.headers['x-signature-timestamp'];
        assert.match(ts, /^\d{13}$/, 'timestamp in ms');
        const want = crypto.createHmac('sha256', key).update(`${ts}.${g.body}`).digest('hex');
        assert.equal(g.headers['x-signature-sha256'], want, 'upstream signature verifies');
        assert.ok(Math.abs(Number(ts) - Date.now()) < 60000);
      }
      // The first attempt failed (500) and was retried later with the same body (and a fresh
      // signature); the others went out meanwhile (the upstream promises no ordering).
      assert.equal(got.filter((g) => g.body === got[0].body).length, 2);
      const bodies = [...new Set(got.map((g) => g.body))].map((b) => JSON.parse(b));
      assert.deepEqual(bodies.map((b) => b.data.status).sort(), ['pending', 'submitted', 'success', 'waiting']);
      const last = bodies.find((b) => b.data.status === 'success');
      assert.deepEqual(Object.keys(last), ['event', 'timestamp', 'data']);
      assert.equal(last.event, 'request.status.updated');
      assert.deepEqual(Object.keys(last.data), ['status', 'inTxHashes', 'txHashes', 'updatedAt', 'originChainId',
        'destinationChainId', 'depositAddress', 'requestId', 'referrer', 'details', 'failReason', 'refundFailReason']);
      assert.equal(last.data.requestId, id);
      const st = await getJson(`${sim.url}/intents/status/v3?requestId=${id}`);
      assert.equal(st.body.updatedAt, last.data.updatedAt);
      assert.deepEqual(st.body.txHashes, last.data.txHashes);
      const s = await until(async () => { const x = await sim.stats(); return x.webhooks.pending === 0 && x; }, { msg: 'webhooks settle' });
      assert.equal(s.webhooks.delivered, 4);
      assert.equal(s.webhooks.failed, 1);
      assert.equal(s.webhooks.retries, 1);
      assert.equal(s.webhooks.sent, 5);
    } finally {
      assert.equal((await sim.stop()).code, 0);
      server.close();
    }
  });
});

describe('statusrelay sim: generated lifecycles and load mode', () => {
  test('the same seed gives the same requests (ids, lifecycles, chains, hashes)', async () => {
    const runs = [];
    for (let i = 0; i < 2; i++) {
      const sim = await startSim({ seed: 4242, rate: 100, step: '20ms', duration: '500ms' });
      try {
        await until(async () => (await sim.control('/load')).running === false, { msg: 'generator ends' });
        await sleep(300);
        const list = (await sim.control('/requests?limit=40')).requests;
        const full = [];
        for (const r of list.slice(0, 10)) full.push((await sim.control(`/requests/${r.id}`)).statusV3);
        runs.push({ list: list.map((r) => [r.id, r.lifecycle]), full: full.map((x) => [x.originChainId, x.destinationChainId, x.inTxHashes, x.txHashes, x.status]) });
      } finally {
        await sim.stop();
      }
    }
    assert.equal(runs[0].list.length, 40);
    assert.deepEqual(runs[0].list, runs[1].list);
    assert.deepEqual(runs[0].full, runs[1].full);
  });

  test('the mix produces every lifecycle, realistic paths and both hash formats', async () => {
    const sim = await startSim({ seed: 9, rate: 300, step: '20ms', duration: '1s' });
    try {
      await until(async () => { const s = await sim.stats(); return !s.load.running && s.requests.active === 0; }, { msg: 'all done', timeoutMs: 15000 });
      const list = (await sim.control('/requests?limit=10000')).requests;
      assert.ok(list.length >= 280 && list.length <= 300, `made ${list.length}`);
      const kinds = new Set(list.map((r) => r.lifecycle));
      for (const k of ['success', 'depositing', 'delayed', 'refund', 'failure', 'deposit-address', 'solana']) assert.ok(kinds.has(k), k);
      const paths = {};
      let b58 = 0, hex = 0;
      for (const r of list.slice(0, 150)) {
        const v = await sim.control(`/requests/${r.id}`);
        paths[r.lifecycle] = v.history.map((h) => h.status).join('>');
        for (const h of [...v.statusV3.inTxHashes, ...v.statusV3.txHashes]) {
          if (EVM_HASH.test(h)) hex++;
          else if (B58.test(h)) b58++;
        }
      }
      assert.equal(paths.refund, 'waiting>pending>failure>pending>refund');
      assert.equal(paths.delayed, 'waiting>pending>delayed>submitted>success');
      assert.equal(paths.depositing, 'depositing>pending>submitted>success');
      assert.ok(hex > 0 && b58 > 0, `hex ${hex} base58 ${b58}`);
    } finally {
      await sim.stop();
    }
  });

  test('--duration bounds the generator; --exit-when-done exits 0 once every lifecycle ended', async () => {
    const dir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'sr-sim-exit-'));
    const p = startProcess('sim-exit', BIN, ['sim', '--listen', '127.0.0.1:0', '--port-file', path.join(dir, 'port'),
      '--rate', '200', '--duration', '1s', '--step', '50ms', '--exit-when-done']);
    const t0 = Date.now();
    const r = await Promise.race([p.exited, sleep(15000).then(() => ({ code: 'timeout' }))]);
    if (r.code === 'timeout') await p.stop('SIGKILL');
    assert.equal(r.code, 0, p.log());
    assert.ok(Date.now() - t0 >= 1000);
    const m = p.log().match(/load generator finished.*made=(\d+)/);
    assert.ok(m && Number(m[1]) === 200, `made ${m?.[1]}`);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('load mode streams events fast (helpers/sim_load)', async (t) => {
    const tool = path.join(HELPERS, 'sim_load');
    if (!fs.existsSync(tool)) { t.skip(`${tool} not built (make helpers)`); return; }
    const sim = await startSim({ seed: 3, extraArgs: ['--step', '300ms', '--retain', '200000'] });
    try {
      // ~10,000 new requests/s with about 3 events each after the client subscribed.
      const { sanitized } = await sim.control('/health');
      const r = spawnSync(tool, ['--url', sim.url, '--rate', '10000', '--seconds', '4', '--conns', '4'], { encoding: 'utf8', timeout: 60000 });
      assert.equal(r.status, 0, r.stderr);
      const res = JSON.parse(r.stdout.trim().split('\n').pop());
      t.diagnostic(`sim_load: ${JSON.stringify(res)}`);
      // The requirement is 20,000 events/s on one core; sanitizer builds are several times slower.
      const min = Number(process.env.SIM_LOAD_MIN_FPS ?? (sanitized ? 3000 : 20000));
      assert.ok(res.framesPerSec >= min, `${res.framesPerSec} frames/s >= ${min}`);
    } finally {
      await sim.stop();
    }
  });
});
