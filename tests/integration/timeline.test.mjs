// timeline.test.mjs - a request's timeline costs no key of its own while it is short (issue
// 26, "fewer keys per event"; issue 24, Redis memory per request; store/tl_lib.lua and
// store/watch_lib.lua tl_push): the stream ids of its events wait in its hash's "tl" field
// (the first id, then hexadecimal differences) until they no longer fit in 64 bytes, then the list {P}:tl:<id> takes
// them, and every reader - GET /v1/events?requestId=, the dashboard's history, the request
// retention sweep - reads the field, the list, and what an older version wrote ("tl1", a
// list, both; during a rolling upgrade next to a "tl" field). Real redis-server and daemon
// on loopback.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { until } from './lib/proc.mjs';
import { ingest, upstreamPayload, rid } from './lib/hooks.mjs';
import { client } from './lib/dash_client.mjs';

const KEY = 'timeline-test-api-key';
const cleanup = [];
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });

async function stack({ args = [] } = {}) {
  const redis = await startRedis();
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, args });
  cleanup.push(() => d.stop(), () => redis.stop());
  return { redis, d };
}

async function send(d, p) {
  assert.equal(await ingest(d, KEY, upstreamPayload(p)), 200, 'ingest accepted');
}

async function history(d, id) {
  const c = client(d.wsUrl);
  cleanup.push(() => c.close());
  await c.ready;
  c.send({ type: 'history', filters: { id } });
  const h = await c.wait((f) => f.type === 'history', 'history answer');
  c.close();
  assert.equal(h.status, 'success');
  return h.data.events.map((f) => f.data.status);
}

const statuses = async (d, id) =>
  (await d.get(`/v1/events?requestId=${id}`)).body.events.map((e) => e.status);

// the stream ids of request r's events, oldest first (as the stream holds them)
async function sidsOf(redis, r) {
  const all = await redis.cmd('XRANGE', '{statusrelay}:events', '-', '+');
  return all.filter(([, f]) => f[f.indexOf('rid') + 1] === r).map(([sid]) => sid);
}

test('a single-event request has no timeline key; its events read back before and after the second', async () => {
  const { redis, d } = await stack();
  const r = rid('one');
  const tl = `{statusrelay}:tl:${r}`, req = `{statusrelay}:req:${r}`;
  await send(d, { rid: r, status: 'pending' });
  assert.equal(await redis.cmd('EXISTS', tl), 0, 'no timeline list for one event');
  const f = await redis.cmd('HGET', req, 'tl');
  assert.match(f, /^\d+-\d+$/, 'the one stream id is in the hash, as it is');
  assert.equal(await redis.cmd('HEXISTS', req, 'tl1'), 0);
  assert.deepEqual(await statuses(d, r), ['pending']);
  assert.deepEqual(await history(d, r), ['pending']);
  assert.equal((await d.get(`/v1/requests/${r}`)).body.status, 'pending');

  await send(d, { rid: r, status: 'success' });
  assert.equal(await redis.cmd('EXISTS', tl), 0, 'two events: still no list');
  assert.ok((await redis.cmd('HGET', req, 'tl')).startsWith(f + ','), 'the first event keeps its place');
  assert.deepEqual(await statuses(d, r), ['pending', 'success']);
  assert.deepEqual(await history(d, r), ['pending', 'success']);
});

test('a one-entry timeline list of an older version keeps working and grows', async () => {
  const { redis, d } = await stack();
  const r = rid('old');
  const tl = `{statusrelay}:tl:${r}`, req = `{statusrelay}:req:${r}`;
  await send(d, { rid: r, status: 'pending' });
  // the layout an older version wrote: the list, no field
  const [sid] = await sidsOf(redis, r);
  await redis.cmd('RPUSH', tl, sid);
  await redis.cmd('HDEL', req, 'tl');
  assert.deepEqual(await statuses(d, r), ['pending']);
  assert.deepEqual(await history(d, r), ['pending']);
  await send(d, { rid: r, status: 'success' });
  assert.equal(await redis.cmd('HEXISTS', req, 'tl'), 0, 'a request with a list keeps it');
  assert.equal((await redis.cmd('LRANGE', tl, 0, -1)).length, 2);
  assert.deepEqual(await statuses(d, r), ['pending', 'success']);
});

test('the event retention age drops the one stream id from the hash as it drops list entries', async () => {
  const { redis, d } = await stack({ args: ['--event-retention-age', '3s'] });
  const r = rid('age1');
  const req = `{statusrelay}:req:${r}`;
  await send(d, { rid: r, status: 'pending' });
  assert.deepEqual(await statuses(d, r), ['pending']);
  await until(async () => (await redis.cmd('XLEN', '{statusrelay}:events')) === 0,
    { timeoutMs: 15000, msg: 'stream trimmed by age' });
  assert.deepEqual(await statuses(d, r), []);
  assert.equal(await redis.cmd('HEXISTS', req, 'tl'), 0, 'the stale id repaired on read');
  await send(d, { rid: r, status: 'success' });
  assert.deepEqual(await statuses(d, r), ['success']);
  assert.equal(await redis.cmd('EXISTS', `{statusrelay}:tl:${r}`), 0, 'one event again: no list');
});

test('an older version that wrote the second event into a new list: the first (tl1) is still read', async () => {
  const { redis, d } = await stack();
  const r = rid('mixed');
  const tl = `{statusrelay}:tl:${r}`, req = `{statusrelay}:req:${r}`;
  await send(d, { rid: r, status: 'pending' });
  await send(d, { rid: r, status: 'success' });
  // what an older process leaves behind during a rolling upgrade: it RPUSHed the second
  // event's id into a new list and never knew about tl1
  const ids = await sidsOf(redis, r);
  assert.equal(ids.length, 2);
  await redis.cmd('HDEL', req, 'tl');
  await redis.cmd('HSET', req, 'tl1', ids[0]);
  await redis.cmd('RPUSH', tl, ids[1]);
  assert.deepEqual(await statuses(d, r), ['pending', 'success'], 'both events, in order');
});

// ---- issue 24: the timeline in the hash while it is short ----------------------------------

const STEPS = ['waiting', 'pending', 'submitted', 'success'];

test('a request with 4 events has no timeline key; the events and the history read all 4 in order', async () => {
  const { redis, d } = await stack();
  const r = rid('four');
  const req = `{statusrelay}:req:${r}`;
  const t = Date.now();
  for (let i = 0; i < STEPS.length; i++) await send(d, { rid: r, status: STEPS[i], updatedAt: t + i });
  assert.equal(await redis.cmd('EXISTS', `{statusrelay}:tl:${r}`), 0, 'no {P}:tl: key');
  const f = await redis.cmd('HGET', req, 'tl');
  assert.equal(f.split(',').length, 4, `four ids in the field (${f})`);
  assert.ok(f.length <= 64);
  assert.equal(await redis.cmd('HEXISTS', req, 'tl1'), 0);
  const ev = (await d.get(`/v1/events?requestId=${r}`)).body.events;
  assert.deepEqual(ev.map((e) => e.status), STEPS);
  assert.deepEqual(ev.map((e) => e.seq), [1, 2, 3, 4]);
  assert.deepEqual(ev.map((e) => e.streamId), await sidsOf(redis, r), 'the stream ids decoded exactly');
  assert.deepEqual(await history(d, r), STEPS);
  // paging after an event of the field
  const rest = (await d.get(`/v1/events?requestId=${r}&after=${ev[1].streamId}`)).body.events;
  assert.deepEqual(rest.map((e) => e.status), STEPS.slice(2));
});

test('ids of trimmed events are cut from the field as it is read', async () => {
  const { redis, d } = await stack();
  const r = rid('cut');
  const req = `{statusrelay}:req:${r}`;
  const t = Date.now();
  for (let i = 0; i < 3; i++) await send(d, { rid: r, status: STEPS[i], updatedAt: t + i });
  const sids = await sidsOf(redis, r);
  // the stream's bounds trim the first event (as STATUSRELAY_EVENT_RETENTION would)
  await redis.cmd('XTRIM', '{statusrelay}:events', 'MINID', sids[1]);
  const ev = (await d.get(`/v1/events?requestId=${r}`)).body.events;
  assert.deepEqual(ev.map((e) => e.streamId), sids.slice(1));
  assert.equal((await redis.cmd('HGET', req, 'tl')).split(',').length, 2, 'the field rewritten without it');
  assert.deepEqual((await d.get(`/v1/events?requestId=${r}`)).body.events.map((e) => e.streamId), sids.slice(1));
  assert.deepEqual(await history(d, r), STEPS.slice(1, 3));
});

// n events of request r: status changes back and forth, each a new event
async function events(d, r, n) {
  const t = Date.now();
  for (let i = 0; i < n; i++)
    await send(d, { rid: r, status: i % 2 ? 'submitted' : 'pending', updatedAt: t + i, inTx: ['0x' + (i + 1).toString(16).padStart(64, '0')] });
}

async function allEvents(d, r) {
  const out = [];
  let after = '';
  for (;;) {
    const b = (await d.get(`/v1/events?requestId=${r}&limit=1000${after ? `&after=${after}` : ''}`)).body;
    out.push(...b.events);
    if (b.events.length < 1000) return out;
    after = b.events[b.events.length - 1].streamId;
  }
}

test('a request with 30 events gets its list when the field is full and reads the same', async () => {
  const { redis, d } = await stack();
  const r = rid('thirty');
  const tl = `{statusrelay}:tl:${r}`, req = `{statusrelay}:req:${r}`;
  let moved = 0;
  const t = Date.now();
  for (let i = 0; i < 30; i++) {
    await send(d, { rid: r, status: i % 2 ? 'submitted' : 'pending', updatedAt: t + i, inTx: ['0x' + (i + 1).toString(16).padStart(64, '0')] });
    const f = await redis.cmd('HGET', req, 'tl');
    if (f !== null) assert.ok(f.length <= 64, `the field stays within 64 bytes (${f.length})`);
    if (!moved && f === null) moved = i + 1;
    assert.ok(f === null || await redis.cmd('EXISTS', tl) === 0, 'the field or the list, not both');
  }
  // the first id's 15 bytes, then at least 2 bytes an id (growing differences to the first):
  // 22 ids at most fit, however close the events
  assert.ok(moved > 4 && moved <= 30, `the list from the event that did not fit (${moved})`);
  const sids = await sidsOf(redis, r);
  assert.equal(sids.length, 30);
  assert.deepEqual(await redis.cmd('LRANGE', tl, 0, -1), sids, 'the list holds every id, in order');
  const ev = await allEvents(d, r);
  assert.deepEqual(ev.map((e) => e.streamId), sids);
  assert.deepEqual(ev.map((e) => e.seq), Array.from({ length: 30 }, (_, i) => i + 1));
  assert.equal((await history(d, r)).length, 30);
});

test('the timeline keeps at most 200 ids: the oldest go', async () => {
  const { redis, d } = await stack();
  const r = rid('cap');
  await events(d, r, 205);
  const sids = await sidsOf(redis, r);
  assert.equal(sids.length, 205);
  const list = await redis.cmd('LRANGE', `{statusrelay}:tl:${r}`, 0, -1);
  assert.deepEqual(list, sids.slice(5), 'the newest 200');
  const ev = await allEvents(d, r);
  assert.equal(ev.length, 200);
  assert.equal(ev[0].seq, 6);
  assert.equal(ev[199].seq, 205);
});

test('layouts of 0d1e783 are read and grow: tl1 alone, a list alone, tl1 with a list', async () => {
  const { redis, d } = await stack();
  const a = rid('tl1'), b = rid('list'), c = rid('both');
  for (const r of [a, b, c]) await send(d, { rid: r, status: 'waiting' });
  for (const r of [b, c]) {
    await send(d, { rid: r, status: 'pending' });
    await send(d, { rid: r, status: 'submitted' });
  }
  // as 0d1e783 left them (redis.cmd): a's one id in tl1; b's three in a list; c: tl1 and a
  // list of the two later ones (an older version's second event)
  const [sa] = await sidsOf(redis, a), sb = await sidsOf(redis, b), sc = await sidsOf(redis, c);
  await redis.cmd('HDEL', `{statusrelay}:req:${a}`, 'tl');
  await redis.cmd('HSET', `{statusrelay}:req:${a}`, 'tl1', sa);
  await redis.cmd('HDEL', `{statusrelay}:req:${b}`, 'tl');
  await redis.cmd('RPUSH', `{statusrelay}:tl:${b}`, ...sb);
  await redis.cmd('HDEL', `{statusrelay}:req:${c}`, 'tl');
  await redis.cmd('HSET', `{statusrelay}:req:${c}`, 'tl1', sc[0]);
  await redis.cmd('RPUSH', `{statusrelay}:tl:${c}`, ...sc.slice(1));
  assert.deepEqual(await statuses(d, a), ['waiting']);
  assert.deepEqual(await history(d, a), ['waiting']);
  assert.deepEqual(await statuses(d, b), ['waiting', 'pending', 'submitted']);
  assert.deepEqual(await history(d, b), ['waiting', 'pending', 'submitted']);
  assert.deepEqual(await statuses(d, c), ['waiting', 'pending', 'submitted']);
  assert.deepEqual(await history(d, c), ['waiting', 'pending', 'submitted']);
  for (const r of [a, b, c]) await send(d, { rid: r, status: 'success' });
  // a: tl1 becomes the field; b, c: their lists grow
  assert.equal(await redis.cmd('HEXISTS', `{statusrelay}:req:${a}`, 'tl1'), 0);
  assert.equal((await redis.cmd('HGET', `{statusrelay}:req:${a}`, 'tl')).split(',').length, 2);
  assert.equal(await redis.cmd('LLEN', `{statusrelay}:tl:${b}`), 4);
  assert.equal(await redis.cmd('LLEN', `{statusrelay}:tl:${c}`), 3);
  assert.deepEqual(await statuses(d, a), ['waiting', 'success']);
  assert.deepEqual(await statuses(d, b), ['waiting', 'pending', 'submitted', 'success']);
  assert.deepEqual(await statuses(d, c), ['waiting', 'pending', 'submitted', 'success']);
  assert.deepEqual(await history(d, c), ['waiting', 'pending', 'submitted', 'success']);
});

test('rolling upgrade: what an older process adds next to a "tl" field (tl1, then a list) is read in order', async () => {
  const { redis, d } = await stack();
  const r = rid('upgrade');
  const tl = `{statusrelay}:tl:${r}`, req = `{statusrelay}:req:${r}`;
  await events(d, r, 4);
  const sids = await sidsOf(redis, r);
  // the field as this version wrote it for the first two; the third as an older process
  // writes an event next to it (it sees no tl1: tl1 = its id), the fourth as its next one
  // (RPUSH of tl1 and its id, HDEL tl1)
  const two = await redis.cmd('HGET', req, 'tl');
  await redis.cmd('HSET', req, 'tl', two.split(',').slice(0, 2).join(','));
  await redis.cmd('HSET', req, 'tl1', sids[2]);
  assert.deepEqual((await allEvents(d, r)).map((e) => e.streamId), sids.slice(0, 3), 'field and tl1');
  await redis.cmd('HDEL', req, 'tl1');
  await redis.cmd('RPUSH', tl, sids[2], sids[3]);
  assert.deepEqual((await allEvents(d, r)).map((e) => e.streamId), sids, 'field and list');
  assert.equal((await history(d, r)).length, 4);
  // this version writes on: into the field while it fits, then one list in stream order
  await events(d, r, 30);
  const all = await sidsOf(redis, r);
  assert.equal(all.length, 34);
  assert.deepEqual((await allEvents(d, r)).map((e) => e.streamId), all);
  assert.equal(await redis.cmd('HEXISTS', req, 'tl'), 0);
  assert.deepEqual(await redis.cmd('LRANGE', tl, 0, -1), all, 'merged into one list, in order');
});
