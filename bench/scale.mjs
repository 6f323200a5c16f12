// bench/scale.mjs - the `make bench` scale-out scenario (issue 26): K daemons x M Redis masters
// x N partitions, one webhook endpoint. Every daemon of a layout serves the same deployment
// (same prefix, STATUSRELAY_PARTITIONS=N) and has its own bench_pub feeding its own
// POST /v1/ingest/upstream (64 in flight, closed loop); one bench_receiver verifies every
// signature. Rows per layout: deliveries/s (unique, verified), missing and duplicates, e2e
// p99, the per-event costs (daemon CPU µs per event+delivery summed over the daemons, Redis
// CPU µs per event+delivery summed over the masters and per master) and the busiest process
// (what bounds it). BENCHMARKS.md ("Scale-out") describes the knobs and the rows.
// Runs on: the bench driver's Node process (bench/run.mjs).
//
// Opt-in (not part of `all`): `make bench SCENARIO=scale`. Layouts from the environment:
//   SCALE_LAYOUTS      "KxMxN,..." (default "1x1x1,2x1x2,2x2x2")
//   SCALE_DAEMONS, SCALE_MASTERS, SCALE_PARTITIONS   one layout (an unset one: 2); used
//                      only when SCALE_LAYOUTS is not set
//   SCALE_EVENTS       events per daemon before BENCH_SCALE (default 30000)
//   SCALE_SECONDS      each bench_pub stops starting events after this (default 30)
// M = 1: one redis-server; M > 1: a Redis Cluster of M masters without replicas, slots split
// evenly as `redis-cli --cluster create` splits them (built here with CLUSTER ADDSLOTSRANGE
// and MEET, since redis-cli refuses fewer than 3 masters); spread partition tags put N
// partitions on N masters of such a split (docs/partitions.md "Tag schemes"). Every Redis
// runs with the bench's AOF settings (REDIS_PERSISTENCE).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  HELPERS, API_KEY, CLK_TCK, procCpuTicks, sc, r1, r2, log, now, sleep, until, RUN_DIR, startProc, freePort, waitPort,
  REDIS_PERSISTENCE, startRedis, redisAt, startReceiver, startDaemon, cpuMeter, redisCpuPer,
  waitDelivered, row,
} from './lib.mjs';

const PREFIX = 'bench';

/** The layouts of this run from the environment: [{ K, M, N, key }]. */
export function scaleLayouts(env = process.env) {
  const num = (name, v) => {
    if (!/^\d+$/.test(String(v)) || Number(v) < 1) throw new Error(`${name}: "${v}" is not a count >= 1`);
    return Number(v);
  };
  let specs;
  if (env.SCALE_LAYOUTS) specs = env.SCALE_LAYOUTS.split(',').map((s) => s.trim()).filter(Boolean);
  else if (env.SCALE_DAEMONS || env.SCALE_MASTERS || env.SCALE_PARTITIONS) specs = [`${env.SCALE_DAEMONS ?? 2}x${env.SCALE_MASTERS ?? 2}x${env.SCALE_PARTITIONS ?? 2}`];
  else specs = ['1x1x1', '2x1x2', '2x2x2'];
  const seen = {};
  return specs.map((s) => {
    const m = /^(\w+)x(\w+)x(\w+)$/.exec(s);
    if (!m) throw new Error(`SCALE_LAYOUTS: "${s}" is not KxMxN (daemons x masters x partitions)`);
    const L = { K: num('daemons', m[1]), M: num('masters', m[2]), N: num('partitions', m[3]) };
    if (L.N > 64) throw new Error(`SCALE_LAYOUTS: "${s}": at most 64 partitions (STATUSRELAY_PARTITIONS)`);
    // a layout named twice (to see the noise) is run twice: "2x2x2", "2x2x2-2"
    const key = `${L.K}x${L.M}x${L.N}`;
    seen[key] = (seen[key] ?? 0) + 1;
    return { ...L, key: seen[key] > 1 ? `${key}-${seen[key]}` : key };
  });
}

/** A module of tests/integration/lib, imported with the run directory as working directory
 * (proc.mjs creates ./out). Only its pure functions are used here. */
async function testLib(name) {
  const cwd = process.cwd();
  process.chdir(RUN_DIR);
  try { return await import(`../tests/integration/lib/${name}`); } finally { process.chdir(cwd); }
}

/** The slot ranges `redis-cli --cluster create` gives M masters (its clusterManagerCommandCreate). */
function evenSlots(M) {
  const per = 16384 / M, out = [];
  let first = 0, cursor = 0;
  for (let i = 0; i < M; i++) {
    let last = Math.round(cursor + per - 1);
    if (last > 16383 || i === M - 1) last = 16383;
    if (last < first) last = first;
    out.push([first, last]);
    first = last + 1;
    cursor += per;
  }
  return out;
}

/** The Redis of one layout: { url, masters: [{ port, pid, slots, partitions, deployment }],
 * stop() }. M = 1: one redis-server; else a cluster of M masters, no replicas. */
async function startScaleRedis(L, partSlot, deploySlot) {
  if (L.M === 1) {
    const r = await startRedis(`sc-redis-${L.key}`);
    return { url: r.url, masters: [{ port: r.port, pid: r.pid, partitions: Array.from({ length: L.N }, (_, k) => k), deployment: true }], stop: () => r.proc.stop() };
  }
  const ranges = evenSlots(L.M);
  const nodes = [];
  const stop = () => Promise.all(nodes.map((n) => n.proc.stop()));
  try {
    for (let j = 0; j < L.M; j++) {
      const port = await freePort();
      const dir = fs.mkdtempSync(path.join(RUN_DIR, `sc-redis-${L.key}-${j}-`));
      const proc = startProc(`sc-redis-${L.key}-${j}`, 'redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir,
        ...REDIS_PERSISTENCE, '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '5000', '--protected-mode', 'yes']);
      nodes.push({ port, proc, pid: proc.pid, r: redisAt(port), slots: ranges[j] });
    }
    for (const n of nodes) await waitPort(n.port);
    for (const n of nodes) {
      const ok = await n.r.cmd('CLUSTER', 'ADDSLOTSRANGE', String(n.slots[0]), String(n.slots[1]));
      if (ok !== 'OK') throw new Error(`CLUSTER ADDSLOTSRANGE on ${n.port}: ${ok?.message ?? ok}`);
    }
    for (const n of nodes.slice(1)) await n.r.cmd('CLUSTER', 'MEET', '127.0.0.1', String(nodes[0].port));
    const ok = await until(async () => {
      for (const n of nodes) {
        const info = await n.r.cmd('CLUSTER', 'INFO');
        if (!/cluster_state:ok/.test(info) || !new RegExp(`cluster_known_nodes:${L.M}\\b`).test(info) || !/cluster_slots_assigned:16384\b/.test(info)) return false;
      }
      return true;
    }, 30000, 200);
    if (!ok) throw new Error(`cluster of ${L.M} masters: no cluster_state:ok on every node within 30 s`);
  } catch (e) {
    await stop();
    throw e;
  }
  const inRange = (s, [lo, hi]) => s >= lo && s <= hi;
  return {
    url: `redis-cluster://127.0.0.1:${nodes[0].port}`,
    masters: nodes.map((n) => ({ port: n.port, pid: n.pid, slots: n.slots, partitions: partSlot.map((s, k) => (inRange(s, n.slots) ? k : -1)).filter((k) => k >= 0), deployment: inRange(deploySlot, n.slots) })),
    stop,
  };
}

/** Script calls so far on one Redis, from INFO commandstats: { calls, usec } of EVAL,
 * EVALSHA, FCALL and their _RO forms (the daemon's top-level work; the commands a script runs
 * are counted apart by Redis and are in the script's usec already). */
async function scriptStats(port) {
  const i = await redisAt(port).info('commandstats');
  let calls = 0, usec = 0;
  for (const c of ['eval', 'evalsha', 'eval_ro', 'evalsha_ro', 'fcall', 'fcall_ro']) {
    const m = /calls=(\d+),usec=(\d+)/.exec(i[`cmdstat_${c}`] ?? '');
    if (m) { calls += Number(m[1]); usec += Number(m[2]); }
  }
  return { calls, usec };
}

/** bench_pub as a process of its own; resolves with its summary line. cpuS(): the CPU it
 * has used, read from /proc every 100 ms while it runs (it exits before the window ends, and
 * once it has been reaped /proc has nothing: up to 100 ms of its CPU may be missed). */
function startPub(name, url, args, timeoutMs) {
  const p = startProc(name, path.join(HELPERS, 'bench_pub'), [...args, url]);
  const t = setTimeout(() => p.stop('SIGTERM'), timeoutMs);
  let ticks = 0;
  const iv = setInterval(() => { const x = procCpuTicks(p.pid); if (x != null) ticks = x; }, 100);
  const result = p.done.then(() => {
    clearTimeout(t);
    clearInterval(iv);
    const last = [...p.lines].reverse().find((l) => l.startsWith('{'));
    if (!last) throw new Error(`${name}: no JSON output (exit ${p.code ?? p.sig}); log ${p.logPath}`);
    return JSON.parse(last);
  });
  return { pid: p.pid, result, cpuS: () => ticks / CLK_TCK };
}

/** One layout: its Redis, K daemons, one endpoint, K bench_pubs at once. */
async function scaleLayout(rx, L, i, lib) {
  const tags = Array.from({ length: L.N }, (_, k) => lib.partTag(PREFIX, k, L.N));
  const slotOf = (tag) => lib.crc16(tag.slice(1, -1)) & 16383;
  const R = await startScaleRedis(L, tags.map(slotOf), slotOf(`{${PREFIX}}`));
  const ds = [];
  try {
    const env = { STATUSRELAY_PARTITIONS: String(L.N), STATUSRELAY_REDIS_PREFIX: PREFIX };
    const redis = { url: R.url };
    for (let k = 0; k < L.K; k++) ds.push(await startDaemon(`sc-daemon-${L.key}-${k}`, redis, { env }));
    // the fan-out leases spread over the daemons (docs/partitions.md "Fan-out") before the load
    const masterOf = (k) => R.masters.find((m) => m.partitions.includes(k));
    const holders = async () => Promise.all(tags.map((t, k) => redisAt(masterOf(k).port).cmd('GET', `${t}:fanout`).catch(() => null)));
    const want = Math.min(L.K, L.N);
    const t0 = now();
    const spread = await until(async () => { const h = await holders(); return !h.includes(null) && new Set(h).size === want; }, 20000, 200);
    const leaseMs = now() - t0;
    const held = await holders();
    log(`scale ${L.key}: fan-out leases ${spread ? `spread over ${want} daemon(s) in ${leaseMs} ms` : `NOT spread within 20 s (${new Set(held).size} holder(s))`}`);

    const wh = await ds[0].addWebhook(`${rx.base}/s/${L.key}`);
    await rx.secret(`/s/${L.key}`, wh.secret);
    // every daemon reads the endpoint from Redis; give them a moment to see it
    await sleep(500);
    await rx.reset();
    const E = sc(Number(process.env.SCALE_EVENTS ?? 30000));
    const secs = Number(process.env.SCALE_SECONDS ?? 30);
    log(`scale ${L.key}: ${L.K} daemon(s) x ${L.M} master(s) x ${L.N} partition(s): ${E} events per daemon (${secs} s at most), 1 endpoint`);
    const rc0 = await Promise.all(R.masters.map((m) => redisAt(m.port).cpu()));
    const ss0 = await Promise.all(R.masters.map((m) => scriptStats(m.port)));
    const tStart = now();
    const pubs = ds.map((d, k) => startPub(`sc-pub-${L.key}-${k}`, d.ingestUrl,
      // request ids "0x" + prefix + index: a hex prefix of its own per layout and daemon
      ['--sign-key', API_KEY, '--prefix', `e${i.toString(16)}${k.toString(16).padStart(2, '0')}`, '--count', String(E), '--concurrency', '64', '--seconds', String(secs)], (secs + 60) * 1000));
    const pids = { receiver: rx.pid, ...Object.fromEntries(ds.map((d, k) => [`daemon${k}`, d.pid])), ...Object.fromEntries(R.masters.map((m, j) => [`redis${j}`, m.pid])) };
    const meter = cpuMeter(pids);
    const ps = await Promise.all(pubs.map((p) => p.result));
    const tIngestEnd = now();
    const accepted = ps.reduce((a, p) => a + p.results.accepted, 0);
    const st = await waitDelivered(rx, accepted, Math.max(60000, 4 * (tIngestEnd - tStart)));
    const cpu = meter();
    // the load generators (gone by now: their CPU as last read while they ran)
    pubs.forEach((p, k) => { pids[`pub${k}`] = p.pid; cpu[`pub${k}`] = { cpuS: r2(p.cpuS()), cpuPct: r1((100 * p.cpuS()) / cpu.seconds) }; });
    const rc1 = await Promise.all(R.masters.map((m) => redisAt(m.port).cpu()));
    const ss1 = await Promise.all(R.masters.map((m) => scriptStats(m.port)));
    const perMaster = R.masters.map((m, j) => ({ ...m, cpuPct: cpu[`redis${j}`].cpuPct, ...redisCpuPer(rc0[j], rc1[j], accepted, st.unique) }));
    const redisAll = redisCpuPer({ s: rc0.reduce((a, c) => a + c.s, 0), children: rc0.reduce((a, c) => a + c.children, 0) }, { s: rc1.reduce((a, c) => a + c.s, 0), children: rc1.reduce((a, c) => a + c.children, 0) }, accepted, st.unique);
    const daemonCpuS = ds.reduce((a, _, k) => a + (cpu[`daemon${k}`].cpuS ?? 0), 0);
    const ops = accepted + st.unique;
    const scripts = ss1.map((x, j) => ({ calls: x.calls - ss0[j].calls, usec: x.usec - ss0[j].usec }));
    const scriptCalls = scripts.reduce((a, x) => a + x.calls, 0), scriptUsec = scripts.reduce((a, x) => a + x.usec, 0);
    const keys = [];
    for (const m of R.masters) keys.push(await redisAt(m.port).cmd('DBSIZE'));
    const procs = Object.keys(pids).map((name) => ({ name, cpuPct: cpu[name].cpuPct ?? 0 }));
    const busiest = procs.reduce((a, b) => (b.cpuPct > a.cpuPct ? b : a));
    const out = {
      layout: L, prefix: PREFIX, redisUrl: R.url, leases: { spread, ms: leaseMs, holders: held },
      eventsPerDaemon: E, ingest: ps, accepted, errors: ps.reduce((a, p) => a + p.errors, 0),
      ingestRate: r1(accepted / Math.max(0.001, (tIngestEnd - tStart) / 1000)),
      delivered: st.unique, missing: Math.max(0, accepted - st.unique), duplicates: st.duplicates, sigOk: st.sigOk, sigBad: st.sigBad, complete: st.complete,
      sustainedRate: r1(st.unique / Math.max(0.001, (st.lastMs - tStart) / 1000)), wallS: r2((st.lastMs - tStart) / 1000),
      e2e: st.e2e, cpu, machineCpuPct: cpu.machineCpuPct,
      daemonCpuS: r2(daemonCpuS), daemonUsPerOp: ops ? r1((daemonCpuS * 1e6) / ops) : null, daemonPctSum: r1(ds.reduce((a, _, k) => a + (cpu[`daemon${k}`].cpuPct ?? 0), 0)),
      redisCpu: redisAll, masters: perMaster.map(({ port, pid, slots, partitions, deployment, cpuPct, cpuS, usPerOp }) => ({ port, pid, slots, partitions, deployment, cpuPct, cpuS, usPerOp })),
      keysPerMaster: keys, busiest,
      // work counts (machine speed and load do not change them much): script calls and the
      // µs Redis itself measured inside them, per event+delivery, summed and per master
      // (Redis's usec is wall time inside the call: on a loaded box it counts waits for a core)
      scripts: { callsPer1k: ops ? r1((1000 * scriptCalls) / ops) : null, usPerOp: ops ? r1(scriptUsec / ops) : null, usPerCall: scriptCalls ? r1(scriptUsec / scriptCalls) : null, perMaster: scripts.map((x) => ({ ...x, callsPer1k: ops ? r1((1000 * x.calls) / ops) : null })) },
    };
    return out;
  } finally {
    for (const d of ds) await d.proc.stop();
    await R.stop();
  }
}

const pct = (x) => `${x ?? 'n/a'}%`;

export async function scale() {
  const layouts = scaleLayouts();
  const lib = await testLib('cluster.mjs');
  const out = { layouts: {}, order: layouts.map((L) => L.key), cores: os.cpus().length };
  const rx = await startReceiver('sc-receiver', { verify: true });
  try {
    for (const [i, L] of layouts.entries()) {
      // a layout that fails (say a cluster that does not form on some box) is reported and
      // the next one runs
      try { out.layouts[L.key] = await scaleLayout(rx, L, i, lib); } catch (e) {
        log(`scale ${L.key}: FAILED: ${e.stack ?? e}`);
        out.layouts[L.key] = { error: String(e.message ?? e) };
      }
    }
  } finally {
    await rx.proc.stop();
  }
  const base = out.layouts[layouts[0].key];
  for (const L of layouts) {
    const o = out.layouts[L.key];
    const label = `${L.key} (${L.K} daemon${L.K > 1 ? 's' : ''}, ${L.M === 1 ? '1 Redis' : `${L.M} masters`}, ${L.N} partition${L.N > 1 ? 's' : ''})`;
    if (o.error) { row('scale', `layout failed, ${label}`, null, '', { note: o.error.slice(0, 200) }); continue; }
    const ds = Array.from({ length: L.K }, (_, k) => pct(o.cpu[`daemon${k}`].cpuPct));
    const ms = o.masters.map((m, j) => `redis${j} ${m.usPerOp} µs at ${pct(m.cpuPct)} of a core (partitions ${m.partitions.join(',') || 'none'}${m.deployment ? ', deployment slot' : ''}; ${o.keysPerMaster[j]} keys)`);
    const vs = o !== base && base?.sustainedRate ? ` = x${r2(o.sustainedRate / base.sustainedRate)} of ${layouts[0].key}` : '';
    const lease = o.leases.spread ? `fan-out leases on ${new Set(o.leases.holders).size} daemon(s)` : `fan-out leases NOT spread (${new Set(o.leases.holders).size} holder(s))`;
    row('scale', `deliveries/s, 1 endpoint, ${label}`, o.sustainedRate, 'deliveries/s', {
      note: `${o.delivered} unique verified deliveries of ${o.accepted} events accepted (${o.eventsPerDaemon} per daemon, ${o.ingestRate}/s in), first event sent -> last delivery ${o.wallS} s${vs}; ${lease}; machine ${pct(o.machineCpuPct)} of ${out.cores * 100}%` });
    row('scale', `missing deliveries, ${label}`, o.missing, 'deliveries', { target: '0', pass: o.missing === 0,
      note: `duplicates ${o.duplicates}, signatures ok ${o.sigOk} / bad ${o.sigBad}, ingest errors ${o.errors}${o.complete ? '' : '; INCOMPLETE'}` });
    row('scale', `e2e latency p99 (closed loop, 64 in flight per daemon), ${label}`, o.e2e?.p99Ms ?? null, 'ms (p99)', { note: `p50 ${o.e2e?.p50Ms ?? 'n/a'} ms (queueing in a closed loop, not a latency target)` });
    row('scale', `daemon CPU per event+delivery, summed over daemons, ${label}`, o.daemonUsPerOp, 'µs', {
      note: `${o.daemonCpuS} s / (${o.accepted} events + ${o.delivered} deliveries) (/proc, all threads); daemons ${ds.join(' / ')} of a core, ${pct(o.daemonPctSum)} together` });
    row('scale', `Redis CPU per event+delivery, summed over masters, ${label}`, o.redisCpu.usPerOp, 'µs', {
      note: `${o.redisCpu.cpuS} s (INFO cpu, AOF fork children ${o.redisCpu.childrenCpuS} s not counted); per master: ${ms.join('; ')}` });
    const sp = o.scripts;
    row('scale', `Redis script calls per 1,000 events+deliveries, summed over masters, ${label}`, sp.callsPer1k, 'calls', {
      note: `INFO commandstats, EVAL/EVALSHA/FCALL and their _RO forms (a work count: the batching); per master ${sp.perMaster.map((x, j) => `redis${j} ${x.callsPer1k}`).join(' / ')}; Redis's own time inside them ${sp.usPerCall} µs per call, ${sp.usPerOp} µs per event+delivery (wall time: waits for a core included on a loaded box)` });
    // a process near a whole core bounds the layout; with every core of the box busy (this
    // run's processes and whatever else runs) the box does, whichever process is busiest
    const boxFull = o.machineCpuPct != null && o.machineCpuPct >= 90 * out.cores;
    row('scale', `busiest process (what bounds it), ${label}`, o.busiest.cpuPct, '% of a core', { ceiling: 100, ceilingName: 'one core',
      note: `${o.busiest.name}${boxFull ? ` (but the box is full: machine ${pct(o.machineCpuPct)} of ${out.cores * 100}%, so the cores bound it)` : ''}; all: ${Object.keys(o.cpu).filter((k) => o.cpu[k]?.cpuPct !== undefined).map((k) => `${k} ${pct(o.cpu[k].cpuPct)}`).join(', ')}` });
  }
  return out;
}
