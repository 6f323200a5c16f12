// dash_hold_ab.mjs - A/B of the dashboard subscribe hold (relay/dash/follow.c dash_hold,
// BENCHMARKS.md "Dashboard subscribe hold"): one Redis, one daemon, N clients connected
// first, then each subscribes to its own already-known id at once; prints one JSON line: the
// wall time, subscribe -> snapshot p50/p99 and the Redis commands of the burst (INFO
// commandstats delta). Bounded (N clients, one burst).
//   cd tests && STATUSRELAY_BIN=/tmp/old/bin/statusrelay STATUSRELAY_HELPERS=/tmp/old/build/helpers \
//     N=300 P=3 node tools/dash_hold_ab.mjs
import { startRedis, startDaemon } from '../integration/lib/stack.mjs';
import { ingest, upstreamPayload, rid } from '../integration/lib/hooks.mjs';
import { client, sub, subscribed } from '../integration/lib/dash_client.mjs';
import { until } from '../integration/lib/proc.mjs';
const N = Number(process.env.N || 300), P = Number(process.env.P || 1);
const KEY = 'ab-key', TOK = 'ab-stream-token-0123456789abcdef';
const stats = async (r) => {
  const t = await r.cmd('INFO', 'commandstats'); const o = {};
  for (const m of t.matchAll(/cmdstat_([a-z|]+):calls=(\d+),usec=(\d+)/g)) o[m[1]] = { calls: +m[2], usec: +m[3] };
  return o;
};
const redis = await startRedis();
const env = { STATUSRELAY_PARTITIONS: String(P), STATUSRELAY_STREAM_TOKEN: TOK, STATUSRELAY_LOG_LEVEL: 'warn', STATUSRELAY_WS_MAX_CONNECTIONS_PER_ADDRESS: String(N + 10) };
const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, name: `ab-${P}`, env });
const ids = Array.from({ length: N }, (_, i) => rid(`ab${i}`));
for (const id of ids) await ingest(d, KEY, upstreamPayload({ rid: id, status: 'waiting' }));
await new Promise((r) => setTimeout(r, 300));
const cs = [];
for (let i = 0; i < N; i++) { const c = client(`${d.wsUrl}?token=${TOK}`); cs.push(c); }
await Promise.all(cs.map((c) => c.ready));
await new Promise((r) => setTimeout(r, 300));
const s0 = await stats(redis);
const lat = [];
const t0 = Date.now();
await Promise.all(cs.map(async (c, i) => {
  const a = Date.now();
  c.send(sub({ id: ids[i] }));
  await c.wait((f) => f.statusrelay?.snapshot, 'snap', 20000);
  lat.push(Date.now() - a);
}));
const wall = Date.now() - t0;
const s1 = await stats(redis);
const d1 = {};
for (const k of Object.keys(s1)) { const c = s1[k].calls - (s0[k]?.calls || 0); if (c) d1[k] = c; }
lat.sort((a, b) => a - b);
console.log(JSON.stringify({ N, P, wall_ms: wall, p50: lat[N >> 1], p99: lat[Math.floor(N * 0.99)], calls: d1 }));
for (const c of cs) c.close();
await d.stop(); await redis.stop();
