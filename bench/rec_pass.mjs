// rec_pass.mjs - Redis memory and the cost of the record pass (issue 24: the newest record of a
// request whose watch has ended, deflated: store/rec.h, STATUSRELAY_COMPRESS_RECORDS). Bounded:
// one redis-server per run; N requests (REC_PASS_N, default 3000) ingested as signed upstream
// webhooks (waiting, pending, submitted, success), 8 at a time, by a daemon with the pass off
// and a 1 s settled watch; once every watch has ended (each request's newest record is its
// request.watch.ended) that daemon stops and a second one starts: with the pass on (the
// measured run) or off (the baseline: the same daemon's start and idle work over the same
// time). Per request: (INFO used_memory - the event stream's MEMORY USAGE) / N before and after,
// and the hashes' MEMORY USAGE (a sample of 200); the pass's cost per deflated record: INFO
// commandstats evalsha usec and the daemon's CPU time (/proc, 10 ms ticks), each less the
// baseline's. Redis's hash-max-listpack-value default (64) or 2048 (REC_PASS_TUNED=1).
// Usage: node bench/rec_pass.mjs BIN   (prints one JSON line)
import fs from 'node:fs';
import { startRedis, startDaemon } from '../tests/integration/lib/stack.mjs';
import { ingest, upstreamPayload, rid } from '../tests/integration/lib/hooks.mjs';
import { until } from '../tests/integration/lib/proc.mjs';

const KEY = 'rec-pass-key';
const N = Number(process.env.REC_PASS_N ?? 3000);
const tuned = process.env.REC_PASS_TUNED === '1';
const bin = process.argv[2];
const STEPS = ['waiting', 'pending', 'submitted', 'success'];
const P = '{statusrelay}';
const r1 = (x) => Math.round(x * 10) / 10;

const info = async (redis, sec) => {
  const t = await redis.cmd('INFO', sec), o = {};
  for (const l of t.split('\r\n')) { const i = l.indexOf(':'); if (i > 0) o[l.slice(0, i)] = l.slice(i + 1); }
  return o;
};
const evalsha = async (redis) => {
  const m = /calls=(\d+),usec=(\d+)/.exec((await info(redis, 'commandstats')).cmdstat_evalsha ?? '');
  return m ? { calls: Number(m[1]), usec: Number(m[2]) } : { calls: 0, usec: 0 };
};
const cpuMs = (pid) => {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10; // utime + stime, 100 Hz ticks
};
const env = (on) => ({ STATUSRELAY_SETTLED_WATCH: '1s', STATUSRELAY_COMPRESS_RECORDS: on ? 'true' : 'false' });

async function memory(redis, ids) {
  const mem = Number((await info(redis, 'memory')).used_memory);
  const stream = Number(await redis.cmd('MEMORY', 'USAGE', `${P}:events`, 'SAMPLES', '0'));
  let hashB = 0, recB = 0, deflated = 0;
  const sample = ids.filter((_, i) => i % Math.max(1, Math.floor(N / 200)) === 0).slice(0, 200);
  for (const id of sample) {
    hashB += Number(await redis.cmd('MEMORY', 'USAGE', `${P}:req:${id}`, 'SAMPLES', '0'));
    // a packed hash (store/chunk_lib.lua): "\0" and the first 62 bytes, the whole length in
    // "ck" ("rec:301 fx:537"), the rest in the hash's chunk stream
    const [v, ck] = await redis.cmd('HMGET', `${P}:req:${id}`, 'rec', 'ck');
    const whole = /(?:^| )rec:(\d+)/.exec(ck ?? '');
    recB += whole && v.charCodeAt(0) === 0 ? Number(whole[1]) : Number(await redis.cmd('HSTRLEN', `${P}:req:${id}`, 'rec'));
    if (v[0] === 'r' || (v.charCodeAt(0) === 0 && v[1] === 'r')) deflated++;
  }
  const ns = sample.length;
  return { used: mem - stream, hashAvg: r1(hashB / ns), recAvg: r1(recB / ns), deflated: `${deflated}/${ns}` };
}

/** A Redis holding N requests whose watches have all ended, the pass never run. */
async function fill() {
  const redis = await startRedis();
  if (tuned) await redis.cmd('CONFIG', 'SET', 'hash-max-listpack-value', '2048');
  const mem0 = Number((await info(redis, 'memory')).used_memory);
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, bin, logLevel: 'warn', env: env(false) });
  const ids = Array.from({ length: N }, (_, i) => rid(`r${i}`));
  const t = Date.now();
  let next = 0;
  await Promise.all(Array.from({ length: 8 }, async () => {
    for (let i = next++; i < N; i = next++)
      for (let e = 0; e < STEPS.length; e++) {
        const s = await ingest(d, KEY, upstreamPayload({ rid: ids[i], status: STEPS[e], updatedAt: t + e }));
        if (s !== 200) throw new Error(`ingest ${s}`);
      }
  }));
  await until(async () => Number(await redis.cmd('ZCARD', `${P}:wend`)) === 0, { timeoutMs: 120000, stepMs: 500, msg: 'watches ended' });
  await d.stop();
  return { redis, ids, mem0 };
}

/** A second daemon (pass on or off) until the pass caught up (on) or for ms (off). */
async function second(redis, on, ms) {
  const top = (await redis.cmd('ZRANGE', `${P}:unwatch`, -1, -1, 'WITHSCORES'))[1];
  const e0 = await evalsha(redis);
  const t0 = Date.now();
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, bin, logLevel: 'warn', env: env(on) });
  const pid = d.proc.child.pid;
  // the pass's cursor ({P}:rzc: a version before the packed hash)
  if (on) await until(async () => [await redis.cmd('GET', `${P}:rzk`), await redis.cmd('GET', `${P}:rzc`)].includes(top), { timeoutMs: 120000, stepMs: 100, msg: 'pass done' });
  else await new Promise((r) => setTimeout(r, ms));
  const cpu = cpuMs(pid), e1 = await evalsha(redis), took = Date.now() - t0;
  await d.stop();
  return { ms: took, cpuMs: cpu, evalshaUsec: e1.usec - e0.usec, evalshaCalls: e1.calls - e0.calls };
}

const a = await fill();
const before = await memory(a.redis, a.ids);
const on = await second(a.redis, true, 0);
const after = await memory(a.redis, a.ids);
const b = await fill(); // the baseline: the same start and the same time, the pass off
const off = await second(b.redis, false, on.ms);
await a.redis.stop(); await b.redis.stop();
console.log(JSON.stringify({
  bin, requests: N, tuned,
  perRequestBefore: r1((before.used - a.mem0) / N), perRequestAfter: r1((after.used - a.mem0) / N),
  before, after, pass: on, baseline: off,
  redisUsecPerRecord: r1((on.evalshaUsec - off.evalshaUsec) / N),
  daemonUsecPerRecord: r1(((on.cpuMs - off.cpuMs) * 1000) / N),
}));
