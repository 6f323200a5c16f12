// feed_tiers.test.mjs - a watched request the changes feed covers (store/feed_mark.lua) has no
// poll-tier member while the feed is healthy (store/watch_lib.lua "Feed-covered requests"); when
// the feed goes down (the simulator refuses /requests/v3) it gets its tier back and is polled
// (store/feed_restore.lua), and when the feed is back it leaves the tier again.
// Real redis-server, the simulator, one daemon with the upstream websocket down.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';

const KEY = 'feedtier-key';
const P = '{feedtier}';
let redis, sim;

before(async () => {
  redis = await startRedis();
  sim = await startSim({ apiKey: KEY, seed: 26, rateLimit: 0 });
});
after(async () => {
  await sim?.stop();
  await redis?.stop();
});

const simReq = (id) => sim.control(`/requests/${id}`, null, 'GET');
const TIERS = ['pollu', 'poll', 'polls', 'polln'];

async function tierOf(id, p = P) {
  for (const t of TIERS)
    if ((await redis.cmd('ZSCORE', `${p}:${t}`, id)) !== null) return t;
  return null;
}

async function inTiers(ids, p = P) {
  const out = [];
  for (const id of ids) if ((await tierOf(id, p)) !== null) out.push(id);
  return out;
}

test('a feed-covered request has no poll tier while the feed is healthy, is polled while it is down, leaves the tier when it is back', async () => {
  const d = await startDaemon({
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: 'ws://127.0.0.1:9/', apiKey: KEY,
    env: { STATUSRELAY_REDIS_PREFIX: 'feedtier', STATUSRELAY_DISCOVER: 'true',
      STATUSRELAY_DISCOVER_INTERVAL: '1s', STATUSRELAY_POLL_INTERVAL: '1s' }, // healthy: 2 s
  });
  try {
    const ids = [];
    for (let i = 0; i < 3; i++) {
      const r = await sim.control('/requests', { path: ['waiting', 'pending', 'submitted', 'success'],
        stepMs: 0, autoHashes: true, originChainId: 10, destinationChainId: 137 });
      ids.push(r.id);
      assert.equal((await d.post('/v1/requests', { requestId: r.id })).status, 201);
    }
    for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
    // (a) the feed reports them: marked, watched, and in no poll tier
    await until(async () => {
      for (const id of ids) {
        const [fk, watch, st] = await redis.cmd('HMGET', `${P}:req:${id}`, 'fk', 'watch', 'status');
        if (fk !== '1' || watch !== 'active' || st !== 'pending') return false;
      }
      return (await inTiers(ids)).length === 0;
    }, { msg: 'feed-covered requests leave their poll tiers', timeoutMs: 20000, stepMs: 200 }).catch(async (e) => {
      for (const id of ids) console.log('#', id, await tierOf(id), JSON.stringify(await redis.cmd('HMGET', `${P}:req:${id}`, 'fk', 'watch', 'status', 'pt', 'anon', 'trk')));
      console.log(d.proc.log().split('\n').filter((l) => /feed|error|warn/i.test(l)).slice(-15).join('\n'));
      console.log((await (await fetch(`${d.url}/metrics`)).text()).split('\n').filter((l) => /feed/.test(l)).join('\n'));
      console.log('# feedok', await redis.cmd('EXISTS', `${P}:feedok`), await redis.cmd('KEYS', `${P}:feed*`));
      throw e;
    });
    assert.equal(await redis.cmd('EXISTS', `${P}:feedok`), 1);
    const p0 = [];
    for (const id of ids) p0.push((await simReq(id)).statusPolls);
    // (b) the feed goes down: within 2 feed intervals it is unhealthy, the requests get their
    // tier back and are polled: 2 feed intervals, a tick, the poller's back-off after the
    // upstream's errors on the pages (a generous bound)
    await sim.control('/faults', { httpErrorRate: 1, httpErrorStatus: 503, httpErrorPath: '/requests/v3' });
    const down = Date.now();
    await until(async () => {
      for (let i = 0; i < ids.length; i++)
        if ((await simReq(ids[i])).statusPolls <= p0[i]) return false;
      return true;
    }, { msg: 'every feed-covered request polled while the feed is down', timeoutMs: 30000, stepMs: 200 });
    console.log(`# feed down: every covered request polled within ${Date.now() - down} ms`);
    assert.equal(await redis.cmd('EXISTS', `${P}:feedok`), 0);
    // (c) the feed is back: they leave the tier again and are no longer polled
    await sim.control('/faults', null, 'DELETE');
    await until(async () => (await redis.cmd('EXISTS', `${P}:feedok`)) === 1 &&
      (await inTiers(ids)).length === 0,
    { msg: 'feed back: the requests leave their poll tiers', timeoutMs: 20000, stepMs: 200 });
    const p1 = [];
    for (const id of ids) p1.push((await simReq(id)).statusPolls);
    await new Promise((r) => setTimeout(r, 3000));
    for (let i = 0; i < ids.length; i++)
      assert.equal((await simReq(ids[i])).statusPolls, p1[i], `no status polls for ${ids[i]} once the feed is back`);
  } finally {
    await d.stop();
  }
});

test('the feed gone with the upstream websocket down: the covered requests come back as urgent polls, every one polled in turn', async () => {
  // feed_restore.lua put them back into the active tier while every poll puts a request into
  // the urgent tier (the websocket confirms nothing: poller.c poller_next_poll), served first:
  // the first burst of polls filled the urgent tier with requests re-polled every second, more
  // than the budget (200/min: 20 at once, then 3/s), and the others were not polled for minutes.
  const base = { redisUrl: redis.url, apiUrl: sim.url, wsUrl: 'ws://127.0.0.1:9/', apiKey: KEY };
  const Q = '{feedurg}';
  const env = { STATUSRELAY_REDIS_PREFIX: 'feedurg', STATUSRELAY_LEADER_LEASE: '3s', STATUSRELAY_DISCOVER_INTERVAL: '1s' };
  const ids = [];
  for (let i = 0; i < 60; i++) {
    ids.push((await sim.control('/requests', { path: ['waiting', 'pending', 'submitted', 'success'],
      stepMs: 0, autoHashes: true, originChainId: 10, destinationChainId: 137 })).id);
  }
  // the feed's reader, and a process that only learns the feed's health (no discovery)
  const reader = await startDaemon({ ...base, name: 'feed-urg-reader', env: { ...env, STATUSRELAY_DISCOVER: 'true' } });
  const d = await startDaemon({ ...base, name: 'feed-urg-other', env });
  const st = async (id) => { const r = await d.get(`/v1/requests/${id}`); return r.status === 200 ? r.body.status : null; };
  try {
    await until(async () => {
      for (const id of ids) if ((await st(id)) !== 'waiting') return false;
      return /^statusrelay_feed_healthy 1$/m.test(await (await fetch(`${d.url}/metrics`)).text()) &&
        (await inTiers(ids, Q)).length === 0;
    }, { msg: 'the feed covers the 60 requests', timeoutMs: 30000, stepMs: 200 });
    await reader.stop('SIGKILL'); // nobody reads the feed any more: it is not healthy within 2 s
    const t0 = Date.now();
    const changed = ids.filter((_, i) => i % 6 === 1);
    for (const id of changed) await sim.control(`/requests/${id}/advance`, {});
    await until(async () => {
      const off = [];
      for (const id of changed) if ((await st(id)) !== 'pending') off.push(`${id.slice(0, 10)} (tier ${await tierOf(id, Q)})`);
      if (off.length > 0) throw new Error(`${off.length} not pending: ${off.join(' ')}`);
      return true;
    }, { msg: '10 changes seen by polls', timeoutMs: 45000, stepMs: 250 });
    console.log(`# feed gone, websocket down, ${ids.length} covered requests: 10 changes seen by polls ${Date.now() - t0} ms after`);
  } finally {
    await d.stop();
    await reader.stop('SIGKILL').catch(() => {});
  }
});
