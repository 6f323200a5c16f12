// tl_mem.mjs - Redis memory and Redis work per request of the timeline layout (issue 24: a
// request's stream ids in its hash's "tl" field while short, store/tl_lib.lua). Bounded: one
// redis-server and one daemon per run, N requests (TL_MEM_N, default 2000) of E events each
// (waiting, pending, submitted, success: the first E), ingested as signed upstream webhooks,
// 8 requests at a time; Redis's hash-max-listpack-value default (64) or 2048 (set before the
// first write). Per request: (INFO used_memory after - before - the event stream's MEMORY
// USAGE) / N, the timeline lists' and the hashes' MEMORY USAGE (a sample of 200); per event:
// INFO commandstats calls and usec (every command, scripts' included) / events.
// Usage: node bench/tl_mem.mjs BIN [EVENTS...]   (prints one JSON line a run; TL_MEM_TUNED=0:
// the default setting only)
import { startRedis, startDaemon } from '../tests/integration/lib/stack.mjs';
import { ingest, upstreamPayload, rid } from '../tests/integration/lib/hooks.mjs';

const KEY = 'tl-mem-key';
const N = Number(process.env.TL_MEM_N ?? 2000);
const bin = process.argv[2];
const lifecycles = process.argv.slice(3).map(Number);
const STEPS = ['waiting', 'pending', 'submitted', 'success'];
const P = '{statusrelay}';

const info = async (redis, sec) => {
  const t = await redis.cmd('INFO', sec), o = {};
  for (const l of t.split('\r\n')) { const i = l.indexOf(':'); if (i > 0) o[l.slice(0, i)] = l.slice(i + 1); }
  return o;
};
const cmdstats = async (redis) => {
  const o = await info(redis, 'commandstats'), out = {};
  for (const [k, v] of Object.entries(o)) {
    const m = /calls=(\d+),usec=(\d+)/.exec(v);
    if (m) out[k.replace(/^cmdstat_/, '')] = { calls: Number(m[1]), usec: Number(m[2]) };
  }
  return out;
};

async function run(E, tuned) {
  const redis = await startRedis();
  if (tuned) await redis.cmd('CONFIG', 'SET', 'hash-max-listpack-value', '2048');
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, bin, logLevel: 'warn' });
  try {
    await new Promise((r) => setTimeout(r, 1500));
    const ids = Array.from({ length: N }, (_, i) => rid(`m${i}`));
    const mem0 = Number((await info(redis, 'memory')).used_memory);
    const cs0 = await cmdstats(redis);
    const t = Date.now();
    let next = 0;
    await Promise.all(Array.from({ length: 8 }, async () => {
      for (let i = next++; i < N; i = next++)
        for (let e = 0; e < E; e++) {
          const s = await ingest(d, KEY, upstreamPayload({ rid: ids[i], status: STEPS[e], updatedAt: t + e }));
          if (s !== 200) throw new Error(`ingest ${s}`);
        }
    }));
    const cs1 = await cmdstats(redis);
    const mem1 = Number((await info(redis, 'memory')).used_memory);
    const xlen = Number(await redis.cmd('XLEN', `${P}:events`));
    const stream = Number(await redis.cmd('MEMORY', 'USAGE', `${P}:events`, 'SAMPLES', '0'));
    let hashB = 0, tlB = 0, lists = 0, fieldB = 0;
    const sample = ids.filter((_, i) => i % Math.max(1, Math.floor(N / 200)) === 0).slice(0, 200);
    for (const id of sample) {
      hashB += Number(await redis.cmd('MEMORY', 'USAGE', `${P}:req:${id}`, 'SAMPLES', '0'));
      const l = Number(await redis.cmd('MEMORY', 'USAGE', `${P}:tl:${id}`, 'SAMPLES', '0')) || 0;
      tlB += l;
      if (l) lists++;
      fieldB += ((await redis.cmd('HGET', `${P}:req:${id}`, 'tl')) ?? '').length;
    }
    let calls = 0, usec = 0;
    const per = {};
    for (const [k, v] of Object.entries(cs1)) {
      const c = v.calls - (cs0[k]?.calls ?? 0), u = v.usec - (cs0[k]?.usec ?? 0);
      if (c > 0 && !/^(info|memory|config|xlen|client|ping|hello|select|command)/.test(k)) { calls += c; usec += u; per[k] = c; }
    }
    const ev = N * E, ns = sample.length, r1 = (x) => Math.round(x * 10) / 10;
    return {
      events: E, tuned, requests: N, streamEntries: xlen,
      perRequest: r1((mem1 - mem0 - stream) / N), hashAvg: r1(hashB / ns), timelineListAvg: r1(tlB / ns),
      withList: `${lists}/${ns}`, tlFieldAvg: r1(fieldB / ns),
      callsPerEvent: r1(calls / ev), usecPerEvent: r1(usec / ev),
      listCmdsPerEvent: r1(((per.rpushx ?? 0) + (per.rpush ?? 0) + (per.hdel ?? 0)) / ev),
      evalshaUsecPerEvent: r1(((cs1.evalsha?.usec ?? 0) - (cs0.evalsha?.usec ?? 0)) / ev),
    };
  } finally {
    await d.stop(); await redis.stop();
  }
}

for (const E of lifecycles.length ? lifecycles : [1, 2, 4])
  for (const tuned of process.env.TL_MEM_TUNED === '0' ? [false] : [false, true])
    console.log(JSON.stringify({ bin, ...(await run(E, tuned)) }));
