#!/usr/bin/env node
// bench/filter_cost.mjs - what filtering on users and referrers costs the daemon, counted in
// instructions (callgrind), not timed: the machine the bench runs on is shared, and a rate
// moves by tens of % from run to run while an instruction count does not (issue 25).
//
//   BIN=bin/statusrelay HELPERS=build/helpers node bench/filter_cost.mjs
//
// Two stacks, one after the other, the same but for the filters: a private Redis, one
// receiver (bench_receiver --verify), the daemon under `valgrind --tool=callgrind`, 100
// endpoints on the receiver - unfiltered, then each with filtersOf(i) (bench/lib.mjs: 20
// wallets and 5 referrers, the matching ones last in each list) - and BENCH_FILTER_EVENTS
// events (default 60) of deposit-address requests from bench_pub (--depositors 5
// --referrers 2; 2 events/s = 200 deliveries/s, which the daemon under valgrind keeps up
// with), so every event matches every endpoint in both: 100 x events deliveries each.
// Reported (JSON on stdout, a table on stderr): the daemon's instructions (Ir) per delivery,
// whole process from the end of the registration on (timers included, which depend on the
// wall time under valgrind), the inclusive Ir of the matching: webhook_matches (per
// event x endpoint pair), proto_filter_match, and fo_process_batch (the fan-out loop that
// calls them), and the Ir of start-up and registration (callgrind_control dumps and zeroes
// the counters between the two: every registration reloads the endpoint set, parsing every
// endpoint's filters again).
// Bounded: 60 events at 2/s, each wait at most 5 minutes. Node built-ins, valgrind and
// callgrind_annotate. BENCH_KEEP=1 keeps the run directory (profiles, logs). Writes
// bench/results/<timestamp>-filter-cost.json.
// Runs on: its own Node process (one thread, async).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {
  ROOT, BIN, API_KEY, RUN_DIR, log, r1, startRedis, startReceiver, startDaemon, pub, waitDelivered,
  stopAll, filtersOf,
} from './lib.mjs';

const EVENTS = Number(process.env.BENCH_FILTER_EVENTS ?? 60);
const ENDPOINTS = 100;
const FUNCS = ['webhook_matches', 'proto_filter_match', 'fo_process_batch'];

/** Inclusive Ir of FUNCS and the program total from a callgrind output file. */
function annotate(file) {
  const txt = execFileSync('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], { maxBuffer: 64 << 20 }).toString();
  const num = (s) => Number(s.replace(/,/g, ''));
  const total = num((txt.match(/^\s*([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS/m) ?? txt.match(/^\s*([\d,]+)\s+PROGRAM TOTALS/m) ?? [])[1] ?? 'NaN');
  const fn = {};
  for (const f of FUNCS) {
    const m = txt.match(new RegExp(`^\\s*([\\d,]+) \\([^)]*\\)\\s+\\S*:${f} `, 'm'));
    fn[f] = m ? num(m[1]) : 0;
  }
  return { total, fn };
}

/** Dump the daemon's counters so far (start-up and registration) to `out`.1, then zero them
 * (valgrind's pid is the daemon's): `out` itself, written at exit, counts the load only. */
function dumpAndZero(pid) {
  execFileSync('callgrind_control', ['-d', 'setup', String(pid)], { stdio: 'ignore' });
  execFileSync('callgrind_control', ['-z', String(pid)], { stdio: 'ignore' });
}

async function one(mode) {
  const redis = await startRedis(`fc-${mode}-redis`);
  const rx = await startReceiver(`fc-${mode}-receiver`, { verify: true });
  const out = path.join(RUN_DIR, `callgrind-${mode}.out`);
  const d = await startDaemon(`fc-${mode}-daemon`, redis, { wrap: ['valgrind', '--tool=callgrind', `--callgrind-out-file=${out}`] });
  for (let i = 0; i < ENDPOINTS; i++) {
    const w = await d.addWebhook(`${rx.base}/h/${i}`, mode === 'filtered' ? { filters: filtersOf(i) } : {});
    await rx.secret(`/h/${i}`, w.secret);
  }
  // count from here on: registering reloads the endpoint set once per endpoint, and each
  // reload parses every endpoint's filters again (reported apart, as the set-up's cost)
  dumpAndZero(d.pid);
  log(`filter cost, ${mode}: ${EVENTS} events x ${ENDPOINTS} endpoints, daemon under callgrind`);
  const p = await pub(`fc-${mode}-pub`, d.ingestUrl, ['--sign-key', API_KEY, '--prefix', 'fc', '--count', String(EVENTS), '--rate', '2', '--concurrency', '4', '--depositors', '5', '--referrers', '2', '--seconds', '120'], 300000);
  const st = await waitDelivered(rx, p.results.accepted * ENDPOINTS, 300000);
  // valgrind writes the profile when the daemon exits
  await d.proc.stop('SIGTERM', 120000);
  await rx.proc.stop();
  await redis.proc.stop();
  const a = annotate(out);
  const setup = annotate(`${out}.1`);
  const pairs = p.results.accepted * ENDPOINTS;
  return {
    mode, events: p.results.accepted, deliveries: st.unique, complete: st.complete, sigBad: st.sigBad, duplicates: st.duplicates,
    irSetup: setup.total, irTotal: a.total, irPerDelivery: r1(a.total / Math.max(1, st.unique)),
    ir: a.fn, irPerPair: Object.fromEntries(FUNCS.map((f) => [f, r1(a.fn[f] / Math.max(1, pairs))])),
  };
}

async function main() {
  const started = new Date();
  const res = [];
  for (const mode of ['unfiltered', 'filtered']) res.push(await one(mode));
  const [u, f] = res;
  console.error('| daemon instructions (callgrind) | unfiltered | filtered | filtered - unfiltered |');
  console.error('|---|---:|---:|---:|');
  console.error(`| per delivery, whole process (after registration) | ${u.irPerDelivery} | ${f.irPerDelivery} | ${r1(f.irPerDelivery - u.irPerDelivery)} |`);
  for (const fn of FUNCS) console.error(`| ${fn}, per event x endpoint | ${u.irPerPair[fn]} | ${f.irPerPair[fn]} | ${r1(f.irPerPair[fn] - u.irPerPair[fn])} |`);
  console.error(`| start-up and registering the ${ENDPOINTS} endpoints, in all | ${u.irSetup} | ${f.irSetup} | ${f.irSetup - u.irSetup} |`);
  console.error(`deliveries ${u.deliveries} / ${f.deliveries} of ${u.events * ENDPOINTS} / ${f.events * ENDPOINTS}; bad signatures ${u.sigBad} / ${f.sigBad}`);
  const stamp = started.toISOString().replace(/[:.]/g, '-').replace(/-\d{3}Z$/, 'Z');
  const file = path.join(ROOT, 'bench/results', `${stamp}-filter-cost.json`);
  const summary = { startedAt: started.toISOString(), binary: BIN, events: EVENTS, endpoints: ENDPOINTS, filterOfEndpoint0: filtersOf(0), runs: res };
  fs.writeFileSync(file, `${JSON.stringify(summary, null, 2)}\n`);
  log(`results: ${path.relative(ROOT, file)}`);
  console.log(JSON.stringify(summary));
  if (!u.complete || !f.complete) process.exitCode = 1;
}

const stopAndExit = (code) => stopAll().finally(() => process.exit(code));
process.on('SIGINT', () => stopAndExit(130));
process.on('SIGTERM', () => stopAndExit(143));
main().then(async () => {
  await stopAll();
  if (!process.env.BENCH_KEEP && process.exitCode !== 1) fs.rmSync(RUN_DIR, { recursive: true, force: true });
  else log(`profiles and logs kept in ${RUN_DIR}`);
}).catch((e) => { log(`filter cost: ${e.stack ?? e}`); log(`logs kept in ${RUN_DIR}`); return stopAndExit(1); });
