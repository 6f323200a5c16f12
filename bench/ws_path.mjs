#!/usr/bin/env node
// bench/ws_path.mjs - the upstream-websocket row of the webhooks scenario on its own, for
// A/B runs of two binaries: the simulator in load mode -> upstream websocket -> the daemon
// -> one signed endpoint, ~1,000 then ~5,000 events/s (as bench/run.mjs webhooks step 3), and
// the simulator alone with a websocket reader that subscribes every new request and discards
// the frames (what the simulator costs per event, what the box leaves the daemon).
//
//   BIN=bin/statusrelay HELPERS=build/helpers node bench/ws_path.mjs [relay|sim|all] [runs]
//
// Prints one JSON line per run on stdout (e2e p50/p99/p99.9, relay part, CPU per process,
// CPU µs per event, Redis commands per event from INFO commandstats, deliveries and accepted
// events per second). BENCH_SCALE as in run.mjs (0.5: 5,000 events/s for 10 s).
// Probes (one at a time, during the ~5,000 events/s load): WSP_PERF=sim|daemon records
// /tmp/wsp-perf.<name>.data (WSP_PERF_DWARF=1: DWARF call graphs); WSP_STRACE=sim|daemon
// writes /tmp/wsp-strace.<name>.txt (strace -c over 4 s, or WSP_STRACE_ARGS); WSP_METRICS=1
// logs the daemon's queue gauges every second; WSP_SCRIPTS=1 breaks the Redis time of the ~1,000
// events/s step down per script and command (SLOWLOG with a 0 µs threshold, which itself costs
// Redis CPU: that step's CPU figures are then inflated). The reader of `sim` mode needs
// tests/node_modules (make npm-deps).
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import {
  ROOT, SCALE, sleep, now, r1, log, cpuMeter, startRedis, startReceiver, startDaemon, startSim,
  simTracker, acceptedEvents, until, http, waitDelivered, stopAll, API_KEY, startProc,
} from './lib.mjs';

const require = createRequire(path.join(ROOT, 'tests/package.json'));
const mode = process.argv[2] ?? 'all';
const runs = Number(process.argv[3] ?? 1);
const secs = Math.max(4, Math.round(10 * Math.min(1, SCALE * 2)));
const rate5k = Math.round(5000 * Math.min(1, SCALE * 2));
// the probe of process name (pid) for the load: returns its stop function
const perfOf = (name, pid) => {
  if (process.env.WSP_STRACE === name) {
    // strace -c for 4 s, 3 s into the load: syscalls per event
    const p = startProc(`strace-${name}`, 'sh', ['-c', `sleep 3; ls /proc/${pid}/fd | wc -l > /tmp/wsp-strace.${name}.fds; timeout -s INT 4 strace ${process.env.WSP_STRACE_ARGS ?? "-c -f"} -p ${pid} -o /tmp/wsp-strace.${name}.txt`]);
    return async () => { await p.done; };
  }
  if (process.env.WSP_PERF !== name) return async () => {};
  const p = startProc(`perf-${name}`, 'perf', ['record', ...(process.env.WSP_PERF_DWARF ? ['--call-graph', 'dwarf,16384', '-F', '400'] : ['-g']), '-o', `/tmp/wsp-perf.${name}.data`, '-p', String(pid)]);
  return async () => { await p.stop('SIGINT', 10000); };
};
// sha1 -> script name of every store/*.lua as the daemon sends it (relay/common/embed.pl:
// a line "-- #include NAME" is replaced by the file NAME, nested up to 4 levels)
const scriptNames = () => {
  const dir = path.join(ROOT, 'store'), names = {};
  for (const f of fs.readdirSync(dir).filter((x) => x.endsWith('.lua'))) {
    let d = fs.readFileSync(path.join(dir, f), 'latin1');
    for (let i = 0; i < 4; i++)
      d = d.replace(/^-- #include (\S+)\n/gm, (_, n) => fs.readFileSync(path.join(dir, n), 'latin1'));
    names[crypto.createHash('sha1').update(Buffer.from(d, 'latin1')).digest('hex')] = f.replace(/\.lua$/, '');
  }
  return names;
};
// WSP_SCRIPTS: Redis time per script (EVALSHA, its commands included) and per plain command
// (commands run by scripts included: they are also in their script's time), per accepted
// event and per tracked request, from SLOWLOG entries (id, time, µs, argv, ...)
const slowlogStart = async (redis) => {
  await redis.cmd('CONFIG', 'SET', 'slowlog-max-len', '1000000');
  await redis.cmd('SLOWLOG', 'RESET');
  await redis.cmd('CONFIG', 'SET', 'slowlog-log-slower-than', '0');
};
const slowlogStop = async (redis, events, requests) => {
  await redis.cmd('CONFIG', 'SET', 'slowlog-log-slower-than', '10000');
  // redis-cli's plain output (one line per value; too large for resp.mjs's reader): an entry
  // starts with its id (one less than the previous one), time and µs
  const L = execFileSync('redis-cli', ['-p', String(redis.port), 'SLOWLOG', 'GET', '1000000'],
    { maxBuffer: 1 << 30, encoding: 'latin1' }).split('\n');
  await redis.cmd('SLOWLOG', 'RESET');
  const names = scriptNames(), by = {}, num = /^\d+$/;
  for (let i = 0, next = null; i + 4 < L.length; i++) {
    if (!num.test(L[i]) || (next !== null && Number(L[i]) !== next) || !num.test(L[i + 1]) ||
        !num.test(L[i + 2]) || Number(L[i + 1]) < 1e9) continue;
    next = Number(L[i]) - 1;
    let k = L[i + 3].toLowerCase();
    if (k === 'evalsha') k = `script:${names[L[i + 4]] ?? L[i + 4].slice(0, 8)}`;
    const b = (by[k] ??= { calls: 0, us: 0 });
    b.calls++; b.us += Number(L[i + 2]);
    i += 3;
  }
  return Object.entries(by).sort((x, y) => y[1].us - x[1].us).slice(0, 20).map(([k, b]) => ({
    what: k, callsPerEvent: r1((b.calls / Math.max(1, events)) * 100) / 100, usPerEvent: r1(b.us / Math.max(1, events)),
    usPerRequest: r1(b.us / Math.max(1, requests)), usPerCall: r1(b.us / b.calls),
  }));
};
const perUs = (cpuS, n) => (cpuS != null && n > 0 ? r1((cpuS * 1e6) / n) : null);

// The simulator alone: a reader that subscribes every request the generator makes (ids from
// GET /_sim/requests, as simTracker reads them) and counts and drops the frames.
async function simAlone(eventsPerS, perReq) {
  const WebSocket = require('ws');
  const sim = await startSim('wsp-sim-alone');
  const ws = new WebSocket(`${sim.wsUrl}?apiKey=${API_KEY}`);
  let frames = 0, events = 0;
  await new Promise((res, rej) => { ws.once('open', res); ws.once('error', rej); });
  ws.on('message', (d) => { frames++; if (d.length > 200) events++; });
  let after = 0, stop = false;
  const loop = (async () => {
    while (!stop) {
      const r = await http('GET', `${sim.base}/_sim/requests?after=${after}&limit=1000`).catch(() => null);
      const ids = r?.body?.requests?.map((x) => x.id) ?? [];
      for (const id of ids) ws.send(JSON.stringify({ type: 'subscribe', event: 'request.status.updated', filters: { id } }));
      if (ids.length > 0) after = r.body.last ?? after + ids.length; else await sleep(20);
    }
  })();
  const reqRate = Math.max(1, Math.round(eventsPerS / perReq));
  const s0 = await sim.stats();
  const m = cpuMeter({ sim: sim.pid, reader: process.pid });
  const perf = perfOf('sim', sim.pid);
  await http('POST', `${sim.base}/_sim/load`, { rate: reqRate, durationMs: secs * 1000 });
  await sleep(secs * 1000);
  await until(async () => { const s = await sim.stats(); return !s.load.running && s.requests.active === 0; }, 20000, 250);
  const cpu = m();
  await perf();
  stop = true; await loop;
  const s1 = await sim.stats();
  ws.close();
  await sim.proc.stop();
  const changes = s1.requests.statusChanges - s0.requests.statusChanges;
  const evFrames = s1.ws.eventFrames - s0.ws.eventFrames;
  return { mode: 'sim-alone', requestsPerS: reqRate, seconds: secs, statusChanges: changes, eventFrames: evFrames, readerEvents: events, readerFrames: frames, cpu, simUsPerEvent: perUs(cpu.sim.cpuS, evFrames) };
}

async function relay() {
  const redis = await startRedis('wsp-redis');
  const rx = await startReceiver('wsp-receiver', { verify: true });
  const sim = await startSim('wsp-sim');
  const d = await startDaemon('wsp-daemon', redis, { env: { STATUSRELAY_UPSTREAM_API_URL: sim.base, STATUSRELAY_UPSTREAM_WS_URL: sim.wsUrl } });
  const wh = await d.addWebhook(`${rx.base}/h/0`);
  await rx.secret('/h/0', wh.secret);
  const pids = { daemon: d.pid, redis: redis.pid, receiver: rx.pid, sim: sim.pid };
  const simRun = async (eventsPerS, perReq = 4) => {
    const reqRate = Math.max(1, Math.round(eventsPerS / perReq));
    await rx.reset();
    log(`ws path: ${reqRate} new requests/s (~${eventsPerS} events/s) for ${secs} s`);
    const acc0 = acceptedEvents(await d.metrics());
    const s0 = await sim.stats();
    const scripts = process.env.WSP_SCRIPTS && eventsPerS <= 2000;
    if (scripts) await slowlogStart(redis);
    const cs0 = await redis.info('commandstats');
    const tr = simTracker(sim, d);
    const m = cpuMeter(pids);
    const perf = eventsPerS > 2000 ? perfOf('daemon', d.pid) : async () => {};
    // WSP_METRICS=1: the daemon's queue gauges once a second (stderr)
    const accPerS = [];
    let accLast = acc0;
    const aIv = setInterval(async () => { const a = acceptedEvents(await d.metrics().catch(() => ({}))); if (a) { accPerS.push(a - accLast); accLast = a; } }, 1000);
    const mIv = process.env.WSP_METRICS && eventsPerS > 2000 ? setInterval(async () => {
      const mm = await d.metrics().catch(() => ({}));
      log(JSON.stringify(Object.fromEntries(Object.entries(mm).filter(([k]) => /pending|queue|depth|flight|lag|events_total\{source="(ws|websocket)/.test(k)))));
    }, 1000) : null;
    await http('POST', `${sim.base}/_sim/load`, { rate: reqRate, durationMs: secs * 1000 });
    await sleep(secs * 1000);
    await until(async () => { const s = await sim.stats(); return !s.load.running && s.requests.active === 0; }, 20000, 250);
    const cpu = m();
    await perf();
    if (mIv) clearInterval(mIv);
    clearInterval(aIv);
    const tracked = await tr.stop();
    const s1 = await sim.stats();
    await sleep(500);
    const acc = acceptedEvents(await d.metrics()) - acc0;
    const st = await waitDelivered(rx, acc, 120000);
    const perScript = scripts ? await slowlogStop(redis, acc, tracked) : undefined;
    const evFrames = s1.ws.eventFrames - s0.ws.eventFrames;
    // Redis commands per accepted event and their CPU (INFO commandstats), busiest first
    const cs1 = await redis.info('commandstats');
    const kv = (t) => Object.fromEntries(t.split(',').map((x) => x.split('=')));
    const redisCmds = Object.keys(cs1).map((k) => {
      const a = kv(cs1[k]), b = cs0[k] ? kv(cs0[k]) : { calls: 0, usec: 0 };
      return { cmd: k.replace('cmdstat_', ''), perEvent: r1((a.calls - b.calls) / Math.max(1, acc) * 100) / 100, usPerEvent: r1((a.usec - b.usec) / Math.max(1, acc)) };
    }).filter((x) => x.perEvent > 0).sort((x, y) => y.usPerEvent - x.usPerEvent).slice(0, 12);
    const tl = await rx.timeline();
    const perS = [];
    tl.counts.forEach((c, i) => { const k = Math.floor((i * tl.bucketMs) / 1000); perS[k] = (perS[k] ?? 0) + c; });
    return {
      redisCmds, perScript, simStats: s1, deliveredPerSecond: perS.map((x) => x ?? 0), acceptedPerSecond: accPerS,
      requestsPerS: reqRate, tracked, eventFrames: evFrames, acceptedEvents: acc, delivered: st.unique, duplicates: st.duplicates,
      eventsPerRequest: acc / Math.max(1, reqRate * secs), e2e: st.e2e, relay: st.relay, cpu,
      usPerEvent: Object.fromEntries(['daemon', 'redis', 'sim', 'receiver'].map((k) => [k, perUs(cpu[k].cpuS, acc)])),
    };
  };
  const r1k = await simRun(1000);
  const r5k = await simRun(rate5k, r1k.eventsPerRequest || 4);
  await d.proc.stop(); await rx.proc.stop(); await sim.proc.stop(); await redis.proc.stop();
  return { mode: 'relay', bin: process.env.BIN, r1k, r5k };
}

try {
  for (let i = 0; i < runs; i++) {
    if (mode === 'sim' || mode === 'all') console.log(JSON.stringify(await simAlone(rate5k, 3.1)));
    if (mode === 'relay' || mode === 'all') console.log(JSON.stringify(await relay()));
  }
} finally {
  await stopAll();
  if (!process.env.BENCH_KEEP) fs.rmSync((await import('./lib.mjs')).RUN_DIR, { recursive: true, force: true });
}
