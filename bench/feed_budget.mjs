// bench/feed_budget.mjs - upstream calls per minute with N watched requests of the API key,
// upstream websocket healthy, with the changes feed (STATUSRELAY_DISCOVER=true) and without it
// (the requests tracked through POST /v1/requests). docs/internals.md "Sources and the
// upstream budget" quotes its numbers.
//   cd tests && node ../bench/feed_budget.mjs [N...]      (default: 10 1000; MODES=feed,polls)
// Real redis-server, the simulator and one daemon (default settings but the key); calls are
// counted at the simulator over MEASURE_MS after the requests were known for WARM_MS.
import { startRedis, startDaemon } from '../tests/integration/lib/stack.mjs';
import { startSim } from '../tests/integration/lib/sim.mjs';
import { until } from '../tests/integration/lib/proc.mjs';

const KEY = 'budget-key';
const MEASURE_MS = Number(process.env.MEASURE_MS ?? 60000);
const WARM_MS = Number(process.env.WARM_MS ?? 35000);
const sizes = process.argv.slice(2).map(Number).filter((n) => n > 0);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function run(redis, n, feed) {
  const sim = await startSim({ apiKey: KEY, seed: 5, rateLimit: 0, name: `budget-sim-${n}-${feed}` });
  const ids = [];
  for (let i = 0; i < n; i++) {
    const r = await sim.control('/requests', { path: ['waiting', 'pending', 'success'], stepMs: 0,
      originChainId: 10, destinationChainId: 137 });
    ids.push(r.id);
  }
  const d = await startDaemon({
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrlWithKey, apiKey: KEY,
    name: `budget-daemon-${n}-${feed}`,
    env: { STATUSRELAY_REDIS_PREFIX: `budget${n}${feed ? 'f' : 'p'}`, STATUSRELAY_DISCOVER: String(feed) },
  });
  try {
    if (!feed)
      for (let i = 0; i < ids.length; i += 1000)
        await d.post('/v1/requests', { requestIds: ids.slice(i, i + 1000) });
    await until(async () => {
      const r = await d.get(`/v1/requests/${ids[ids.length - 1]}`);
      return r.status === 200;
    }, { timeoutMs: 60000, msg: 'requests known' });
    await sleep(WARM_MS);
    await sim.control('/stats/reset', {});
    await sleep(MEASURE_MS);
    const by = (await sim.stats()).http.byPath;
    const sum = (p) => Object.values(by[p] ?? {}).reduce((a, b) => a + b, 0);
    const per = 60000 / MEASURE_MS;
    return { n, feed, status: sum('/intents/status/v3') * per, requests: sum('/requests/v3') * per };
  } finally {
    await d.stop();
    await sim.stop();
  }
}

const redis = await startRedis();
try {
  for (const n of sizes.length ? sizes : [10, 1000]) {
    for (const feed of (process.env.MODES ?? "feed,polls").split(",").map((m) => m === "feed")) {
      const r = await run(redis, n, feed);
      console.log(`watched=${r.n} feed=${r.feed} status_v3/min=${r.status.toFixed(1)} ` +
        `requests_v3/min=${r.requests.toFixed(1)} total/min=${(r.status + r.requests).toFixed(1)}`);
    }
  }
} finally {
  await redis.stop();
}
