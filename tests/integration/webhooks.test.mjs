// webhooks.test.mjs - webhook fan-out and delivery end to end: real redis-server, the daemon,
// real HTTP receivers on loopback (helpers/hook_receiver, raw TCP servers for hostile ones).
// Events are injected through POST /v1/ingest/upstream with a valid upstream signature.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { until } from './lib/proc.mjs';
import { startReceiver, startRawServer, ingest, upstreamPayload, rid, patch } from './lib/hooks.mjs';

const KEY = 'webhook-test-api-key';
const FAST = ['--retry-schedule', '0s,200ms,400ms'];
const cleanup = [];
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });

async function stack({ args = FAST, env = {}, redis } = {}) {
  redis = redis ?? await startRedis();
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, args, env });
  cleanup.push(() => d.stop(), () => redis.stop());
  return { redis, d };
}

async function receiver(opts) {
  const rx = await startReceiver(opts);
  cleanup.push(() => rx.stop());
  return rx;
}

async function create(d, body) {
  const r = await d.post('/v1/webhooks', body);
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body;
}

async function send(d, p) {
  const st = await ingest(d, KEY, upstreamPayload(p));
  assert.equal(st, 200, 'ingest accepted');
}

const ok2xx = (x) => x.status >= 200 && x.status < 300;
const bodyOf = (x) => JSON.parse(x.body);

function ed25519Verify(pub, id, ts, body, sigHeader) {
  const raw = Buffer.from(pub.replace(/^whpk_/, ''), 'base64');
  const key = crypto.createPublicKey({ key: Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), raw]), format: 'der', type: 'spki' });
  return sigHeader.split(' ').some((s) => s.startsWith('v1a,') &&
    crypto.verify(null, Buffer.from(`${id}.${ts}.${body}`), key, Buffer.from(s.slice(4), 'base64')));
}

test('deliveries verify: Standard Webhooks, upstream scheme, ed25519, rotation; body shape', async () => {
  const { d } = await stack();
  const rx = await receiver();
  const std = await create(d, { url: rx.url('/std'), headers: { 'X-Team': 'blue' }, description: 'std' });
  const both = await create(d, { url: rx.url('/both'), signatureScheme: 'both' });
  const ed = await create(d, { url: rx.url('/ed'), signing: 'ed25519' });
  assert.match(std.secret, /^whsec_[A-Za-z0-9+/=]{40,}$/);
  assert.equal(ed.secret, undefined);
  assert.match(ed.publicKey, /^whpk_/);
  for (const k of ['id', 'url', 'secret', 'filters', 'headers', 'enabled', 'signatureScheme', 'description', 'createdAt'])
    assert.ok(k in std, `create response has ${k}`);
  const g = await d.get(`/v1/webhooks/${std.id}`);
  assert.equal(g.status, 200);
  assert.equal(g.body.secret, undefined);
  assert.equal((await d.post(`/v1/webhooks/${std.id}/reveal-secret`, {})).body.secret, std.secret);

  const r = rid('sig');
  await send(d, { rid: r, status: 'waiting' });
  await send(d, { rid: r, status: 'pending' });
  await until(() => rx.records().length >= 6, { msg: '6 deliveries' });
  const recs = rx.records();
  for (const x of recs) {
    const b = bodyOf(x);
    assert.equal(x.headers['webhook-id'], b.statusrelay.eventId);
    assert.equal(b.event, 'request.status.updated');
    assert.equal(typeof b.timestamp, 'number');
    assert.equal(b.data.requestId, r);
    assert.equal(b.data.failReason, 'N/A');
    assert.match(x.headers.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    assert.equal(x.headers['content-type'], 'application/json');
    if (x.path === '/std' || x.path === '/both')
      new Webhook(x.path === '/std' ? std.secret : both.secret).verify(x.body, x.headers);
    if (x.path === '/std') assert.equal(x.headers['x-team'], 'blue');
    if (x.path === '/both') {
      const want = crypto.createHmac('sha256', both.secret).update(`${x.headers['x-signature-timestamp']}.${x.body}`).digest('hex');
      assert.equal(x.headers['x-signature-sha256'], want);
    }
    if (x.path === '/ed') assert.ok(ed25519Verify(ed.publicKey, x.headers['webhook-id'], x.headers['webhook-timestamp'], x.body, x.headers['webhook-signature']));
  }
  // rotation: both secrets sign during the grace period
  const rot = await d.post(`/v1/webhooks/${std.id}/rotate-secret`, {});
  assert.equal(rot.status, 200);
  assert.ok(rot.body.previousSecretExpiresAt > Date.now());
  assert.notEqual(rot.body.secret, std.secret);
  await send(d, { rid: r, status: 'success' });
  await until(() => rx.records().filter((x) => x.path === '/std').length >= 3, { msg: 'post-rotation delivery' });
  const last = rx.records().filter((x) => x.path === '/std').at(-1);
  assert.equal(last.headers['webhook-signature'].split(' ').length, 2);
  new Webhook(rot.body.secret).verify(last.body, last.headers);
  new Webhook(std.secret).verify(last.body, last.headers);
  // test send
  const t = await d.post(`/v1/webhooks/${both.id}/test`, {});
  assert.equal(t.status, 200);
  assert.equal(t.body.ok, true);
  assert.equal(t.body.statusCode, 204);
});

test('fails twice then succeeds: third attempt, same webhook-id, attempt log shows 3', async () => {
  const { d } = await stack();
  const rx = await receiver({ script: ['/a=500,503,200'] });
  const wh = await create(d, { url: rx.url('/a') });
  await send(d, { rid: rid('f2'), status: 'pending' });
  await until(() => rx.records().length >= 3, { msg: '3 attempts' });
  const recs = rx.records();
  assert.equal(new Set(recs.map((x) => x.headers['webhook-id'])).size, 1);
  assert.equal(new Set(recs.map((x) => x.body)).size, 1, 'identical body on every attempt');
  const dl = await until(async () => {
    const r = await d.get(`/v1/webhooks/${wh.id}/deliveries?state=delivered`);
    return r.body.deliveries.length === 1 && r.body;
  }, { msg: 'delivered in the log' });
  const x = dl.deliveries[0];
  assert.equal(x.attempts.length, 3);
  assert.deepEqual(x.attempts.map((a) => a.statusCode), [500, 503, 200]);
  assert.equal(x.eventId, recs[0].headers['webhook-id']);
  assert.equal(x.nextAttemptAt, null);
});

test('always failing ends dead; replay delivers once healthy, same id and body', async () => {
  const { d } = await stack();
  const rx = await receiver({ def: 500 });
  const wh = await create(d, { url: rx.url('/dead') });
  await send(d, { rid: rid('dead'), status: 'pending' });
  const dead = await until(async () => {
    const r = await d.get(`/v1/webhooks/${wh.id}/deliveries?state=dead`);
    return r.body.deliveries.length === 1 && r.body.deliveries[0];
  }, { msg: 'dead delivery' });
  assert.equal(dead.attempts.length, 3);
  const dry = await d.post('/v1/replay', { dead: true, dryRun: true });
  assert.equal(dry.status, 200);
  assert.equal(dry.body.count, 1);
  await rx.setScript('/dead=200,200,200');
  const rp = await d.post('/v1/replay', { dead: true });
  assert.equal(rp.status, 202);
  assert.equal(rp.body.count, 1);
  assert.match(rp.body.replayId, /^rpl_/);
  await until(() => rx.records().some((x) => x.status === 200), { msg: 'replayed delivery' });
  const recs = rx.records();
  const good = recs.filter((x) => x.status === 200);
  assert.equal(good.length, 1);
  assert.equal(good[0].headers['statusrelay-replay'], '1');
  assert.equal(good[0].body, recs[0].body);
  assert.equal(good[0].headers['webhook-id'], recs[0].headers['webhook-id']);
  const st = await until(async () => (await d.get(`/v1/webhooks/${wh.id}/deliveries?state=delivered`)).body.deliveries[0]);
  assert.equal(st.attempts.length, 4);
  // replay by request id re-delivers the delivered event again (receivers dedupe on webhook-id)
  const again = await d.post('/v1/replay', { requestId: st.requestId });
  assert.equal(again.body.count, 1);
  await until(() => rx.records().filter((x) => x.status === 200).length === 2, { msg: 'replay by request' });
});

test('410 disables the endpoint; events meanwhile are skipped and replayable', async () => {
  const { d } = await stack();
  const rx = await receiver({ script: ['/gone=410'] });
  const wh = await create(d, { url: rx.url('/gone') });
  const r = rid('gone');
  await send(d, { rid: r, status: 'pending' });
  await until(async () => (await d.get(`/v1/webhooks/${wh.id}`)).body.enabled === false, { msg: 'disabled' });
  const g = await d.get(`/v1/webhooks/${wh.id}`);
  assert.equal(g.body.disabledReason, 'gone');
  await send(d, { rid: r, status: 'success' });
  await until(async () => (await d.get(`/v1/webhooks/${wh.id}/deliveries?state=skipped`)).body.deliveries.length === 1, { msg: 'skipped' });
  await until(() => rx.records().length === 1, { msg: 'the 410 answer recorded' });
  assert.equal((await patch(d, `/v1/webhooks/${wh.id}`, { enabled: true })).status, 200);
  const rp = await d.post('/v1/replay', { skipped: true, webhookId: wh.id });
  assert.equal(rp.body.count, 1);
  await until(() => rx.records().length === 2, { msg: 'skipped replayed' });
  assert.equal(bodyOf(rx.records()[1]).data.status, 'success');
});

test('100 endpoints with mixed filters receive exactly their selection', async () => {
  const { d } = await stack();
  const rx = await receiver();
  const statuses = ['waiting', 'pending', 'success', 'failure', 'refund'];
  const chains = [1, 10, 137, 8453];
  const rids = Array.from({ length: 8 }, (_, i) => rid(`m${i}`));
  const eps = [];
  for (let i = 0; i < 100; i++) {
    const f = {};
    if (i % 3 === 0) f.status = [statuses[i % 5], statuses[(i + 2) % 5]];
    if (i % 4 === 1) f.originChainIds = [chains[i % 4], chains[(i + 1) % 4]];
    if (i % 5 === 2) f.destinationChainIds = [chains[(i + 3) % 4]];
    if (i % 7 === 3) f.requestIds = [rids[i % 8], rids[(i + 3) % 8]];
    const w = await create(d, { url: rx.url(`/e${i}`), filters: f });
    eps.push({ path: `/e${i}`, f });
  }
  const events = [];
  for (let k = 0; k < rids.length; k++) {
    const origin = chains[k % 4], dest = chains[(k + 1) % 4];
    const seqs = k % 2 ? ['waiting', 'pending', 'success'] : ['pending', 'failure', 'refund'];
    for (const status of seqs) { events.push({ rid: rids[k], status, origin, dest }); await send(d, { rid: rids[k], status, origin, dest, updatedAt: Date.now() }); }
  }
  const match = (f, e) => (!f.status || f.status.includes(e.status)) && (!f.originChainIds || f.originChainIds.includes(e.origin)) &&
    (!f.destinationChainIds || f.destinationChainIds.includes(e.dest)) && (!f.requestIds || f.requestIds.includes(e.rid));
  const expected = new Map(eps.map((ep) => [ep.path, events.filter((e) => match(ep.f, e)).map((e) => `${e.rid}:${e.status}`).sort()]));
  const total = [...expected.values()].reduce((a, v) => a + v.length, 0);
  assert.ok(total > 200, `a meaningful selection (${total})`);
  await until(() => rx.records().length >= total, { timeoutMs: 20000, msg: `${total} deliveries` });
  await new Promise((r) => setTimeout(r, 300)); // nothing extra arrives
  const got = new Map(eps.map((ep) => [ep.path, []]));
  for (const x of rx.records()) { const b = bodyOf(x); got.get(x.path).push(`${b.data.requestId}:${b.data.status}`); }
  for (const ep of eps) assert.deepEqual(got.get(ep.path).sort(), expected.get(ep.path), `endpoint ${ep.path} ${JSON.stringify(ep.f)}`);
});

test('hostile endpoints do not stall healthy ones', async () => {
  const { d } = await stack({ args: ['--retry-schedule', '0s,1s', '--delivery-timeout', '2s', '--connect-timeout', '1s', '--delivery-lease', '5s'] });
  const rx = await receiver();
  const elsewhere = await startRawServer((s) => s.end('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n'));
  const hostile = [
    await startRawServer(() => {}), // never answers
    await startRawServer((s) => { // one byte per second
      const resp = 'HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello';
      let i = 0; const t = setInterval(() => { if (i >= resp.length || s.destroyed) return clearInterval(t); s.write(resp[i++]); }, 1000);
      s.on('close', () => clearInterval(t));
    }),
    await startRawServer((s) => { // 100 MB body
      s.write('HTTP/1.1 200 OK\r\ncontent-length: 100000000\r\n\r\n');
      const chunk = Buffer.alloc(65536, 120); let sent = 0;
      const pump = () => { while (sent < 100e6 && !s.destroyed) { sent += chunk.length; if (!s.write(chunk)) return s.once('drain', pump); } };
      pump();
    }),
    await startRawServer((s) => { // chunked, endless
      s.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n');
      const t = setInterval(() => { if (s.destroyed) return clearInterval(t); s.write('10000\r\n' + 'y'.repeat(65536) + '\r\n'); }, 1);
      s.on('close', () => clearInterval(t));
    }),
    await startRawServer((s) => { s.write('HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\npartial'); s.destroy(); }), // close mid-response
    await startRawServer((s) => s.end(`HTTP/1.1 302 Found\r\nlocation: ${elsewhere.url('/x')}\r\ncontent-length: 0\r\n\r\n`)), // redirect
  ];
  cleanup.push(() => elsewhere.stop(), ...hostile.map((h) => () => h.stop()));
  const hostileWh = [];
  for (const h of hostile) for (let k = 0; k < 3; k++) hostileWh.push(await create(d, { url: h.url(`/h${k}`) }));
  await create(d, { url: rx.url('/healthy') });
  const sentAt = new Map();
  for (let i = 0; i < 30; i++) {
    const r = rid(`h${i}`);
    sentAt.set(r, Date.now());
    await send(d, { rid: r, status: 'pending' });
    await new Promise((res) => setTimeout(res, 50));
  }
  await until(() => rx.records().length >= 30, { timeoutMs: 15000, msg: 'healthy deliveries' });
  const lat = rx.records().map((x) => x.t - sentAt.get(bodyOf(x).data.requestId)).sort((a, b) => a - b);
  const p50 = lat[Math.floor(lat.length / 2)], max = lat.at(-1);
  console.log(`# healthy endpoint latency with 18 hostile endpoints: p50=${p50}ms max=${max}ms`);
  assert.ok(max < 1000, `healthy latency max ${max} ms`);
  assert.equal(elsewhere.hits(), 0, 'redirects are not followed');
  // the hostile endpoints' attempts failed with the expected errors
  const dl = await until(async () => {
    const r = await d.get(`/v1/webhooks/${hostileWh[0].id}/deliveries`);
    return r.body.deliveries.some((x) => x.attempts.length > 0) && r.body.deliveries;
  }, { timeoutMs: 10000, msg: 'hostile attempt logged' });
  assert.equal(dl.find((x) => x.attempts.length)?.attempts[0].error, 'timeout');
});

test('ordering per endpoint and request holds under retries', async () => {
  const { d } = await stack();
  const rx = await receiver({ script: ['/o=500,500,200,503,200,500,200'] });
  await create(d, { url: rx.url('/o') });
  const r1 = rid('o1');
  const r2 = rid('o2');
  const seq = ['waiting', 'depositing', 'pending', 'submitted', 'success'];
  for (const s of seq) { await send(d, { rid: r1, status: s }); await send(d, { rid: r2, status: s }); }
  await until(() => rx.records().filter(ok2xx).length >= 10, { timeoutMs: 15000, msg: '10 delivered' });
  for (const r of [r1, r2]) {
    const mine = rx.records().filter((x) => bodyOf(x).data.requestId === r);
    const seqs = mine.map((x) => bodyOf(x).statusrelay.seq);
    // every attempt of seq n+1 comes after the successful delivery of seq n
    let delivered = 0;
    for (const x of mine) {
      const s = bodyOf(x).statusrelay.seq;
      assert.equal(s, delivered + 1, `seq order ${JSON.stringify(seqs)}`);
      if (ok2xx(x)) delivered = s;
    }
    assert.equal(delivered, 5);
  }
});

test('latest mode skips superseded states', async () => {
  const { d } = await stack();
  const rx = await receiver({ delays: ['/l=400'] });
  const all = await receiver();
  const wh = await create(d, { url: rx.url('/l'), mode: 'latest' });
  assert.equal(wh.mode, 'latest');
  await create(d, { url: all.url('/all') });
  const r = rid('latest');
  for (const s of ['waiting', 'depositing', 'pending', 'submitted', 'success']) await send(d, { rid: r, status: s });
  await until(() => all.records().length === 5, { msg: 'all mode gets 5' });
  await until(() => rx.records().some((x) => bodyOf(x).data.status === 'success'), { msg: 'latest state delivered' });
  await new Promise((res) => setTimeout(res, 600));
  const got = rx.records().map((x) => bodyOf(x).statusrelay.seq);
  assert.ok(got.length < 5, `latest mode sent ${JSON.stringify(got)}`);
  assert.deepEqual([...got].sort((a, b) => a - b), got, 'still in order');
  const sup = await d.get(`/v1/webhooks/${wh.id}/deliveries?state=superseded`);
  assert.equal(sup.body.deliveries.length, 5 - got.length);
});

test('SSRF: private targets are refused at registration and on connect', async () => {
  const redis = await startRedis();
  cleanup.push(() => redis.stop());
  const strict = await startDaemon({ redisUrl: redis.url, apiKey: KEY, args: FAST, env: { STATUSRELAY_ALLOW_PRIVATE_TARGETS: 'false' } });
  cleanup.push(() => strict.stop());
  for (const u of ['http://127.0.0.1/x', 'http://[::1]/x', 'http://10.1.2.3/x', 'http://169.254.169.254/latest',
    'http://[::ffff:127.0.0.1]/x', 'http://localhost:8080/x', 'http://127.1/', 'http://2130706433/', 'http://0x7f000001/',
    'http://0177.0.0.1/', 'http://0.0.0.0/', 'https://192.168.1.1/']) {
    const r = await strict.post('/v1/webhooks', { url: u });
    assert.equal(r.status, 400, u);
    assert.equal(r.body.error.code, 'forbidden_target', u);
  }
  for (const u of ['ftp://example.com/', 'http://user:pw@example.com/', 'not a url'])
    assert.equal((await strict.post('/v1/webhooks', { url: u })).status, 400, u);
  await strict.stop();
  // registered while private targets were allowed, then refused on the connection itself
  const lax = await startDaemon({ redisUrl: redis.url, apiKey: KEY, args: FAST });
  const rx = await receiver();
  const wh = await create(lax, { url: rx.url('/ssrf') });
  await lax.stop();
  const strict2 = await startDaemon({ redisUrl: redis.url, apiKey: KEY, args: FAST, env: { STATUSRELAY_ALLOW_PRIVATE_TARGETS: 'false' } });
  cleanup.push(() => strict2.stop());
  await send(strict2, { rid: rid('ssrf'), status: 'pending' });
  const dead = await until(async () => (await strict2.get(`/v1/webhooks/${wh.id}/deliveries?state=dead`)).body.deliveries[0], { msg: 'dead at once' });
  assert.equal(dead.attempts.length, 1);
  assert.equal(dead.attempts[0].error, 'forbidden_target');
  assert.equal(rx.records().length, 0);
});

test('REST: validation, 404s, patch and delete', async () => {
  const { d } = await stack();
  const rx = await receiver();
  assert.equal((await d.get('/v1/webhooks/wh_nope')).status, 404);
  assert.equal((await d.del('/v1/webhooks/wh_nope')).status, 404);
  assert.equal((await patch(d, '/v1/webhooks/wh_nope', { enabled: false })).status, 404);
  assert.equal((await d.post('/v1/webhooks/wh_nope/rotate-secret', {})).status, 404);
  assert.equal((await d.get('/v1/webhooks/wh_nope/deliveries')).status, 404);
  assert.equal((await d.post('/v1/replay', { webhookId: 'wh_nope', since: 0 })).status, 404);
  for (const bad of [{ url: rx.url(), headers: { 'webhook-id': 'x' } }, { url: rx.url(), headers: { Host: 'x' } },
    { url: rx.url(), headers: { 'bad name': 'x' } }, { url: rx.url(), headers: { 'X-A': 'a\r\nb' } },
    { url: rx.url(), filters: { status: 'pending' } }, { url: rx.url(), filters: { colour: ['red'] } },
    { url: rx.url(), signatureScheme: 'weird' }, { url: rx.url(), unknown: 1 }, {}]) {
    const r = await d.post('/v1/webhooks', bad);
    assert.equal(r.status, 400, JSON.stringify(bad));
    assert.ok(r.body.error.code, 'error shape');
  }
  const wh = await create(d, { url: rx.url('/p'), filters: { status: ['success'] } });
  const p = await patch(d, `/v1/webhooks/${wh.id}`, { description: 'renamed', filters: { originChainIds: [1] }, enabled: false });
  assert.equal(p.status, 200);
  assert.equal(p.body.description, 'renamed');
  assert.deepEqual(p.body.filters, { originChainIds: [1] });
  assert.equal(p.body.enabled, false);
  const list = await d.get('/v1/webhooks');
  assert.equal(list.body.webhooks.length, 1);
  assert.equal((await d.get(`/v1/webhooks/${wh.id}/deliveries?state=bogus`)).status, 400);
  assert.equal((await d.del(`/v1/webhooks/${wh.id}`)).status, 204);
  assert.equal((await d.get(`/v1/webhooks/${wh.id}`)).status, 404);
  assert.equal((await d.post('/v1/replay', {})).status, 400);
});

test('Retry-After is honoured on 429; an endpoint failing continuously is disabled', async () => {
  const { d } = await stack({ args: ['--retry-schedule', '0s,100ms,100ms,300ms,300ms,300ms,300ms', '--disable-after', '1s'] });
  const rx = await receiver({ script: ['/ra=429:1,200', '/bad=500'], def: 500 });
  await create(d, { url: rx.url('/ra') });
  const bad = await create(d, { url: rx.url('/bad') });
  await send(d, { rid: rid('ra'), status: 'pending' });
  await until(() => rx.records().filter((x) => x.path === '/ra').length === 2, { msg: 'retried after Retry-After' });
  const ra = rx.records().filter((x) => x.path === '/ra');
  assert.ok(ra[1].t - ra[0].t >= 950, `second attempt ${ra[1].t - ra[0].t} ms after a 429 with Retry-After: 1`);
  const g = await until(async () => { const r = await d.get(`/v1/webhooks/${bad.id}`); return r.body.enabled === false && r.body; },
    { timeoutMs: 8000, msg: 'disabled after failing 1s' });
  assert.equal(g.disabledReason, 'failing');
});

test('two processes share the work: every (event, endpoint) exactly once', async () => {
  const redis = await startRedis();
  cleanup.push(() => redis.stop());
  const a = await startDaemon({ redisUrl: redis.url, apiKey: KEY, args: FAST });
  const b = await startDaemon({ redisUrl: redis.url, apiKey: KEY, args: FAST });
  cleanup.push(() => a.stop(), () => b.stop());
  const rx = await receiver({ minimal: true });
  const E = 10, N = 40;
  for (let i = 0; i < E; i++) await create(i % 2 ? a : b, { url: rx.url(`/m${i}`) });
  for (let i = 0; i < N; i++) await send(i % 2 ? a : b, { rid: rid(`mp${i}`), status: 'pending' });
  await until(() => rx.records().length >= E * N, { timeoutMs: 15000, msg: 'all pairs' });
  await new Promise((r) => setTimeout(r, 300));
  const recs = rx.records();
  assert.equal(new Set(recs.map((x) => `${x.path}|${x.id}`)).size, E * N);
  assert.equal(recs.length, E * N, 'no duplicates without crashes');
});

test('kill -9 with deliveries in flight: every (event, endpoint) arrives at least once', async () => {
  const args = ['--retry-schedule', '0s,200ms,400ms,1s,1s,1s', '--delivery-timeout', '1s', '--connect-timeout', '500ms', '--delivery-lease', '2s'];
  const redis = await startRedis({ aof: true });
  cleanup.push(() => redis.stop());
  let d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, args });
  const rx = await receiver({ delayMs: 30, minimal: true });
  const E = 20, N = 40;
  for (let i = 0; i < E; i++) await create(d, { url: rx.url(`/k${i}`) });
  const ids = new Set();
  for (let i = 0; i < N; i++) await send(d, { rid: rid(`k${i}`), status: 'pending' });
  await until(() => rx.records().length >= 100, { msg: 'some deliveries before the kill' });
  d.proc.child.kill('SIGKILL');
  await d.proc.exited;
  const atKill = rx.records().length;
  d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, args });
  cleanup.push(() => d.stop());
  await until(() => {
    for (const x of rx.records()) ids.add(`${x.path}|${x.id}`);
    return ids.size >= E * N;
  }, { timeoutMs: 30000, msg: `${E * N} distinct (event, endpoint) pairs` });
  await new Promise((res) => setTimeout(res, 500));
  const recs = rx.records();
  const distinct = new Set(recs.map((x) => `${x.path}|${x.id}`)).size;
  assert.equal(distinct, E * N);
  console.log(`# kill -9: ${E * N} pairs, ${atKill} received before the kill, ${recs.length} requests in total, duplicates=${recs.length - distinct}`);
});

test('throughput with one fast receiver (reported, not asserted)', async () => {
  const { d } = await stack({ args: ['--endpoint-concurrency', '64'] });
  const rx = await receiver({ noRecord: true });
  const E = 100, N = 300;
  for (let i = 0; i < E; i++) await create(d, { url: rx.url(`/t${i}`) });
  const t0 = Date.now();
  const jobs = [];
  for (let i = 0; i < N; i++) {
    jobs.push(send(d, { rid: rid(`t${i}`), status: 'pending' }));
    if (jobs.length >= 50) await Promise.all(jobs.splice(0));
  }
  await Promise.all(jobs);
  const tIngest = Date.now() - t0;
  const stats = async () => (await (await fetch(rx.url('/__stats'))).json()).requests;
  await until(async () => (await stats()) >= E * N, { timeoutMs: 60000, stepMs: 20, msg: 'all deliveries' });
  const el = Date.now() - t0;
  console.log(`# throughput: ${E * N} signed deliveries in ${el} ms (ingest of ${N} events took ${tIngest} ms): ${Math.round(E * N / (el / 1000))} deliveries/s`);
});
