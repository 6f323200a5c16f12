// bench/cluster.mjs - the `make bench` cluster scenario (issue 16): the webhook delivery runs
// of the webhooks scenario (bench/lib.mjs) with 1 Redis and with a 3-master Redis Cluster, with
// 1 and 3 partitions; deliveries/s, latency, daemon RSS and the CPU of every Redis master.
// BENCHMARKS.md ("cluster") describes the layouts and the rows.
// Runs on: the bench driver's Node process (bench/run.mjs).
import os from 'node:os';
import {
  sc, r1, r2, log, RUN_DIR, otherStops, procMem,
  REDIS_PERSISTENCE, startRedis, redisAt, startReceiver, startDaemon, row,
  ceilings, sustainedRun, backlogRun, latencyRun,
} from './lib.mjs';

// ---- cluster (issue 16: 1 and 3 Redis masters) ------------------------------------------------

/** A module of tests/integration/lib, imported with the run directory as working directory:
 * proc.mjs writes its processes' logs to ./out (so they land in the run directory). */
async function testLib(name) {
  const cwd = process.cwd();
  process.chdir(RUN_DIR);
  try { return await import(`../tests/integration/lib/${name}`); } finally { process.chdir(cwd); }
}

/** The layouts measured: today's; the partitions' cost alone; Redis Cluster's cost alone
 * (every key on one master of three); the scaled-out one (one partition per master). */
const LAYOUTS = [
  { key: 'single', label: '1 Redis, 1 partition', masters: 1, partitions: 1 },
  { key: 'single3', label: '1 Redis, 3 partitions', masters: 1, partitions: 3 },
  { key: 'cluster1', label: '3 masters, 1 partition', masters: 3, partitions: 1 },
  { key: 'cluster3', label: '3 masters, 3 partitions', masters: 3, partitions: 3 },
];

/** The Redis side of one layout: url and prefix for the daemon, masters [{ port, pid }]
 * (a cluster's in partition order - master k serves partition k; with one partition the
 * master of the deployment slot, which then holds every key - then the others; one entry
 * for a single Redis), a `redis` whose cpu() / usedMemory() sum every master (what
 * sustainedRun and backlogRun read), and stop(). A cluster is 3 masters without replicas
 * (tests/integration/lib/cluster.mjs) with the bench's AOF settings, and a prefix whose
 * partitions fall on different masters. */
async function startLayoutRedis(L) {
  if (L.masters === 1) {
    const r = await startRedis(`cl-redis-${L.key}`);
    return { url: r.url, prefix: null, masters: [{ port: r.port, pid: r.pid }], redis: r, stop: () => r.proc.stop() };
  }
  const { startCluster } = await testLib('cluster.mjs');
  const cl = await startCluster({ masters: L.masters, replicas: 0, args: REDIS_PERSISTENCE });
  const stop = () => cl.stop();
  otherStops.add(stop);
  // with one partition its tag is the deployment's, {bench}
  const spread = L.partitions > 1 ? await cl.spreadPrefix('bench', L.partitions)
    : { prefix: 'bench', owners: [await cl.ownerOf(await cl.slotOf('{bench}'))] };
  const idle = (await cl.nodes()).filter((x) => x.flags.includes('master') && !spread.owners.some((o) => o.id === x.id));
  const masters = [];
  for (const o of [...spread.owners, ...idle]) {
    const server = await redisAt(o.port).info('server');
    masters.push({ port: o.port, pid: Number(server.process_id) });
  }
  const nodes = masters.map((m) => redisAt(m.port));
  const sum = async (f) => (await Promise.all(nodes.map(f))).reduce((x, y) => ({ s: x.s + y.s, children: x.children + y.children }));
  const redis = {
    cpu: () => sum((n) => n.cpu()),
    usedMemory: async () => (await Promise.all(nodes.map((n) => n.usedMemory()))).reduce((x, y) => x + y, 0),
  };
  return { url: cl.url(spread.owners[0].port), prefix: spread.prefix, masters, redis, stop: async () => { otherStops.delete(stop); await stop(); } };
}

/** One layout: its Redis, a daemon with STATUSRELAY_PARTITIONS, one endpoint on the shared
 * receiver; the webhooks scenario's sustained, backlog and 5,000 events/s latency runs. */
async function clusterLayout(rx, L, i) {
  const R = await startLayoutRedis(L);
  try {
    const env = { STATUSRELAY_PARTITIONS: String(L.partitions) };
    if (R.prefix) env.STATUSRELAY_REDIS_PREFIX = R.prefix;
    const d = await startDaemon(`cl-daemon-${L.key}`, R, { env });
    const wh = await d.addWebhook(`${rx.base}/cl/${L.key}`);
    await rx.secret(`/cl/${L.key}`, wh.secret);
    const pids = { daemon: d.pid, receiver: rx.pid, ...Object.fromEntries(R.masters.map((m, k) => [`redis${k}`, m.pid])) };
    const ctx = { d, rx, pids, redis: R.redis };
    const N = sc(60000);
    log(`cluster, ${L.label}: ${N} events, 1 endpoint (sustained)`);
    const { a, st } = await sustainedRun(ctx, N, `c${i}a`, `cl-pub-${L.key}`);
    log(`cluster, ${L.label}: backlog of ${N} events`);
    const b = await backlogRun(ctx, N, a.sustainedRate, `c${i}b`, `cl-pub-backlog-${L.key}`);
    const lat = await latencyRun(ctx, 5000, Math.max(10000, sc(50000)), `c${i}l`, `cl-pub-lat-${L.key}`);
    // where the data went: keys per master (each holds one partition's slot, plus the
    // deployment slot on one of them)
    const keys = [];
    for (const m of R.masters) keys.push(await redisAt(m.port).cmd('DBSIZE'));
    const out = {
      layout: L, prefix: R.prefix, masters: R.masters, keysPerMaster: keys,
      sustained: a, sustainedComplete: st.complete, backlog: b, latency: lat,
      daemonPeakRssMiB: r1(procMem(d.pid).hwmKiB / 1024), daemonReadyMs: d.readyMs,
    };
    await d.proc.stop();
    return out;
  } finally {
    await R.stop();
  }
}

/** Per master, % of one core over a cpuMeter window: [45.1, 40.2, ...] (partition order). */
const masterPcts = (cpu, n) => Array.from({ length: n }, (_, k) => cpu[`redis${k}`]?.cpuPct ?? null);
const pctList = (xs) => xs.map((x) => `${x}%`).join(' / ');
/** The whole machine's CPU over a window, of what it has: "187% of 200%". */
const mach = (cpu) => `${cpu.machineCpuPct}% of ${os.cpus().length * 100}%`;
/** The busiest master's % of one core over a window (o: a layout's results). */
const busiestOf = (o, cpu) => Math.max(...masterPcts(cpu, o.masters.length).map((x) => x ?? 0));
/** Where Redis would become the bound: the rate at which the busiest master would use a
 * whole core, extrapolated linearly from the rate and its CPU in the same window (null when
 * it used too little to tell). */
const redisBound = (rate, pct) => (rate != null && pct >= 2 ? Math.round((rate * 100) / pct) : null);

export async function cluster(webhookCeilings) {
  const out = { layouts: {} };
  const rx = await startReceiver('cl-receiver', { verify: true });
  // the receiver's ceiling of this run: the webhooks scenario's when it ran, else measured here
  out.ceilingsFrom = webhookCeilings ? 'webhooks scenario (same run)' : 'this scenario';
  out.ceilings = webhookCeilings ?? await ceilings(rx);
  const C = out.ceilings;
  for (const [i, L] of LAYOUTS.entries()) out.layouts[L.key] = await clusterLayout(rx, L, i);
  await rx.proc.stop();

  const base = out.layouts.single;
  const vs = (x, y) => (x != null && y ? ` = x${r2(x / y)} of 1 Redis, 1 partition` : '');
  const ceil = { ceiling: C.curl16.rps, ceilingName: 'bare libcurl c16' };
  // the headline: issue 16's "deliveries/s with 1 and with 3 Redis masters"
  {
    const one = base, three = out.layouts.cluster3;
    const busiest = busiestOf;
    const x = (p, q) => (p != null && q ? r2(p / q) : null);
    const bound = (o) => redisBound(o.sustained.sustainedRate, busiest(o, o.sustained.cpu));
    row('cluster', 'deliveries/s with 3 masters (3 partitions) / with 1 Redis (1 partition), sustained', x(three.sustained.sustainedRate, one.sustained.sustainedRate), 'x', {
      note: `${three.sustained.sustainedRate} / ${one.sustained.sustainedRate} deliveries/s; draining a backlog x${x(three.backlog.drainRate, one.backlog.drainRate)} (${three.backlog.drainRate} / ${one.backlog.drainRate}); busiest master ${busiest(three, three.sustained.cpu)}% vs ${busiest(one, one.sustained.cpu)}% of a core, so Redis would be the bound at ~${bound(three)} vs ~${bound(one)} deliveries/s (x${x(bound(three), bound(one))}, extrapolated); Redis CPU per event+delivery, all masters, ${three.sustained.redisCpu.usPerOp} vs ${one.sustained.redisCpu.usPerOp} µs` });
  }
  for (const L of LAYOUTS) {
    const o = out.layouts[L.key];
    const { sustained: a, backlog: b, latency: lp } = o;
    const n = o.masters.length;
    const isBase = L.key === 'single';
    const keys = n > 1 ? `; keys per master ${o.keysPerMaster.join(' / ')}` : '';
    row('cluster', `deliveries/s, 1 endpoint, sustained (ingest + deliver), ${L.label}`, a.sustainedRate, 'deliveries/s', { ...ceil,
      note: `${a.delivered} of ${a.ingest.results.accepted} events, first event sent -> last delivery${isBase ? '' : vs(a.sustainedRate, base.sustained.sustainedRate)}; Redis CPU per master ${pctList(masterPcts(a.cpu, n))} of a core, daemon ${a.cpu.daemon.cpuPct}%, receiver ${a.cpu.receiver.cpuPct}%, machine ${mach(a.cpu)}${keys}${a.complete ? '' : `; INCOMPLETE: ${a.delivered} of ${a.ingest.results.accepted}`}` });
    row('cluster', `deliveries/s, 1 endpoint, draining a backlog (${b.backlog}), ${L.label}`, b.drainRate, 'deliveries/s', { ...ceil,
      note: `resume -> last delivery ${b.drainS} s${isBase ? '' : vs(b.drainRate, base.backlog.drainRate)}; Redis CPU per master ${pctList(masterPcts(b.cpu, n))}, daemon ${b.cpu.daemon.cpuPct}%, machine ${mach(b.cpu)}; duplicates ${b.duplicates}${b.complete ? '' : `; INCOMPLETE: ${b.delivered} of ${b.ingest.results.accepted}`}` });
    const busiest = (cpu) => busiestOf(o, cpu);
    row('cluster', `Redis CPU of the busiest master, sustained, ${L.label}`, busiest(a.cpu), '% of a core', { ceiling: 100, ceilingName: 'one core: a master\'s limit',
      note: `per master ${pctList(masterPcts(a.cpu, n))} (/proc utime+stime over ${a.cpu.seconds} s) at ${a.sustainedRate} deliveries/s: a core at ~${redisBound(a.sustainedRate, busiest(a.cpu))}/s (extrapolated); all masters ${a.redisCpu.usPerOp} µs per event+delivery` });
    row('cluster', `Redis CPU of the busiest master, draining, ${L.label}`, busiest(b.cpu), '% of a core', { ceiling: 100, ceilingName: 'one core: a master\'s limit',
      note: `per master ${pctList(masterPcts(b.cpu, n))} over ${b.cpu.seconds} s at ${b.drainRate} deliveries/s: a core at ~${redisBound(b.drainRate, busiest(b.cpu))}/s (extrapolated); all masters ${b.redisCpu.usPerOp} µs per delivery` });
    const lpOk = lp.achievedRate >= 0.95 * lp.rate;
    row('cluster', `e2e latency p99 at ${lp.rate} events/s offered by bench_pub, ${L.label}`, lp.e2e.p99Ms, 'ms (p99)', {
      note: `p50 ${lp.e2e.p50Ms} ms, p99.9 ${lp.e2e.p999Ms} ms; achieved ${lp.achievedRate}/s${lpOk ? '' : ' (less than 95% of the offer taken)'}; Redis CPU per master ${pctList(masterPcts(lp.cpu, n))}, daemon ${lp.cpu.daemon.cpuPct}%, machine ${mach(lp.cpu)}${lp.complete ? '' : `; INCOMPLETE: ${lp.delivered} of ${lp.expected}`}` });
    row('cluster', `daemon peak RSS, ${L.label}`, o.daemonPeakRssMiB, 'MiB', { note: `after ${a.delivered + b.delivered + lp.delivered} deliveries` });
  }
  return out;
}
