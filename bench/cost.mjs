// bench/cost.mjs - the `make bench` cost scenario (issue 26): CPU per event and per delivery of
// the daemon and of Redis, for one endpoint, 100 endpoints and the upstream-websocket path,
// with an optional "before" binary measured the same way in the same run (BENCHMARKS.md
// "Cost per event").
// Runs on: the bench driver's Node process (bench/run.mjs).
//
// Opt-in (not part of `all`): `make bench SCENARIO=cost`. Environment:
//   COST_BEFORE_BIN   another statusrelay binary (e.g. an older commit's) measured in
//                     alternation with this one; its figures are the rows' "ceiling" column
//                     and the ratio is after / before
//   COST_ROUNDS       rounds of every measurement per binary (default 2; each row keeps the
//                     lowest: on a shared machine noise only adds CPU)
//
// Each measurement starts its own Redis (the bench's AOF settings), receiver and daemon, so no
// run inherits another's keys. CPU is read from /proc for the daemon and Redis (all threads):
//   events        N events by bench_pub into POST /v1/ingest/upstream (64 in flight), no
//                 endpoint: CPU from the first POST until every event is accepted, + 1 s
//   1 endpoint    the same N events, one endpoint on bench_receiver --verify: until the last
//                 delivery; per delivery = (this - events) / N
//   100 endpoints E events, 100 endpoints: until the last of 100 E deliveries; per delivery =
//                 (this - E x per event) / 100 E
//   websocket     the simulator in load mode (~1,000 events/s for 8 s, well below what the box
//                 keeps up with) -> upstream websocket -> 1 endpoint, every new request tracked
//                 by POST /v1/requests as an integrator would: per accepted event+delivery,
//                 tracking and the first-seen facts reads included (the simulator is the same
//                 binary, BIN, for both columns)
import fs from 'node:fs';
import {
  BIN, API_KEY, sc, r1, log, sleep, now, startRedis, startReceiver, startDaemon, startSim,
  simTracker, acceptedEvents, cpuMeter, pub, waitDelivered, http, until, row,
} from './lib.mjs';

const perUs = (cpuS, n) => (cpuS != null && n > 0 ? (cpuS * 1e6) / n : null);

async function stack(bin, name, endpoints, sim) {
  const redis = await startRedis(`${name}-redis`);
  const rx = await startReceiver(`${name}-rx`, { verify: true });
  const env = sim ? { STATUSRELAY_UPSTREAM_API_URL: sim.base, STATUSRELAY_UPSTREAM_WS_URL: sim.wsUrl } : {};
  const d = await startDaemon(`${name}-d`, redis, { bin, env });
  for (let i = 0; i < endpoints; i++) {
    const wh = await d.addWebhook(`${rx.base}/h/${i}`);
    await rx.secret(`/h/${i}`, wh.secret);
  }
  await rx.reset();
  return {
    redis, rx, d, pids: { daemon: d.pid, redis: redis.pid },
    async stop() { await d.proc.stop(); await rx.proc.stop(); await redis.proc.stop(); },
  };
}

/** N events by bench_pub; waits for `deliveries` unique deliveries (0: every event accepted).
 * Returns { events, deliveries, daemonS, redisS }. */
async function pubRun(s, N, prefix, perEvent) {
  const m = cpuMeter(s.pids);
  const p = await pub(`pub-${prefix}`, s.d.ingestUrl, ['--sign-key', API_KEY, '--prefix', prefix, '--count', String(N), '--concurrency', '64', '--seconds', '60'], 120000);
  const events = p.results.accepted;
  let deliveries = 0;
  if (perEvent > 0) {
    const st = await waitDelivered(s.rx, events * perEvent, 180000);
    deliveries = st.unique;
  } else {
    await until(async () => acceptedEvents(await s.d.metrics()) >= events, 60000, 100);
  }
  await sleep(1000); // what follows an event (fan-out and dashboard reads) is its cost too
  const cpu = m();
  return { events, deliveries, daemonS: cpu.daemon.cpuS, redisS: cpu.redis.cpuS };
}

async function wsRun(bin, tag) {
  const sim = await startSim(`cost-${tag}-sim`);
  if (!sim) return null;
  const s = await stack(bin, `cost-${tag}-ws`, 1, sim);
  try {
    const secs = 8, reqRate = 250; // ~3-4 events per request: ~1,000 events/s
    const acc0 = acceptedEvents(await s.d.metrics());
    const tr = simTracker(sim, s.d);
    const m = cpuMeter(s.pids);
    await http('POST', `${sim.base}/_sim/load`, { rate: reqRate, durationMs: secs * 1000 });
    await sleep(secs * 1000);
    await until(async () => { const x = await sim.stats(); return !x.load.running && x.requests.active === 0; }, 30000, 250);
    await tr.stop();
    await sleep(500);
    const events = acceptedEvents(await s.d.metrics()) - acc0;
    const st = await waitDelivered(s.rx, events, 120000);
    await sleep(1000);
    const cpu = m();
    return { events, deliveries: st.unique, daemonS: cpu.daemon.cpuS, redisS: cpu.redis.cpuS, p99: st.e2e?.p99Ms ?? null };
  } finally {
    await s.stop();
    await sim.proc.stop();
  }
}

/** Every measurement of one binary: { key: { daemon, redis } } in µs. */
async function measure(bin, tag, round) {
  const N = sc(20000), E = Math.max(10, sc(400));
  const out = {};
  let s = await stack(bin, `cost-${tag}-ev`, 0);
  const ev = await pubRun(s, N, `ce${round}`, 0);
  await s.stop();
  out.event = { daemon: perUs(ev.daemonS, ev.events), redis: perUs(ev.redisS, ev.events), n: ev.events };
  s = await stack(bin, `cost-${tag}-1`, 1);
  const one = await pubRun(s, N, `c1${round}`, 1);
  await s.stop();
  out.eventDelivery1 = { daemon: perUs(one.daemonS, one.events), redis: perUs(one.redisS, one.events), n: one.deliveries };
  out.delivery1 = { daemon: out.eventDelivery1.daemon - out.event.daemon, redis: out.eventDelivery1.redis - out.event.redis };
  s = await stack(bin, `cost-${tag}-100`, 100);
  const hundred = await pubRun(s, E, `c100${round}`, 100);
  await s.stop();
  const per100 = (cpuS, perEv) => (hundred.deliveries > 0 ? (cpuS * 1e6 - hundred.events * perEv) / hundred.deliveries : null);
  out.delivery100 = { daemon: per100(hundred.daemonS, out.event.daemon), redis: per100(hundred.redisS, out.event.redis), n: hundred.deliveries };
  const ws = await wsRun(bin, tag);
  if (ws) out.ws = { daemon: perUs(ws.daemonS, ws.events), redis: perUs(ws.redisS, ws.events), n: ws.events, p99: ws.p99 };
  log(`cost ${tag}: ${JSON.stringify(out)}`);
  return out;
}

const ROWS = [
  ['event', 'per event, no endpoint (ingest, apply, the event stream)'],
  ['delivery1', 'per delivery, 1 endpoint (1-endpoint run minus the no-endpoint run)'],
  ['eventDelivery1', 'per event and its delivery, 1 endpoint (issue 26: daemon <= 33; Redis <= 20 per event or delivery, so <= 40 here)'],
  ['delivery100', 'per delivery, 100 endpoints (the run minus its events at the per-event cost)'],
  ['ws', 'per event and its delivery, upstream websocket at ~1,000 events/s, 1 endpoint (tracking and facts reads included)'],
];

export async function cost() {
  const rounds = Math.max(1, Number(process.env.COST_ROUNDS ?? 2));
  const before = process.env.COST_BEFORE_BIN ? fs.realpathSync(process.env.COST_BEFORE_BIN) : null;
  const bins = before ? [['before', before], ['after', BIN]] : [['after', BIN]];
  log(`cost: ${rounds} round(s) of ${bins.map(([k, b]) => `${k} ${b}`).join(' and ')}`);
  const runs = { before: [], after: [] };
  const t0 = now();
  // every process of a round has names of its own (a log or port file of an earlier round is
  // never read as this one's)
  for (let r = 0; r < rounds; r++) for (const [k, b] of bins) runs[k].push(await measure(b, `${k}${r + 1}`, r));
  // the lowest of the rounds (noise on a shared box only adds CPU)
  const best = (list, key, who) => {
    const v = list.map((x) => x[key]?.[who]).filter((x) => x != null && Number.isFinite(x));
    return v.length ? Math.min(...v) : null;
  };
  const out = { rounds, before, after: BIN, runs, seconds: r1((now() - t0) / 1000) };
  for (const [key, label] of ROWS) {
    for (const who of ['daemon', 'redis']) {
      const a = best(runs.after, key, who), b = before ? best(runs.before, key, who) : null;
      // issue 26's targets: the daemon's per delivery (= per event and its delivery), Redis's
      // per event or delivery as the webhooks scenario counts it (CPU / (events + deliveries))
      const target = key === 'eventDelivery1' ? (who === 'daemon' ? '<= 33' : '<= 40') : null;
      const all = runs.after.map((x) => x[key]?.[who]).filter((x) => x != null).map((x) => r1(x));
      const ball = before ? runs.before.map((x) => x[key]?.[who]).filter((x) => x != null).map((x) => r1(x)) : [];
      row('cost', `${who === 'daemon' ? 'daemon' : 'Redis'} CPU ${label}`, a, 'µs',
        { ceiling: b, ceilingName: before ? 'before' : undefined, target, pass: target ? a != null && a <= Number(target.slice(3)) : undefined,
          note: `lowest of ${all.join(' / ')}${before ? `; before: ${ball.join(' / ')}` : ''}` });
    }
  }
  return out;
}
