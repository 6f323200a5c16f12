// filters.test.mjs - the filter keys users, referrers, failReasons, refundFailReasons, flags and
// metadata (issue 25, DESIGN "Event types and routing", docs/webhooks.md "Filters") end to end,
// against a real redis-server and `statusrelay serve` on loopback, with one Redis partition and
// with three (STATUSRELAY_PARTITIONS=3):
//  - endpoints filtered on each key receive exactly their events, in per-request order; a
//    dashboard subscription filtered on flags / metadata / referrers gets only matching frames;
//  - bad filters are refused: 400 naming the key and the limit (REST), an error frame (dashboard);
//  - `statusrelay webhooks add` takes the new options.
// Events are injected through POST /v1/ingest/upstream (signed like the upstream's webhooks), so
// each request's referrer and reasons are exactly what the test says; the tracking metadata is
// given to POST /v1/requests. "users" (wallets from request facts) is covered by the matcher's
// unit tests (tests/unit/test_filter.c) until the facts are wired into the subject.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { BIN, until } from './lib/proc.mjs';
import { startReceiver, ingest, upstreamPayload, patch, rid } from './lib/hooks.mjs';
import { ridsOverPartitions } from './lib/partitions.mjs';
import { client, sub, subscribed } from './lib/dash_client.mjs';

const KEY = 'filters-test-key';
const cleanup = [];
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });

async function stack(partitions) {
  const redis = await startRedis();
  const env = partitions > 1 ? { STATUSRELAY_PARTITIONS: String(partitions) } : {};
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, env, args: ['--retry-schedule', '0s,200ms,400ms'] });
  cleanup.push(() => d.stop(), () => redis.stop());
  return { redis, d };
}

async function create(d, body) {
  const r = await d.post('/v1/webhooks', body);
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body;
}

const bodyOf = (x) => JSON.parse(x.body);
const key = (b) => `${b.data.requestId}:${b.data.status}`;

// The endpoints and what each one must receive (filled in once the request ids are known).
const ENDPOINTS = {
  all: {},
  ref: { referrers: ['shop-A'] },
  fail: { failReasons: ['SLIPPAGE'] },
  refund: { refundFailReasons: ['MANUAL_REFUND_REQUIRED'] },
  none: { status: ['success', 'failure'], failReasons: ['N/A'] }, // "N/A": no reason
  rev: { flags: ['reversal'] },
  unk: { flags: ['unknownFailReason', 'reorg'] },
  meta: { metadata: { tenant: 'acme', tier: 2 } },
  combo: { referrers: ['shop-A', 'shop-Z'], flags: ['reversal'] },
};

for (const parts of [1, 3]) {
  test(`each new filter key gives its endpoint exactly its events in per-request order (${parts} partition${parts > 1 ? 's' : ''})`, async () => {
    const { d } = await stack(parts);
    const rx = await startReceiver();
    cleanup.push(() => rx.stop());
    const [A, B, C, D, E, F] = ridsOverPartitions(`flt${parts}-`, 2, 3);
    // the lifecycles: [status, {referrer, failReason, refundFailReason}]
    const plan = {
      [A]: { referrer: 'shop-A', steps: [['pending'], ['success']] },
      [B]: { referrer: 'shop-B', steps: [['pending'], ['failure', { failReason: 'SLIPPAGE' }],
        ['refund', { failReason: 'SLIPPAGE', refundFailReason: 'MANUAL_REFUND_REQUIRED' }]] },
      [C]: { referrer: 'shop-A', steps: [['pending'], ['success'], ['failure', { failReason: 'DOUBLE_SPEND' }]] }, // a reversal
      [D]: { referrer: null, steps: [['pending'], ['success']], metadata: { tenant: 'acme', tier: 2, note: 'x' } },
      [E]: { referrer: null, steps: [['pending']], metadata: { tenant: 'acme', tier: 3 } },
      [F]: { referrer: null, steps: [['pending'], ['failure', { failReason: 'SOMETHING_NEW' }]] }, // unknownFailReason
    };
    const want = {
      all: null, // every event
      ref: [`${A}:pending`, `${A}:success`, `${C}:pending`, `${C}:success`, `${C}:failure`],
      fail: [`${B}:failure`, `${B}:refund`],
      refund: [`${B}:refund`],
      none: [`${A}:success`, `${C}:success`, `${D}:success`],
      rev: [`${C}:failure`],
      unk: [`${F}:failure`],
      meta: [`${D}:pending`, `${D}:success`],
      combo: [`${C}:failure`],
    };
    const paths = {};
    for (const [name, filters] of Object.entries(ENDPOINTS)) {
      const w = await create(d, { url: rx.url(`/${name}`), filters });
      paths[name] = `/${name}`;
      assert.deepEqual(w.filters, filters, `${name}: the filters as stored`);
    }
    // a dashboard watching with the new keys (live frames only)
    const dash = {};
    const dashFilters = {
      rev: { flags: 'reversal' },
      meta: { metadata: { tenant: 'acme', tier: 2 } },
      shop: { referrers: 'shop-A', status: 'success' },
    };
    for (const [name, filters] of Object.entries(dashFilters)) {
      const c = client(d.wsUrl);
      cleanup.push(() => c.close());
      await c.ready;
      const ack = await subscribed(c, sub(filters, { snapshotLimit: 0 }));
      assert.equal(ack.type, 'subscribe', JSON.stringify(ack));
      assert.equal(ack.status, 'success', JSON.stringify(ack));
      dash[name] = c;
    }
    for (const [id, p] of Object.entries(plan))
      if (p.metadata) assert.equal((await d.post('/v1/requests', { requestId: id, metadata: p.metadata })).status, 201);
    const t0 = Date.now();
    let total = 0;
    for (const [id, p] of Object.entries(plan))
      for (const [k, [status, r = {}]] of p.steps.entries()) {
        const pl = upstreamPayload({ rid: id, status, updatedAt: t0 + k });
        pl.data.referrer = p.referrer;
        if (r.failReason) pl.data.failReason = r.failReason;
        if (r.refundFailReason) pl.data.refundFailReason = r.refundFailReason;
        assert.equal(await ingest(d, KEY, pl), 200, `${id} ${status}`);
        total++;
      }
    const got = (p) => rx.records().filter((x) => x.path === p).map(bodyOf);
    await until(() => got('/all').length >= total, { timeoutMs: 20000, msg: `${total} events to the unfiltered endpoint` });
    const expected = Object.values(want).reduce((n, v) => n + (v ? v.length : 0), 0) + total;
    await until(() => rx.records().length >= expected, { timeoutMs: 20000, msg: `${expected} deliveries` });
    await sleep(500); // nothing extra arrives
    const all = got('/all');
    assert.equal(all.length, total);
    // the bodies carry what the filters matched
    const byKey = new Map(all.map((b) => [key(b), b]));
    assert.equal(byKey.get(`${A}:pending`).data.referrer, 'shop-A');
    assert.equal(byKey.get(`${B}:refund`).data.refundFailReason, 'MANUAL_REFUND_REQUIRED');
    assert.ok(byKey.get(`${C}:failure`).statusrelay.flags.includes('reversal'));
    assert.ok(byKey.get(`${F}:failure`).statusrelay.flags.includes('unknownFailReason'));
    assert.deepEqual(byKey.get(`${D}:pending`).statusrelay.metadata, plan[D].metadata);
    for (const [name, list] of Object.entries(want)) {
      if (list === null) continue;
      const bodies = got(paths[name]);
      // exactly its events ...
      assert.deepEqual(bodies.map(key).sort(), [...list].sort(), `endpoint ${name} ${JSON.stringify(ENDPOINTS[name])}`);
      // ... and per request in seq order
      const perReq = new Map();
      for (const b of bodies) perReq.set(b.data.requestId, [...(perReq.get(b.data.requestId) ?? []), b]);
      for (const [id, bs] of perReq) {
        assert.deepEqual(bs.map(key), list.filter((k) => k.startsWith(`${id}:`)), `${name}: ${id} in order`);
        for (let i = 1; i < bs.length; i++) assert.ok(bs[i].statusrelay.seq > bs[i - 1].statusrelay.seq, `${name}: seq order`);
      }
    }
    // the dashboards: only matching frames
    const dashWant = { rev: [`${C}:failure`], meta: [`${D}:pending`, `${D}:success`], shop: [`${A}:success`, `${C}:success`] };
    for (const [name, list] of Object.entries(dashWant))
      await until(() => dash[name].events().length >= list.length, { msg: `dashboard ${name}` });
    await sleep(300);
    for (const [name, list] of Object.entries(dashWant))
      assert.deepEqual(dash[name].events().map(key).sort(), [...list].sort(), `dashboard ${name}`);
    assert.doesNotMatch(d.proc.log(), /Sanitizer|runtime error|filters unreadable/);
  });
}

test('bad filters: 400 naming the key and its limit; dashboard error frames; the CLI takes the new keys', async () => {
  const { d } = await stack(1);
  const rx = await startReceiver();
  cleanup.push(() => rx.stop());
  const url = rx.url('/x');
  const many = Array.from({ length: 1001 }, (_, i) => `0x${i}`);
  const meta17 = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, i]));
  const cases = [
    [{ colour: ['red'] }, /^unknown filter "colour" \(known: status, requestIds, originChainIds, destinationChainIds, events, users, referrers, failReasons, refundFailReasons, flags, metadata\)$/],
    [{ users: '0xabc' }, /^filters\.users must be a list of at most 1000 values$/],
    [{ users: many }, /^filters\.users: at most 1000 values$/],
    [{ users: ['0xabc', 'has space'] }, /^filters\.users\[1\] is not a wallet: 1 to 256 printable characters without spaces$/],
    [{ users: ['x'.repeat(257)] }, /^filters\.users\[0\] is not a wallet/],
    [{ referrers: [''] }, /^filters\.referrers\[0\] is not a referrer: a string of 1 to 256 bytes without control characters$/],
    [{ failReasons: [7] }, /^filters\.failReasons\[0\] is not a reason code: 1 to 64 printable characters \("N\/A" for none\)$/],
    [{ refundFailReasons: ['A B'] }, /^filters\.refundFailReasons\[0\] is not a reason code/],
    [{ flags: ['reversal', 'Reversal'] }, /^filters\.flags\[1\] is not a known flag \(known: reversal, facts, reorg, unconfirmedDeposit, /],
    [{ metadata: ['a'] }, /^filters\.metadata must be an object of 1 to 16 members, each a string, number or boolean$/],
    [{ metadata: {} }, /^filters\.metadata must be an object of 1 to 16 members/],
    [{ metadata: meta17 }, /^filters\.metadata: at most 16 members and 4096 bytes$/],
    [{ metadata: { big: 'x'.repeat(4100) } }, /^filters\.metadata: at most 16 members and 4096 bytes$/],
    [{ metadata: { ok: 1, nested: { a: 1 } } }, /^filters\.metadata\.nested must be a string, number or boolean$/],
  ];
  for (const [filters, msg] of cases) {
    const r = await d.post('/v1/webhooks', { url, filters });
    assert.equal(r.status, 400, JSON.stringify(filters).slice(0, 200));
    assert.equal(r.body.error.code, 'invalid_request');
    assert.match(r.body.error.message, msg, JSON.stringify(filters).slice(0, 200));
  }
  // PATCH validates the same way, and accepts the keys
  const w = await create(d, { url });
  assert.equal((await patch(d, `/v1/webhooks/${w.id}`, { filters: { flags: ['bogus'] } })).status, 400);
  const p = await patch(d, `/v1/webhooks/${w.id}`, { filters: { users: ['0xAbC'], metadata: { a: true } } });
  assert.equal(p.status, 200, JSON.stringify(p.body));
  assert.deepEqual(p.body.filters, { users: ['0xAbC'], metadata: { a: true } });
  assert.equal((await d.get('/v1/webhooks')).body.webhooks.length, 1, 'no refused endpoint was created');

  // dashboard subscriptions: an error frame with the dashboard's words
  const dashCases = [
    [{ users: [] }, 'users is a wallet or a non-empty list of wallets'],
    [{ flags: 'nope' }, /^unknown flag \(known: reversal, facts, reorg, /],
    [{ metadata: { a: [1] } }, 'metadata members are strings, numbers or booleans'],
    [{ metadata: {} }, 'metadata is an object of 1 to 16 members'],
    [{ referrers: Array.from({ length: 65 }, (_, i) => `r${i}`) }, 'too many values in one filter (at most 64)'],
    [{ colour: 'red' }, /^unknown filter key \(known: id, status, originChainIds, destinationChainIds, events, users, referrers, failReasons, refundFailReasons, flags, metadata\)$/],
  ];
  for (const [filters, msg] of dashCases) {
    const c = client(d.wsUrl);
    cleanup.push(() => c.close());
    await c.ready;
    const e = await subscribed(c, sub(filters));
    assert.equal(e.type, 'error', JSON.stringify(e));
    assert.equal(e.error.code, 'bad_request', JSON.stringify(e));
    if (typeof msg === 'string') assert.equal(e.error.message, msg);
    else assert.match(e.error.message, msg);
    c.close();
  }

  // the CLI: every new option, read back as filters
  const cli = (...args) => spawnSync(BIN, args, { encoding: 'utf8', env: { ...process.env, STATUSRELAY_ADMIN_URL: d.url } });
  const add = cli('webhooks', 'add', rx.url('/cli'), '--users', '0xAbC,bc1q', '--referrers', 'shop-7', '--fail-reasons', 'SLIPPAGE,N/A',
    '--refund-fail-reasons', 'UNKNOWN', '--flags', 'reversal,reorg', '--metadata', '{"tenant":"acme","tier":2}', '--json');
  assert.equal(add.status, 0, add.stderr);
  assert.deepEqual(JSON.parse(add.stdout).filters, { users: ['0xAbC', 'bc1q'], referrers: ['shop-7'], failReasons: ['SLIPPAGE', 'N/A'],
    refundFailReasons: ['UNKNOWN'], flags: ['reversal', 'reorg'], metadata: { tenant: 'acme', tier: 2 } });
  const bad = cli('webhooks', 'add', rx.url('/cli'), '--metadata', '[1]');
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--metadata must be a JSON object/);
  const refusedFlag = cli('webhooks', 'add', rx.url('/cli'), '--flags', 'bogus');
  assert.equal(refusedFlag.status, 2, refusedFlag.stderr);
  assert.match(refusedFlag.stderr, /filters\.flags\[0\] is not a known flag/);
  const upd = cli('webhooks', 'update', JSON.parse(add.stdout).id, '--flags', 'facts', '--json');
  assert.equal(upd.status, 0, `${upd.stderr} ${upd.error} ${upd.signal}`);
  assert.deepEqual(JSON.parse(upd.stdout).filters, { flags: ['facts'] });
});

// A reload (every POST / PATCH / disable) parses only the endpoints whose stored values changed;
// the others keep their parsed filters, headers and keys as they are (issue 25 follow-up,
// BENCHMARKS.md "filter cost"). A PATCH of one endpoint's filters changes its matching at once
// and leaves every other endpoint's matching as it was.
test("PATCH of one endpoint's filters changes its matching only; a reload keeps the unchanged endpoints", async () => {
  const redis = await startRedis();
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, logLevel: 'debug', args: ['--retry-schedule', '0s,200ms,400ms'] });
  cleanup.push(() => d.stop(), () => redis.stop());
  const rx = await startReceiver();
  cleanup.push(() => rx.stop());
  const a = await create(d, { url: rx.url('/a'), filters: { referrers: ['shop-A'] } });
  await create(d, { url: rx.url('/b'), filters: { referrers: ['shop-B'] }, headers: { 'x-tenant': 'b' } });
  await create(d, { url: rx.url('/all'), rateLimit: 50 });
  const reloads = () => [...d.proc.log().matchAll(/webhook endpoints reloaded.* endpoints=(\d+) parsed=(\d+) kept=(\d+)/g)]
    .map((m) => m.slice(1).map(Number));
  // registering the third endpoint parsed it alone (the second and third registrations may
  // share one reload, [3, 2, 1]; a reload with nothing changed parses nothing, [3, 0, 3])
  await until(() => reloads().some(([n]) => n === 3), { msg: 'reload after the third registration' });
  const three = reloads().filter(([n]) => n === 3);
  assert.ok(three.some(([, parsed, kept]) => parsed <= 2 && kept >= 1), `the unchanged endpoints were kept: ${JSON.stringify(three)}`);
  assert.ok(three.every(([, parsed, kept]) => parsed + kept === 3 && parsed <= 2), `never all parsed again: ${JSON.stringify(three)}`);
  let t = Date.now();
  const send = async (id, referrer) => {
    const pl = upstreamPayload({ rid: id, status: 'pending', updatedAt: t++ });
    pl.data.referrer = referrer;
    assert.equal(await ingest(d, KEY, pl), 200);
  };
  const got = (p) => rx.records().filter((x) => x.path === p).map((x) => bodyOf(x).data.requestId);
  const [R1, R2, R3] = [rid('pf1'), rid('pf2'), rid('pf3')];
  await send(R1, 'shop-A');
  await until(() => got('/all').length >= 1 && got('/a').length >= 1, { msg: 'R1 delivered' });
  // PATCH a's filters: only a is parsed again
  const before = reloads().length;
  const p = await patch(d, `/v1/webhooks/${a.id}`, { filters: { referrers: ['shop-B'] } });
  assert.equal(p.status, 200, JSON.stringify(p.body));
  await until(() => reloads().slice(before).some(([, parsed]) => parsed > 0), { msg: 'reload after the PATCH' });
  const after = reloads().slice(before);
  assert.ok(after.some((x) => x.join() === '3,1,2'), `the PATCH parsed the patched endpoint only: ${JSON.stringify(after)}`);
  assert.ok(after.every(([n, parsed]) => n === 3 && parsed <= 1), `no other endpoint parsed again: ${JSON.stringify(after)}`);
  await send(R2, 'shop-B');
  await send(R3, 'shop-A');
  await until(() => got('/all').length >= 3, { timeoutMs: 20000, msg: 'R2, R3 to the unfiltered endpoint' });
  await until(() => got('/b').length >= 1 && got('/a').length >= 2, { timeoutMs: 20000, msg: 'R2 to a and b' });
  await sleep(500); // nothing extra arrives
  assert.deepEqual(got('/a'), [R1, R2], 'a: shop-A before the PATCH, shop-B after');
  assert.deepEqual(got('/b'), [R2], 'b keeps its filters');
  assert.deepEqual(got('/all').sort(), [R1, R2, R3].sort(), 'the unfiltered endpoint gets everything');
  // b's kept values still hold: its custom header, and the other endpoint's rateLimit in the API
  const hb = rx.records().find((x) => x.path === '/b');
  assert.equal(hb.headers['x-tenant'], 'b');
  assert.equal((await d.get('/v1/webhooks')).body.webhooks.find((w) => w.url === rx.url('/all')).rateLimit, 50);
  assert.doesNotMatch(d.proc.log(), /Sanitizer|runtime error|filters unreadable/);
});
