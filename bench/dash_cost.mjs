// bench/dash_cost.mjs - the dashboards "every event to every client" cost, bounded and alone
// (issue 26): one Redis, one daemon, ws_load with CLIENTS clients subscribed to everything,
// EVENTS events published at RATE/s through POST /v1/ingest/upstream. Prints one JSON line:
// frames received, the receive rate, the daemon's CPU (all threads, and its busiest thread: the
// ws thread)
// per frame delivered and, with STRACE=1, the daemon's syscalls per frame (strace -c -f
// attached for the publish phase only; strace slows the daemon, so its rate means nothing);
// PERF=1 records a cpu-clock profile of the daemon for the phase (its path in perfData).
//   BIN=bin-old/statusrelay CLIENTS=1000 EVENTS=600 RATE=400 STRACE=1 node bench/dash_cost.mjs
// TARGET=nchan: the same against nginx+nchan (bench/run.mjs's ceiling; its worker measured).
// Runs on: the bench driver's Node process. Node built-ins only (and the bench helpers).
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { API_KEY, CLK_TCK, HELPERS, ROOT, RUN_DIR, STREAM_TOKEN, freePort, log, now, pub, r2, sleep, startDaemon, startProc, startRedis, stopAll, until, waitPort, startNchan, settleProgress } from './lib.mjs';

const CLIENTS = Number(process.env.CLIENTS ?? 1000);
const EVENTS = Number(process.env.EVENTS ?? 600);
const RATE = Number(process.env.RATE ?? 400);
const STRACE = process.env.STRACE === '1';
const NCHAN = process.env.TARGET === 'nchan'; // nginx+nchan's one worker instead (the ceiling)
const PERF = process.env.PERF === '1';
// CALLGRIND=1: the daemon under callgrind, counters zeroed at the phase start and dumped at
// its end: instructions (Ir) per frame delivered, the work count (the rate is meaningless)
const CALLGRIND = process.env.CALLGRIND === '1'; // perf record (cpu-clock) of the daemon for the phase

/** utime+stime ticks of every thread of pid, in all and per thread id. */
function threadTicks(pid) {
  let all = 0;
  const per = {};
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const s = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      const t = Number(f[11]) + Number(f[12]);
      all += t;
      per[tid] = t;
    } catch { /* thread gone */ }
  }
  return { all, per };
}


async function main() {
  let redis = null, d;
  if (NCHAN) {
    d = await startNchan();
  } else {
    redis = await startRedis('dc-redis');
    const wrap = CALLGRIND ? ['valgrind', '--tool=callgrind', `--callgrind-out-file=${path.join(RUN_DIR, 'cg.out')}`] : [];
    d = await startDaemon('dc-daemon', redis, { env: { STATUSRELAY_WS_QUEUE_MAX: '4096', STATUSRELAY_WS_MAX_CONNECTIONS_PER_ADDRESS: '0' }, wrap });
  }
  const chan = `a${Date.now() % 100000}`;
  const w = startProc('dc-ws_load', path.join(HELPERS, 'ws_load'), [...(NCHAN ? ['--mode', 'plain'] : ['--mode', 'relay-all', '--token', STREAM_TOKEN]), '--prefix', 'dc',
    '--clients', String(CLIENTS), '--setup-seconds', '60', '--seconds', '170', NCHAN ? `ws://127.0.0.1:${d.port}/sub/${chan}` : `ws://127.0.0.1:${d.wsPort}/`]);
  const ready = JSON.parse(await w.waitLine((l) => l.includes('"ready"'), 90000));
  await sleep(1000);
  const progress = () => { const l = [...w.lines].reverse().find((x) => x.includes('"progress"')); return l ? JSON.parse(l).messages : 0; };
  w.child.kill('SIGUSR1');
  await sleep(200);
  let st = null;
  const straceOut = path.join(RUN_DIR, 'strace.txt');
  if (STRACE) {
    st = spawn('strace', ['-c', '-f', '-p', String(d.pid), '-o', straceOut], { stdio: 'ignore' });
    await sleep(1500);
  }
  let pf = null;
  const perfOut = path.join(RUN_DIR, 'perf.data');
  if (PERF) {
    pf = spawn('perf', ['record', '-e', 'cpu-clock', '-F', '999', '-g', '-p', String(d.pid), '-o', perfOut], { stdio: 'ignore' });
    await sleep(1000);
  }
  if (CALLGRIND) execFileSync('callgrind_control', ['-z', String(d.pid)], { stdio: 'ignore' });
  const t0 = threadTicks(d.pid);
  const c0 = now();
  const p = await pub('dc-pub', NCHAN ? `http://127.0.0.1:${d.port}/pub/x` : d.ingestUrl, [
    ...(NCHAN ? ['--mode', 'nchan', '--channel-url', `http://127.0.0.1:${d.port}/pub/${chan}`] : ['--sign-key', API_KEY]), '--prefix', 'dcp', '--count', String(EVENTS), '--rate', String(RATE),
    '--concurrency', '32', '--seconds', '90', '--active', String(EVENTS), '--statuses', 'waiting', '--first', '0'], 120000);
  const want = p.ok * ready.subscribed;
  await settleProgress(progress, want, 90000);
  const t1 = threadTicks(d.pid);
  let ir = null;
  if (CALLGRIND) {
    const before = new Set(fs.readdirSync(RUN_DIR));
    execFileSync('callgrind_control', ['-d', String(d.pid)], { stdio: 'ignore' });
    await sleep(500);
    const dumps = fs.readdirSync(RUN_DIR).filter((f) => f.startsWith('cg.out') && !before.has(f));
    for (const f of dumps) {
      const m = /^(?:totals|summary): (\d+)/m.exec(fs.readFileSync(path.join(RUN_DIR, f), 'utf8'));
      if (m) ir = (ir ?? 0) + Number(m[1]);
    }
  }
  const seconds = (now() - c0) / 1000;
  // the busiest thread of the phase: the lws (ws) thread, which writes the frames
  const busiest = Math.max(0, ...Object.keys(t1.per).map((k) => t1.per[k] - (t0.per[k] ?? 0)));
  if (st) { st.kill('SIGINT'); await new Promise((r) => st.on('exit', r)); }
  if (pf) { pf.kill('SIGINT'); await new Promise((r) => pf.on('exit', r)); }
  await w.stop('SIGTERM');
  const sl = [...w.lines].reverse().find((l) => l.includes('"summary"'));
  const s = sl ? JSON.parse(sl) : { messages: progress() };
  const frames = s.messages;
  const out = {
    bin: NCHAN ? 'nginx+nchan worker' : process.env.BIN ?? 'bin/statusrelay', clients: CLIENTS, subscribed: ready.subscribed, events: EVENTS, published: p.ok, rate: RATE,
    frames, expected: want, recvRate: s.rate, seconds: r2(seconds),
    daemonCpuS: r2((t1.all - t0.all) / CLK_TCK), busiestThreadCpuS: r2(busiest / CLK_TCK),
    usPerFrame: frames ? r2((1e6 * (t1.all - t0.all)) / CLK_TCK / frames) : null,
    busiestUsPerFrame: frames ? r2((1e6 * busiest) / CLK_TCK / frames) : null,
    frameP50Ms: s.frame?.p50Ms, frameP99Ms: s.frame?.p99Ms,
  };
  if (PERF) out.perfData = perfOut;
  if (CALLGRIND) { out.ir = ir; out.irPerFrame = frames && ir ? Math.round(ir / frames) : null; }
  if (STRACE) {
    const txt = fs.readFileSync(straceOut, 'utf8');
    const calls = {};
    for (const line of txt.split('\n')) {
      const m = line.trim().split(/\s+/);
      if (m.length >= 5 && /^\d/.test(m[0]) && !line.includes('total')) calls[m[m.length - 1]] = Number(m[3]);
    }
    const total = Object.values(calls).reduce((a, b) => a + b, 0);
    out.syscalls = total;
    out.syscallsPerFrame = frames ? r2(total / frames) : null;
    out.top = Object.entries(calls).sort((a, b) => b[1] - a[1]).slice(0, 8).map(([k, v]) => `${k}=${v} (${r2(v / frames)}/frame)`);
  }
  console.log(JSON.stringify(out));
  await d.proc.stop(NCHAN ? 'SIGQUIT' : 'SIGTERM');
  if (redis) await redis.proc.stop();
}

main().catch((e) => { log(e.stack); process.exitCode = 1; }).finally(() => stopAll());
