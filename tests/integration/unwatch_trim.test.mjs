// unwatch_trim.test.mjs - {P}:unwatch (ids whose watch ended, by change version) is trimmed to
// what is still needed (store/watch_sync.lua): an ended watch's member leaves once it is 30 s
// old and the record pass (store/rec_scan.lua, cursor {P}:rzk) has read it, so the record is
// deflated all the same; a process that was stopped across the trim (its last version below
// {P}:wlow) reads the whole watched set again, one started after it reads it whole, and both
// hold exactly the requests still watched (the upstream websocket holder subscribes them).
// 3,000 settled requests of the key read by the changes feed (their watches end at once,
// STATUSRELAY_SETTLED_WATCH 1 s) and 40 pending ones. Real redis-server, the simulator, three
// daemons; some 50 s (the 30 s horizon). Then the record pass off: a cursor {P}:rzk that no
// longer moves holds nothing back once no process says it runs the pass ({P}:rzon), and holds
// the members it has not passed while one does (some 45 s). With STATUSRELAY_OLD_BIN, a process
// of an older version (no trim) next to this one (some 40 s more).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';
import { countDeflated } from './lib/requests.mjs';

const KEY = 'unwatch-trim-key';
const P = '{uwt}';
const N = 3000, NP = 40;
let redis, sim;
const cleanup = [];

before(async () => {
  redis = await startRedis();
  sim = await startSim({ apiKey: KEY, seed: 11, rateLimit: 0, extraArgs: ['--retain', String(N + NP + 100)] });
});
after(async () => {
  for (const f of cleanup.reverse()) { try { await f(); } catch {} }
  await sim?.stop();
  await redis?.stop();
});

const env = {
  STATUSRELAY_REDIS_PREFIX: 'uwt', STATUSRELAY_COMPRESS_RECORDS: 'true', STATUSRELAY_DISCOVER: 'true',
  STATUSRELAY_DISCOVER_INTERVAL: '1s', STATUSRELAY_DISCOVER_LOOKBACK: '10m',
  STATUSRELAY_UPSTREAM_BUDGET: '60000', STATUSRELAY_SETTLED_WATCH: '1s', STATUSRELAY_LEADER_LEASE: '3s',
};
async function daemon(name, extra = {}) {
  const d = await startDaemon({ redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrlWithKey, apiKey: KEY, env: { ...env, ...extra }, name });
  cleanup.push(() => d.stop());
  return d;
}
/** The counts of the full reads of the watched set in d's log ("watched requests loaded"). */
const loads = (d) => [...d.proc.log().matchAll(/watched requests loaded.*?count=(\d+)/g)].map((m) => Number(m[1]));

test('ended watches leave unwatch once the record pass read them; processes behind read the whole set', async () => {
  const a = await daemon('uwt-a');
  const b = await daemon('uwt-b'); // stopped across the trim below
  await until(() => loads(b).length >= 1, { msg: 'b read the (empty) watched set' });
  b.proc.child.kill('SIGSTOP');
  let bStopped = true;
  cleanup.push(() => { if (bStopped) b.proc.child.kill('SIGCONT'); });

  // the requests of the key: N settled over the last 2 min, then NP pending; the feed reads them
  await sim.control('/requests', { count: N, lifecycle: 'success', spanMs: 120000, agoMs: 1000 });
  await sim.control('/requests', { count: NP, path: ['waiting', 'pending'], spanMs: 1000 });
  const ids = [];
  for (let after = 0; ;) {
    const page = (await sim.control(`/requests?after=${after}&limit=1000`)).requests;
    if (page.length === 0) break;
    for (const x of page) ids.push(x.id);
    after = page[page.length - 1].seq;
  }
  assert.equal(ids.length, N + NP);
  const settled = ids.slice(0, N), pending = ids.slice(N);
  const countStatus = async (st) => Number(await redis.cmd('ZCARD', `${P}:st:${st}`));
  await until(async () => (await countStatus('success')) === N && (await countStatus('pending')) === NP,
    { msg: 'the feed applied every request', timeoutMs: 90000, stepMs: 500 });

  // every settled watch ended and the record pass read them all; no more than the last 30 s
  // of ended watches and what the pass has not read stay (here: none after 30 s)
  await until(async () => Number(await redis.cmd('ZCARD', `${P}:wend`)) === 0 &&
    Number(await redis.cmd('ZCARD', `${P}:watch`)) === NP, { msg: 'watches ended', timeoutMs: 30000 });
  const t0 = Date.now();
  await until(async () => Number(await redis.cmd('ZCARD', `${P}:unwatch`)) === 0,
    { msg: `unwatch trimmed (${await redis.cmd('ZCARD', `${P}:unwatch`)} left)`, timeoutMs: 90000, stepMs: 1000 });
  console.log(`# unwatch trimmed ${Math.round((Date.now() - t0) / 1000)} s after the last watch ended`);
  const wver = Number(await redis.cmd('GET', `${P}:wver`));
  const wlow = Number(await redis.cmd('GET', `${P}:wlow`));
  assert.ok(wlow >= N && wlow <= wver, `wlow ${wlow} covers the trimmed versions (wver ${wver})`);
  assert.ok(Number(await redis.cmd('GET', `${P}:rzk`)) >= wlow, 'the record pass read past every trimmed member');
  assert.ok(Number(await redis.cmd('ZCARD', `${P}:wvt`)) <= 8, 'a few version marks');
  // every settled record deflated ('r' + zlib; in a packed hash, store/chunk_lib.lua, the first
  // part: "\0", then 'r'), every pending one plain and watched
  const deflated = await countDeflated(redis, settled.map((id) => `${P}:req:${id}`));
  assert.equal(deflated, N, 'every ended watch\'s record deflated');
  for (const id of pending) assert.equal(await redis.cmd('HGET', `${P}:req:${id}`, 'watch'), 'active');

  // b, behind wlow, reads the whole set again; c, started now, reads it whole
  b.proc.child.kill('SIGCONT');
  bStopped = false;
  await until(() => loads(b).length >= 2, { msg: 'b read the whole set again', timeoutMs: 10000 });
  assert.equal(loads(b).at(-1), NP, `b's set: ${loads(b)}`);
  const c = await daemon('uwt-c');
  await until(() => loads(c).length >= 1, { msg: 'c read the set' });
  assert.deepEqual(loads(c), [NP]);

  // a stops: b or c takes the upstream websocket and subscribes exactly the pending ones;
  // one of them then settles and its watch ends (a change after the trim): unsubscribed
  const subs = async () => (await sim.stats()).ws.subscriptions;
  await a.stop();
  await until(async () => (await subs()) === NP, { msg: `the new holder subscribes the ${NP} watched`, timeoutMs: 20000 });
  await sim.control(`/requests/${pending[0]}/status`, { status: 'success' });
  await until(async () => (await redis.cmd('HGET', `${P}:req:${pending[0]}`, 'watch')) === 'ended',
    { msg: 'the settled one\'s watch ended', timeoutMs: 20000 });
  await until(async () => (await subs()) === NP - 1, { msg: 'its subscription dropped', timeoutMs: 10000 });
  for (const d of [b, c]) assert.ok(!/level=(error|fatal)/.test(d.proc.log()), d.proc.log().slice(-2000));
  await b.stop();
  await c.stop(); // their subscriptions go with them
});

test('with the record pass off the 30 s bound it; a process running the pass elsewhere holds back what it has not read', async () => {
  const Q = '{uwt2}', M = 300;
  // a stale cursor (a pass that ran once) and, by hand, the mark of a process running the pass
  await redis.cmd('SET', `${Q}:rzk`, '0');
  await redis.cmd('SET', `${Q}:rzon`, '1', 'PX', '120000');
  const t0 = Date.now();
  await sim.control('/requests', { count: M, lifecycle: 'success', spanMs: 5000, agoMs: 100 });
  const d = await daemon('uwt2-a', { STATUSRELAY_REDIS_PREFIX: 'uwt2', STATUSRELAY_COMPRESS_RECORDS: 'false',
    STATUSRELAY_DISCOVER_LOOKBACK: '20s' }); // these requests only
  await until(async () => Number(await redis.cmd('ZCARD', `${Q}:st:success`)) >= M,
    { msg: 'the feed applied them', timeoutMs: 60000, stepMs: 500 });
  await until(async () => Number(await redis.cmd('ZCARD', `${Q}:wend`)) === 0 &&
    Number(await redis.cmd('ZCARD', `${Q}:unwatch`)) >= M, { msg: 'watches ended', timeoutMs: 30000 });
  const ended = Date.now();
  // past the horizon (30 s and a 5 s mark): the cursor holds every one back
  await new Promise((r) => setTimeout(r, 38000 - (Date.now() - ended)));
  assert.ok(Number(await redis.cmd('ZCARD', `${Q}:unwatch`)) >= M, 'held back by the cursor');
  assert.ok(Number(await redis.cmd('PTTL', `${Q}:rzon`)) > 0, 'this process (pass off) leaves the mark alone');
  // nobody runs the pass any more (the mark expired): the horizon alone bounds it
  await redis.cmd('DEL', `${Q}:rzon`);
  await until(async () => Number(await redis.cmd('ZCARD', `${Q}:unwatch`)) === 0,
    { msg: 'trimmed once no pass runs', timeoutMs: 15000 });
  assert.equal(await redis.cmd('EXISTS', `${Q}:rzon`), 0, 'a process with the pass off never sets it');
  assert.equal(await redis.cmd('GET', `${Q}:rzk`), '0');
  assert.ok(Number(await redis.cmd('GET', `${Q}:wlow`)) >= M);
  console.log(`# ${M} ended watches trimmed ${Math.round((Date.now() - t0) / 1000)} s after the start`);
  await d.stop();
});

/** Rolling upgrade: with STATUSRELAY_OLD_BIN (a build of 65785ee or older: no trim) one process
 * of that version runs next to one of this version, both with the record pass on. This one
 * trims; the older one keeps syncing from its own version (it never falls behind {P}:wlow, so
 * it reads the whole set once, at start), and as the websocket holder it subscribes exactly
 * the watched requests, before and after the trim. Skipped without it. */
test('an older process next to this one: it keeps its watched set through the trim', async (t) => {
  const old = process.env.STATUSRELAY_OLD_BIN;
  if (!old) {
    t.skip('STATUSRELAY_OLD_BIN unset');
    return;
  }
  const Q = '{uwt3}', M = 1000, MP = 20;
  const extra = { STATUSRELAY_REDIS_PREFIX: 'uwt3', STATUSRELAY_DISCOVER_LOOKBACK: '20s' };
  const o = await startDaemon({ redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrlWithKey, apiKey: KEY, env: { ...env, ...extra }, name: 'uwt3-old', bin: old });
  cleanup.push(() => o.stop());
  await until(() => loads(o).length >= 1, { msg: 'the older process read the set' });
  const n = await daemon('uwt3-new', extra);
  const first = (await sim.control('/requests', { count: M, lifecycle: 'success', spanMs: 5000, agoMs: 100 })).firstSeq;
  await sim.control('/requests', { count: MP, path: ['waiting', 'pending'], spanMs: 1000 });
  const pending = (await sim.control(`/requests?after=${first - 1 + M}&limit=${MP}`)).requests.map((x) => x.id);
  assert.equal(pending.length, MP);
  await until(async () => Number(await redis.cmd('ZCARD', `${Q}:st:success`)) >= M &&
    Number(await redis.cmd('ZCARD', `${Q}:wend`)) === 0 && Number(await redis.cmd('ZCARD', `${Q}:watch`)) === MP,
  { msg: 'applied, watches ended', timeoutMs: 60000, stepMs: 500 });
  await until(async () => Number(await redis.cmd('ZCARD', `${Q}:unwatch`)) === 0,
    { msg: 'trimmed by this version', timeoutMs: 60000, stepMs: 1000 });
  assert.deepEqual(loads(o), [0], 'the older process never fell behind wlow');
  const settled = (await sim.control(`/requests?after=${first - 1}&limit=${M}`)).requests.map((x) => x.id);
  const deflated = await countDeflated(redis, settled.map((id) => `${Q}:req:${id}`));
  assert.equal(deflated, M, 'every ended watch\'s record deflated (by either process\'s pass)');
  // the older process holds the websocket: stop this one, the subscriptions are the pending ones
  await n.stop();
  const subs = async () => (await sim.stats()).ws.subscriptions;
  await until(async () => (await subs()) === MP, { msg: `${MP} subscribed by the holder`, timeoutMs: 20000 });
  await sim.control(`/requests/${pending[0]}/status`, { status: 'success' });
  await until(async () => (await subs()) === MP - 1, { msg: 'the ended one unsubscribed', timeoutMs: 20000 });
  await o.stop();
});
