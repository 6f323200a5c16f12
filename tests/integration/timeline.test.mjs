// timeline.test.mjs - a request's timeline costs no key of its own until its second event
// (issue 26, "fewer keys per event"; store/watch_lib.lua tl_push): the stream id of a request's
// only event waits in its hash's "tl1", the second event creates {P}:tl:<id> from both, and
// every reader - GET /v1/events?requestId=, the dashboard's history, the request retention
// sweep - reads the field when the list is absent. A timeline list of one entry written by an
// older version keeps working. Real redis-server and daemon on loopback.
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

test('a single-event request has no timeline key; its events read back before and after the second', async () => {
  const { redis, d } = await stack();
  const r = rid('one');
  const tl = `{statusrelay}:tl:${r}`, req = `{statusrelay}:req:${r}`;
  await send(d, { rid: r, status: 'pending' });
  assert.equal(await redis.cmd('EXISTS', tl), 0, 'no timeline list for one event');
  const sid = await redis.cmd('HGET', req, 'tl1');
  assert.match(sid, /^\d+-\d+$/, 'the one stream id is in the hash');
  assert.deepEqual(await statuses(d, r), ['pending']);
  assert.deepEqual(await history(d, r), ['pending']);
  assert.equal((await d.get(`/v1/requests/${r}`)).body.status, 'pending');

  await send(d, { rid: r, status: 'success' });
  assert.equal(await redis.cmd('HEXISTS', req, 'tl1'), 0, 'the field gives way to the list');
  const ids = await redis.cmd('LRANGE', tl, 0, -1);
  assert.equal(ids.length, 2);
  assert.equal(ids[0], sid, 'the first event keeps its place');
  assert.deepEqual(await statuses(d, r), ['pending', 'success']);
  assert.deepEqual(await history(d, r), ['pending', 'success']);
});

test('a one-entry timeline list of an older version keeps working and grows', async () => {
  const { redis, d } = await stack();
  const r = rid('old');
  const tl = `{statusrelay}:tl:${r}`, req = `{statusrelay}:req:${r}`;
  await send(d, { rid: r, status: 'pending' });
  // the layout an older version wrote: the list, no field
  const sid = await redis.cmd('HGET', req, 'tl1');
  await redis.cmd('RPUSH', tl, sid);
  await redis.cmd('HDEL', req, 'tl1');
  assert.deepEqual(await statuses(d, r), ['pending']);
  assert.deepEqual(await history(d, r), ['pending']);
  await send(d, { rid: r, status: 'success' });
  assert.equal(await redis.cmd('HEXISTS', req, 'tl1'), 0);
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
  assert.equal(await redis.cmd('HEXISTS', req, 'tl1'), 0, 'the stale id repaired on read');
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
  const ids = await redis.cmd('LRANGE', tl, 0, -1);
  await redis.cmd('DEL', tl);
  await redis.cmd('HSET', req, 'tl1', ids[0]);
  await redis.cmd('RPUSH', tl, ids[1]);
  assert.deepEqual(await statuses(d, r), ['pending', 'success'], 'both events, in order');
});
