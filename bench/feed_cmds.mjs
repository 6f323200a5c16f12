// feed_cmds.mjs - Redis commands per event of a request the changes feed covers (issue 26
// "fewer keys per event"; store/watch_lib.lua "Feed-covered requests"). One daemon with the
// key, the feed every 1 s and the upstream websocket up (the simulator); N requests of the
// key read by the feed (which tracks them), then 3 status changes each. INFO commandstats (which counts
// the commands scripts call) over the changes, minus an idle window of the same length
// before them (feed pages, lease looks, claims), divided by the events applied.
// Run from tests/: STATUSRELAY_BIN=... STATUSRELAY_HELPERS=... node ../bench/feed_cmds.mjs [N]
import { until } from '../tests/integration/lib/proc.mjs';
import { startRedis, startDaemon } from '../tests/integration/lib/stack.mjs';
import { startSim } from '../tests/integration/lib/sim.mjs';

const N = Number(process.argv[2] ?? 20);
const KEY = 'fc-key';
const P = '{fc}';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function stats(text) {
  const out = {};
  for (const l of text.split('\r\n')) {
    const m = /^cmdstat_([a-z|_-]+):calls=(\d+)/.exec(l);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

const redis = await startRedis();
const sim = await startSim({ apiKey: KEY, seed: 5, rateLimit: 0 });
// the requests exist before the daemon starts: its feed reads them first (the look-back
// window) and tracks them, so that an older version marks them too
const ids = [];
for (let i = 0; i < N; i++) {
  const r = await sim.control('/requests', { path: ['waiting', 'pending', 'submitted', 'success'],
    stepMs: 0, autoHashes: true, originChainId: 10, destinationChainId: 137 });
  ids.push(r.id);
}
const d = await startDaemon({
  redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrlWithKey, apiKey: KEY,
  env: { STATUSRELAY_REDIS_PREFIX: 'fc', STATUSRELAY_DISCOVER: 'true',
    STATUSRELAY_DISCOVER_INTERVAL: '1s' },
});
try {
  await until(async () => {
    for (const id of ids)
      if ((await redis.cmd('HGET', `${P}:req:${id}`, 'fk')) !== '1') return false;
    return true;
  }, { msg: 'every request seen by the feed', timeoutMs: 30000, stepMs: 200 });
  await sleep(3000);
  const T = 3 * 2500;
  await redis.cmd('CONFIG', 'RESETSTAT');
  await sleep(T);
  const idle = stats(await redis.cmd('INFO', 'commandstats'));
  await redis.cmd('CONFIG', 'RESETSTAT');
  const t0 = Date.now();
  for (let step = 0; step < 3; step++) {
    for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
    await sleep(2500 - 0);
  }
  await until(async () => {
    for (const id of ids)
      if ((await redis.cmd('HGET', `${P}:req:${id}`, 'status')) !== 'success') return false;
    return true;
  }, { msg: 'every request at success', timeoutMs: 30000, stepMs: 200 });
  const busyMs = Date.now() - t0;
  const busy = stats(await redis.cmd('INFO', 'commandstats'));
  const events = 3 * N;
  const names = [...new Set([...Object.keys(busy), ...Object.keys(idle)])].sort();
  let tot = 0;
  const rows = [];
  for (const k of names) {
    const v = (busy[k] ?? 0) - (idle[k] ?? 0) * busyMs / T;
    tot += v;
    if (Math.abs(v / events) >= 0.05) rows.push(`${k}=${(v / events).toFixed(2)}`);
  }
  const tiers = [];
  for (const t of ['pollu', 'poll', 'polls']) tiers.push(`${t}:${await redis.cmd('ZCARD', `${P}:${t}`)}`);
  console.log(`events ${events}, window ${busyMs} ms (idle ${T} ms subtracted)`);
  console.log(`commands per event: ${(tot / events).toFixed(2)}; ${rows.join(' ')}`);
  console.log(`poll tiers after: ${tiers.join(' ')}`);
} finally {
  await d.stop();
  await sim.stop();
  await redis.stop();
}
