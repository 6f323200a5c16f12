// feed.test.mjs - the changes feed (DESIGN data flow source (c), "Discovery and backfill"):
// /requests/v3 sorted by updatedAt from a cursor kept in Redis, scoped to the API key, one
// process at a time (a lease taken over when the holder dies); requests of the key need no
// per-request status polls while the feed is healthy; backfill reads a window again.
// Real redis-server, the simulator (which honours sortBy=updatedAt, startTimestamp,
// continuation and the apiKey scope), daemons and a webhook receiver on loopback.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { BIN, until as untilOnly } from './lib/proc.mjs';
import { startRedis, startDaemon as startOnly } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';
import { startReceiver } from './lib/hooks.mjs';

const KEY = 'feed-key';
let redis, sim;

before(async () => {
  redis = await startRedis();
  sim = await startSim({ apiKey: KEY, seed: 24, rateLimit: 0 });
});
after(async () => {
  await sim?.stop();
  await redis?.stop();
});

// A timeout tells why: the CI shows only the test output, so a wait that times out adds the
// last 40 lines of the log of every daemon the test started (a killed one too) and the feed's
// keys in Redis (lease holder, health TTL, cursor) of each prefix.
const daemons = [];
beforeEach(() => { daemons.length = 0; });
async function startDaemon(opts) {
  const d = await startOnly(opts);
  daemons.push(d);
  return d;
}
async function feedState() {
  const out = [];
  for (const p of new Set(daemons.map((d) => d.env.STATUSRELAY_REDIS_PREFIX))) {
    const t = `{${p}}`;
    out.push(`${t}:feedl=${await redis.cmd('GET', `${t}:feedl`)} ${t}:feedok pttl=${await redis.cmd('PTTL', `${t}:feedok`)} ` +
      `${t}:feedc at=${await redis.cmd('HGET', `${t}:feedc`, 'at')} ${t}:feedr=${await redis.cmd('GET', `${t}:feedr`)} now=${Date.now()}`);
  }
  return out.join('\n');
}
async function until(fn, opts) {
  try {
    return await untilOnly(fn, opts);
  } catch (e) {
    const logs = daemons.map((d) => `--- ${d.proc.name} (${d.proc.logPath}), last 40 lines:\n` +
      d.proc.log().trimEnd().split('\n').slice(-40).join('\n'));
    e.message += `\n${await feedState().catch((x) => `(redis: ${x.message})`)}\n${logs.join('\n')}`;
    throw e;
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const simReq = (id) => sim.control(`/requests/${id}`, null, 'GET');
const PATH = ['waiting', 'pending', 'submitted', 'success'];

async function makeRequests(n, extra = {}) {
  const ids = [];
  for (let i = 0; i < n; i++) {
    const r = await sim.control('/requests', {
      path: PATH, stepMs: 0, autoHashes: true, originChainId: 10, destinationChainId: 137, ...extra,
    });
    ids.push(r.id);
  }
  return ids;
}

function feedDaemon(prefix, env = {}, name) {
  return startDaemon({
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrlWithKey, apiKey: KEY, name,
    env: {
      STATUSRELAY_REDIS_PREFIX: prefix,
      STATUSRELAY_DISCOVER: 'true', STATUSRELAY_DISCOVER_INTERVAL: '1s',
      ...env,
    },
  });
}

async function statusOf(d, id) {
  const r = await d.get(`/v1/requests/${id}`);
  return r.status === 200 ? r.body.status : null;
}

async function allAt(d, ids, status, timeoutMs = 15000) {
  await until(async () => {
    const off = [];
    for (const id of ids) {
      const s = await statusOf(d, id);
      if (s === status) continue;
      // where the request stands in Redis: its poll tier (pt), whether the feed sees it (fk)
      const t = `{${d.env.STATUSRELAY_REDIS_PREFIX}}`;
      const [pt, fk, w] = await redis.cmd('HMGET', `${t}:req:${id}`, 'pt', 'fk', 'watch').catch(() => []);
      off.push(`${id.slice(0, 10)}=${s} (pt=${pt} fk=${fk} watch=${w} due=${await redis.cmd('ZSCORE', `${t}:poll`, id).catch(() => '?')})`);
    }
    if (off.length > 0) throw new Error(`${off.length} not: ${off.join(' ')}`);
    return true;
  }, { msg: `${ids.length} requests at ${status}`, timeoutMs, stepMs: 200 });
}

async function statusPolls(ids) {
  let n = 0;
  for (const id of ids) n += (await simReq(id)).statusPolls;
  return n;
}

const hooked = (rx) => rx.records().map((x) => JSON.parse(x.body));

test('first start reads the look-back window of the key, nothing older, nothing of another key', async () => {
  const now = Date.now();
  const [recent, old] = await makeRequests(2);
  await sim.control(`/requests/${recent}/status`, { status: 'pending', updatedAt: now - 30 * 60000 });
  await sim.control(`/requests/${old}/status`, { status: 'pending', updatedAt: now - 2 * 3600000 });
  const [other] = await makeRequests(1, { apiKey: 'another-key' });
  const d = await feedDaemon('feedfirst', { STATUSRELAY_DISCOVER_LOOKBACK: '1h' });
  try {
    await until(async () => (await statusOf(d, recent)) === 'pending',
      { msg: 'the request changed 30 min ago is found', timeoutMs: 15000 });
    await until(() => /changes feed: first start/.test(d.proc.log()), { msg: 'first start logged' });
    // the feed's item carries the request's facts: stored with it, no read by id needed
    const facts = await until(async () => (await d.get(`/v1/requests/${recent}`)).body?.request,
      { msg: 'facts from the feed page', timeoutMs: 10000 });
    assert.ok(facts.user && Array.isArray(facts.inTxs), JSON.stringify(facts).slice(0, 200));
    await sleep(2500); // two more sweeps
    assert.equal((await d.get(`/v1/requests/${old}`)).status, 404, 'older than the look-back');
    assert.equal((await d.get(`/v1/requests/${other}`)).status, 404, 'another key: not in the feed');
    const cursor = Number(await redis.cmd('HGET', '{feedfirst}:feedc', 'at'));
    assert.ok(cursor >= now - 30 * 60000, `cursor in Redis: ${cursor}`);
  } finally {
    await d.stop();
  }
});

test('a daemon down while 20 requests of the key change: every change delivered within 30 s of the restart, no status polls', async () => {
  const rx = await startReceiver();
  let d = await feedDaemon('feeddown', {}, 'feed-down-1');
  try {
    assert.equal((await d.post('/v1/webhooks', { url: rx.url('/h') })).status, 201);
    const ids = await makeRequests(20);
    await allAt(d, ids, 'waiting');
    await sleep(1500);
    const polls0 = await statusPolls(ids);
    await d.stop();
    for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
    await sleep(10000);
    for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
    await sleep(10000);
    const t0 = Date.now();
    d = await feedDaemon('feeddown', {}, 'feed-down-2');
    await until(() => {
      const b = hooked(rx);
      return ids.every((id) => b.some((x) => x.data.requestId === id && x.data.status === 'submitted'));
    }, { msg: 'every change delivered', timeoutMs: 30000, stepMs: 200 });
    const dt = Date.now() - t0;
    console.log(`# 20 requests: every change delivered ${dt} ms after the restart`);
    assert.ok(dt < 30000);
    for (const id of ids) assert.equal(await statusOf(d, id), 'submitted');
    // the pending step happened while the daemon was down: it is no event (the feed only
    // sees a request's current state), but nothing the feed returned is applied twice
    const b = hooked(rx);
    // (facts follow-ups - the same status again, flagged "facts": docs/facts.md - aside)
    for (const id of ids) {
      const mine = b.filter((x) => x.data.requestId === id && !(x.statusrelay.flags ?? []).includes('facts'))
        .map((x) => x.data.status);
      assert.deepEqual(mine, ['waiting', 'submitted'], `${id}: ${mine}`);
      // a change of a request already known carries the item's facts itself (written before
      // its status): no follow-up after it
      const sub = b.filter((x) => x.data.requestId === id && x.data.status === 'submitted');
      assert.equal(sub.length, 1, `${id}: one submitted event, no follow-up: ${JSON.stringify(sub.map((x) => x.statusrelay))}`);
      assert.ok(sub[0].statusrelay.request?.user, `${id}: the submitted event carries the facts`);
    }
    await sleep(3000);
    assert.equal(await statusPolls(ids) - polls0, 0, 'no per-request status polls');
  } finally {
    await d.stop();
    await rx.stop();
  }
});

test('kill -9 of the feed holder: the other process continues from the cursor, nothing missed, nothing applied twice', async () => {
  const env = { STATUSRELAY_LEADER_LEASE: '3s' };
  // no upstream websocket: only the feed (and polls, while it is not healthy) find changes
  const opts = (name) => ({
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: 'ws://127.0.0.1:9/', apiKey: KEY, name,
    env: { STATUSRELAY_REDIS_PREFIX: 'feedkill', STATUSRELAY_DISCOVER: 'true',
      STATUSRELAY_DISCOVER_INTERVAL: '1s', ...env },
  });
  const first = await startDaemon(opts('feed-kill-a'));
  await sleep(2000); // the first one takes the lease
  const second = await startDaemon(opts('feed-kill-b'));
  const holds = (d) => /changes feed lease taken/.test(d.proc.log());
  const [a, b] = holds(second) && !holds(first) ? [second, first] : [first, second];
  try {
    const ids = await makeRequests(10);
    await allAt(b, ids, 'waiting');
    // one reader at a time: over 8 s both processes up, about 8 pages, not 16
    await sim.control('/stats/reset', {});
    await sleep(8000);
    const pages = (await sim.stats()).http.byPath['/requests/v3'];
    const calls = Object.values(pages ?? {}).reduce((n, x) => n + x, 0);
    console.log(`# /requests/v3 calls in 8 s with two processes: ${calls}`);
    assert.ok(calls <= 11, `/requests/v3 calls in 8 s with two processes: ${calls}`);
    await a.stop('SIGKILL');
    for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
    await allAt(b, ids, 'pending', 30000);
    // the survivor moves the deployment's cursor past the changes made after the kill
    const changed = Math.max(...await Promise.all(ids.map(async (id) => (await simReq(id)).updatedAt)));
    await until(async () => Number(await redis.cmd('HGET', '{feedkill}:feedc', 'at')) >= changed,
      { msg: `the cursor passes ${changed}`, timeoutMs: 30000 });
    assert.ok(holds(b), 'the survivor holds the feed');
    for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
    await allAt(b, ids, 'submitted', 15000);
    await sleep(2500); // more sweeps over the same window: the overlap is deduped
    const m = await (await fetch(`${b.url}/metrics`)).text();
    assert.match(m, /^statusrelay_feed_items_total\{outcome="skipped"\} [1-9]/m, 'items seen again are counted, not applied');
    assert.match(m, /^statusrelay_feed_lease_held 1$/m);
    assert.match(m, /^statusrelay_feed_healthy 1$/m);
    for (const id of ids) {
      const ev = (await b.get(`/v1/events?requestId=${id}&limit=100`)).body.events;
      // the status changes (facts follow-ups, the same status again: docs/facts.md, aside)
      const st = ev.filter((e) => e.previousStatus !== e.status).map((e) => e.data?.status ?? e.status);
      assert.deepEqual(st, ['waiting', 'pending', 'submitted'], `${id}: ${JSON.stringify(ev)}`);
      // at most one follow-up per status change, right after events of its status
      assert.ok(ev.filter((e, i) => e.previousStatus === e.status && i > 0 && ev[i - 1].previousStatus === ev[i - 1].status)
        .length === 0, `${id}: one follow-up per change at most`);
    }
    const last = Math.max(...await Promise.all(ids.map(async (id) => (await simReq(id)).updatedAt)));
    const cursor = Number(await redis.cmd('HGET', '{feedkill}:feedc', 'at'));
    assert.ok(cursor >= last, `cursor ${cursor} >= last change ${last}`);
  } finally {
    await b.stop();
    await a.stop('SIGKILL').catch(() => {});
  }
});

test('a takeover while every watched request is due for a poll: the new holder\'s feed still gets its pages from the budget', async () => {
  // The CI flake of the test above: after the kill the feed is not healthy, so the survivor
  // makes every watched request of the key due for a status poll (feed_restore.lua, the
  // websocket down: a poll a second each) and its poller claimed every call of the budget at
  // each tick, just before the feed's reservation of the same tick: the new holder's pages
  // waited as long as polls were due, and the changes came only as fast as polls of every
  // request at the budget's pace. Here the budget is small (30/min: 3 at once, then 0.45/s)
  // and ~100 requests of the key are watched, so polls alone take minutes to reach all of the
  // 10 changed requests; the feed (priority (1) of the budget) finds them with a page or two
  // (4 s apart at this budget: about 13 s at worst after the kill, whatever the CPU).
  const opts = (name) => ({
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: 'ws://127.0.0.1:9/', apiKey: KEY, name,
    env: { STATUSRELAY_REDIS_PREFIX: 'feedstarve', STATUSRELAY_DISCOVER: 'true',
      STATUSRELAY_DISCOVER_INTERVAL: '1s', STATUSRELAY_LEADER_LEASE: '3s',
      STATUSRELAY_UPSTREAM_BUDGET: '30' },
  });
  const ids = await makeRequests(50);
  const first = await startDaemon(opts('feed-starve-a'));
  await sleep(2000);
  const second = await startDaemon(opts('feed-starve-b'));
  const holds = (d) => /changes feed lease taken/.test(d.proc.log());
  const [a, b] = holds(second) && !holds(first) ? [second, first] : [first, second];
  try {
    await allAt(b, ids, 'waiting', 30000);
    await until(async () => /^statusrelay_feed_healthy 1$/m.test(await (await fetch(`${b.url}/metrics`)).text()),
      { msg: 'the feed healthy before the kill' });
    await sleep(2000);
    const changed = ids.filter((_, i) => i % 5 === 2);
    await a.stop('SIGKILL');
    const t0 = Date.now();
    for (const id of changed) await sim.control(`/requests/${id}/advance`, {});
    await allAt(b, changed, 'pending', 25000);
    console.log(`# takeover with every request due for a poll: 10 changes seen ${Date.now() - t0} ms after the kill`);
    await until(async () => /^statusrelay_feed_healthy 1$/m.test(await (await fetch(`${b.url}/metrics`)).text()),
      { msg: 'the survivor\'s feed healthy again', timeoutMs: 10000 });
    assert.ok(holds(b), 'the survivor holds the feed');
  } finally {
    await b.stop();
    await a.stop('SIGKILL').catch(() => {});
  }
});

test('backfill of a window finds requests never seen before; the CLI prints its progress', async () => {
  const d = await startDaemon({
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: 'ws://127.0.0.1:9/', apiKey: KEY,
    env: { STATUSRELAY_REDIS_PREFIX: 'feedbf' }, // discovery off: nobody reads the feed
  });
  try {
    const t0 = Date.now() - 1000;
    const ids = await makeRequests(3);
    for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
    for (const id of ids) assert.equal((await d.get(`/v1/requests/${id}`)).status, 404);
    const r = await d.post('/v1/backfill', { since: t0 });
    assert.equal(r.status, 202, r.text);
    assert.match(r.body.backfillId, /^bf_[0-9a-f]+$/);
    assert.equal(r.body.since, t0);
    assert.equal(r.body.until, null);
    const done = await until(async () => {
      const g = await d.get(`/v1/backfill/${r.body.backfillId}`);
      return g.status === 200 && g.body.done ? g.body : null;
    }, { msg: 'backfill done', timeoutMs: 15000 });
    assert.equal(done.error, null);
    assert.ok(done.pages >= 1 && done.items >= 3 && done.applied >= 3, JSON.stringify(done));
    for (const id of ids) assert.equal(await statusOf(d, id), 'pending');
    assert.equal((await d.get('/v1/backfill/bf_0123')).status, 404);
    assert.equal((await d.post('/v1/backfill', { since: 'yesterday' })).status, 400);
    assert.equal((await d.post('/v1/backfill', { since: t0, until: t0 - 1 })).status, 400);

    // the CLI: a window with requests the relay has not seen, progress lines until done
    const more = await makeRequests(2);
    const cli = spawnSync(BIN, ['backfill', '--since', '10m', '--admin-url', d.url],
      { encoding: 'utf8', timeout: 30000 });
    assert.equal(cli.status, 0, cli.stderr);
    assert.match(cli.stdout, /^backfill bf_[0-9a-f]+ started/m);
    assert.match(cli.stdout, /^backfill bf_[0-9a-f]+: pages=\d+ items=\d+ applied=\d+ done$/m);
    for (const id of more) assert.equal(await statusOf(d, id), 'waiting');
  } finally {
    await d.stop();
  }
});

test('with 3 partitions and the upstream websocket down, a healthy feed spares the status polls of the requests of the key', async () => {
  const env = { STATUSRELAY_REDIS_PREFIX: 'feedparts', STATUSRELAY_PARTITIONS: '3',
    STATUSRELAY_DISCOVER_INTERVAL: '2s' }; // healthy: 4 s
  const d = await startDaemon({
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: 'ws://127.0.0.1:9/', apiKey: KEY,
    env: { ...env, STATUSRELAY_DISCOVER: 'true' },
  });
  // a second process with the key but without discovery claims polls too: it must know the
  // feed is healthy
  const d2 = await startDaemon({
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: 'ws://127.0.0.1:9/', apiKey: KEY, env,
  });
  try {
    const ids = await makeRequests(9);
    const [notKey] = await makeRequests(1, { apiKey: 'another-key' });
    assert.equal((await d.post('/v1/requests', { requestId: notKey })).status, 201);
    await allAt(d, ids, 'waiting');
    for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
    await allAt(d, ids, 'pending', 20000);
    // the second process learns the feed's health with its lease look (every lease/3)
    await until(async () => /^statusrelay_feed_healthy 1$/m.test(await (await fetch(`${d2.url}/metrics`)).text()),
      { msg: 'the process without discovery knows the feed is healthy' }).catch(() => {}); // (the assertions below tell)
    await sleep(1500); // polls it claimed before are answered
    const p0 = await statusPolls(ids);
    const q0 = (await simReq(notKey)).statusPolls;
    await sleep(6000); // the websocket is down: without the feed, a poll a second each
    assert.equal(await statusPolls(ids) - p0, 0, `no status polls for the requests of the key\n${[d, d2].map((x) => x.proc.log().split('\n').filter((l) => /feed|still down|poll/.test(l)).slice(-8).join('\n')).join('\n--\n')}`);
    const q = (await simReq(notKey)).statusPolls - q0;
    assert.ok(q >= 2, `a request of another key is still polled: ${q}`);
    assert.equal(await statusOf(d, notKey), 'waiting');
  } finally {
    await d2.stop();
    await d.stop();
  }
});
