// pack_mem.mjs - the size classes of packed request hashes (issue 24: the hash of an ended
// watch rewritten by the record pass into a listpack, store/chunk_lib.lua). Bounded: one
// redis-server and one simulator; N requests of the key (PACK_MEM_N, default 400) made by the
// simulator at `success` over the last hours, read by a daemon's backfill (facts from the feed's
// items, as `make bench SCENARIO=state`), then a daemon with a 1 s settled watch ends the
// watches and its record pass deflates the records and packs the hashes. Per hash: MEMORY
// USAGE (SAMPLES 0), OBJECT ENCODING, the number of fields and the listpack's own bytes
// computed from its fields by Redis's encoding rules (header, entries, backlens); printed as a
// distribution. Redis defaults (hash-max-listpack-value 64).
// Usage: node bench/pack_mem.mjs BIN   (prints one JSON line)
import { startRedis, startDaemon } from '../tests/integration/lib/stack.mjs';
import { startSim } from '../tests/integration/lib/sim.mjs';
import { until } from '../tests/integration/lib/proc.mjs';

const KEY = 'pack-mem-key';
const N = Number(process.env.PACK_MEM_N ?? 400);
const bin = process.argv[2];
const P = '{statusrelay}';

// The listpack's own bytes (header 6, end 1, each entry with its encoding and backlen;
// canonical integers in their short encodings, as lpEncodeGetType) of hash KEYS[1], its
// fields and whether it has facts; in a script, so that binary values count by bytes.
const LP = `
local function entry(s)
  local n
  if #s > 0 and #s <= 18 and (s == '0' or string.match(s, '^%-?[1-9]%d*$')) then
    local v = tonumber(s)
    if v >= 0 and v <= 127 then n = 1
    elseif v >= -4096 and v <= 4095 then n = 2
    elseif v >= -32768 and v <= 32767 then n = 3
    elseif v >= -8388608 and v <= 8388607 then n = 4
    elseif v >= -2147483648 and v <= 2147483647 then n = 5
    else n = 9 end
  else
    n = #s + (#s <= 63 and 1 or (#s <= 4095 and 2 or 5))
  end
  return n + (n <= 127 and 1 or (n < 16383 and 2 or 3))
end
local raw = redis.call('HGETALL', KEYS[1])
local lp, fx = 7, 0
for i = 1, #raw do lp = lp + entry(raw[i]) end
for i = 1, #raw, 2 do if raw[i] == 'fx' then fx = 1 end end
return {lp, #raw / 2, fx}`;

async function main() {
  const redis = await startRedis();
  const sim = await startSim({ apiKey: KEY, seed: 5, rateLimit: 0, extraArgs: ['--retain', String(N + 100)] });
  const SPAN = 3600 * 1000;
  await sim.control('/requests', { count: N, lifecycle: 'success', spanMs: SPAN, agoMs: 60000 });
  const env = { STATUSRELAY_DISCOVER: 'true', STATUSRELAY_DISCOVER_INTERVAL: '1s', STATUSRELAY_DISCOVER_LOOKBACK: '10m',
    STATUSRELAY_UPSTREAM_BUDGET: '60000', STATUSRELAY_SETTLED_WATCH: '1s' };
  const d = await startDaemon({ redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrl, apiKey: KEY, env, bin, name: 'pack-mem' });
  const t0 = Date.now();
  const bf = await d.post('/v1/backfill', { since: t0 - SPAN - 600000, until: t0 });
  if (bf.status !== 202) throw new Error(`backfill: ${bf.status} ${bf.text}`);
  await until(async () => (await d.get(`/v1/backfill/${bf.body.backfillId}`)).body?.done, { timeoutMs: 120000, msg: 'backfill' });
  const ids = (await redis.cmd('ZRANGE', `${P}:ct`, 0, -1)).filter((id) => id);
  // every watch ended, every record deflated and hash packed (the pass's queue empty)
  await until(async () => {
    if (Number(await redis.cmd('ZCARD', `${P}:watch`)) > 0 || Number(await redis.cmd('ZCARD', `${P}:rzq`)) > 0) return false;
    for (const id of ids) if ((await redis.cmd('OBJECT', 'ENCODING', `${P}:req:${id}`)) !== 'listpack') return false;
    return true;
  }, { timeoutMs: 180000, stepMs: 1000, msg: 'hashes packed' });
  const usage = {}, enc = {}, lpDist = {};
  let fields = 0, lpSum = 0, lpMax = 0, withFacts = 0, big = null, small = null, lpMin = Infinity;
  for (const id of ids) {
    const k = `${P}:req:${id}`;
    const u = Number(await redis.cmd('MEMORY', 'USAGE', k, 'SAMPLES', '0'));
    usage[u] = (usage[u] ?? 0) + 1;
    const e = await redis.cmd('OBJECT', 'ENCODING', k);
    enc[e] = (enc[e] ?? 0) + 1;
    const [lp, nf, fx] = await redis.cmd('EVAL', LP, 1, k);
    fields += nf;
    withFacts += fx;
    lpSum += lp;
    if (lp > lpMax) big = k;
    lpMax = Math.max(lpMax, lp);
    if (lp < lpMin) { small = k; lpMin = lp; }
    const bucket = Math.floor(lp / 32) * 32;
    lpDist[bucket] = (lpDist[bucket] ?? 0) + 1;
  }
  const n = ids.length;
  // PACK_MEM_SHOW=1: the fields of the largest and the smallest hash with their bytes (HSTRLEN)
  if (process.env.PACK_MEM_SHOW === '1') {
    for (const k of [big, small]) {
      const o = {};
      for (const f of await redis.cmd('HKEYS', k)) o[f] = Number(await redis.cmd('HSTRLEN', k, f));
      console.error(k, JSON.stringify(o));
    }
  }
  console.log(JSON.stringify({
    requests: n, withFacts, encodings: enc, memoryUsage: usage, fieldsAvg: Math.round((fields / n) * 10) / 10,
    listpackBytes: { avg: Math.round(lpSum / n), max: lpMax, by32: lpDist },
  }));
  await d.stop();
  await sim.stop();
  await redis.stop();
}
main().catch((e) => { console.error(e); process.exit(1); });
