// bench/lib.mjs - the parts every `make bench` scenario shares (bench/run.mjs, bench/cluster.mjs):
// processes started and stopped (startProc, runTool, stopAll), /proc CPU and memory meters,
// a private Redis (startRedis, redisAt), the receiver, the daemon, the simulator, bench_pub,
// the results table (row), the receiver's ceilings and the webhook delivery runs
// (sustainedRun, backlogRun, latencyRun). Node built-ins only.
// Runs on: the bench driver's Node process (one thread, async).
//
// Importing it creates the run directory (RUN_DIR, a fresh temporary directory).
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { redisCmd } from '../tests/integration/lib/resp.mjs';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const BIN = process.env.BIN ?? path.join(ROOT, 'bin/statusrelay');
export const HELPERS = process.env.HELPERS ?? path.join(ROOT, 'build/helpers');
export const SCALE = Number(process.env.BENCH_SCALE ?? 1);
export const API_KEY = 'bench-upstream-key';
export const STREAM_TOKEN = 'bench-stream-token';
export const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const now = () => Date.now();
export const sc = (n) => Math.max(1, Math.round(n * SCALE));
export const r1 = (x) => (x == null || Number.isNaN(x) ? null : Math.round(x * 10) / 10);
export const r2 = (x) => (x == null || Number.isNaN(x) ? null : Math.round(x * 100) / 100);
export const log = (...a) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}]`, ...a);

export const RUN_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'sr-bench-'));
const procs = new Set();

// ---- processes --------------------------------------------------------------------------

/** Start a process; stdout lines go to onLine (and the log), stderr to the log. */
export function startProc(name, cmd, args, { env = {}, onLine } = {}) {
  const logPath = path.join(RUN_DIR, `${name}.log`);
  const out = fs.openSync(logPath, 'a');
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', out] });
  const p = { name, child, pid: child.pid, logPath, lines: [], exited: false, waiters: [] };
  p.done = new Promise((resolve) => child.on('exit', (code, sig) => {
    p.exited = true; p.code = code; p.sig = sig; procs.delete(p); fs.closeSync(out); resolve(code);
  }));
  child.on('error', (e) => { p.error = e; });
  readline.createInterface({ input: child.stdout }).on('line', (l) => {
    fs.appendFileSync(logPath, `> ${l}\n`);
    p.lines.push(l);
    if (onLine) onLine(l);
    for (const w of [...p.waiters]) if (w.pred(l)) { p.waiters.splice(p.waiters.indexOf(w), 1); w.resolve(l); }
  });
  /** Resolve with the first stdout line (past or future) matching pred. */
  p.waitLine = (pred, timeoutMs = 30000) => new Promise((resolve, reject) => {
    const hit = p.lines.find(pred);
    if (hit) return resolve(hit);
    const t = setTimeout(() => reject(new Error(`${name}: no expected line within ${timeoutMs} ms (log ${logPath})`)), timeoutMs);
    p.waiters.push({ pred, resolve: (l) => { clearTimeout(t); resolve(l); } });
    p.done.then(() => { clearTimeout(t); reject(new Error(`${name} exited (${p.code ?? p.sig}); log ${logPath}`)); });
  });
  p.stop = async (sig = 'SIGTERM', graceMs = 5000) => {
    if (p.exited) return;
    try { child.kill(sig); } catch { /* gone */ }
    const t = setTimeout(() => { try { child.kill('SIGKILL'); } catch { /* gone */ } }, graceMs);
    await p.done;
    clearTimeout(t);
  };
  procs.add(p);
  return p;
}

/** Run a tool to completion (bounded); returns the last JSON line of its stdout. */
export async function runTool(name, cmd, args, { timeoutMs = 120000, env } = {}) {
  const p = startProc(name, cmd, args, { env });
  const t = setTimeout(() => p.stop('SIGTERM'), timeoutMs);
  await p.done;
  clearTimeout(t);
  const last = [...p.lines].reverse().find((l) => l.startsWith('{'));
  if (!last) throw new Error(`${name}: no JSON output (exit ${p.code ?? p.sig}); log ${p.logPath}`);
  return JSON.parse(last);
}

/** Stops of things not started by startProc (a Redis Cluster's nodes): called by stopAll. */
export const otherStops = new Set();

export async function stopAll() {
  await Promise.all([...procs].map((p) => p.stop('SIGTERM', 3000)));
  for (const f of [...otherStops]) { otherStops.delete(f); await f().catch((e) => log(`stop: ${e.message}`)); }
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

export async function waitPort(port, timeoutMs = 15000) {
  const end = now() + timeoutMs;
  while (now() < end) {
    const ok = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1');
      c.on('connect', () => { c.destroy(); resolve(true); });
      c.on('error', () => resolve(false));
    });
    if (ok) return;
    await sleep(50);
  }
  throw new Error(`port ${port} did not open`);
}

// ---- /proc: CPU and memory ------------------------------------------------------------------

export function procCpuTicks(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    // utime + stime (fields 14, 15) + cutime + cstime of reaped children (16, 17): Redis
    // forks for AOF rewrites, and that work is part of its cost
    return Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
  } catch { return null; }
}

export function procMem(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k) => Number((s.match(new RegExp(`^${k}:\\s+(\\d+)`, 'm')) ?? [])[1] ?? 0);
    return { rssKiB: kb('VmRSS'), hwmKiB: kb('VmHWM') };
  } catch { return null; }
}

/** Busy and total ticks of the whole machine (/proc/stat, every core). */
export function machineTicks() {
  try {
    const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    // user + nice + system + irq + softirq (idle, iowait, steal and the guest times -
    // already in user - left out)
    return { busy: f[0] + f[1] + f[2] + (f[5] ?? 0) + (f[6] ?? 0) };
  } catch { return null; }
}

/** CPU meter over named pids: start(); ... stop() -> {name: {cpuPct, cpuS}, seconds,
 * machineCpuPct}; machineCpuPct: every process of the machine, % of one core (200 = both of
 * 2 cores busy; includes whatever else runs on the machine). */
export function cpuMeter(pids) {
  const t0 = process.hrtime.bigint();
  const m0 = machineTicks();
  const c0 = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, procCpuTicks(pid)]));
  const peak = Object.fromEntries(Object.keys(pids).map((k) => [k, 0]));
  const iv = setInterval(() => {
    for (const [k, pid] of Object.entries(pids)) { const m = procMem(pid); if (m && m.rssKiB > peak[k]) peak[k] = m.rssKiB; }
  }, 200);
  return () => {
    clearInterval(iv);
    const dt = Number(process.hrtime.bigint() - t0) / 1e9;
    const out = {};
    for (const [k, pid] of Object.entries(pids)) {
      const c1 = procCpuTicks(pid);
      const cpuS = c1 != null && c0[k] != null ? (c1 - c0[k]) / CLK_TCK : null;
      const m = procMem(pid);
      out[k] = { cpuS: r2(cpuS), cpuPct: cpuS != null ? r1((100 * cpuS) / dt) : null, rssMiB: m ? r1(m.rssKiB / 1024) : null, peakRssMiB: r1(Math.max(peak[k], m?.rssKiB ?? 0) / 1024) };
    }
    out.seconds = r2(dt);
    const m1 = machineTicks();
    out.machineCpuPct = m0 && m1 ? r1((100 * (m1.busy - m0.busy)) / CLK_TCK / dt) : null;
    return out;
  };
}

// ---- Redis ----------------------------------------------------------------------------------


// AOF as in production (docs/operations.md "Running against the real upstream"): everysec,
// rewritten from 1 GB on (the default 64 MB rewrites every few seconds at these rates, and each
// fork competes for the 2 cores). Every Redis of the bench runs with it, cluster masters included.
export const REDIS_PERSISTENCE = ['--save', '', '--appendonly', 'yes', '--appendfsync', 'everysec', '--auto-aof-rewrite-min-size', '1gb'];

export async function startRedis(name = 'redis') {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(RUN_DIR, `${name}-`));
  const p = startProc(name, 'redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir,
    ...REDIS_PERSISTENCE, '--protected-mode', 'yes']);
  await waitPort(port);
  for (let i = 0; i < 100 && (await redisCmd(port, 'PING').catch(() => null)) !== 'PONG'; i++) await sleep(50);
  return { ...redisAt(port), url: `redis://127.0.0.1:${port}/0`, proc: p, pid: p.pid };
}

/** Reads of the Redis (or cluster node) listening on port: cmd, info, usedMemory, cpu. */
export function redisAt(port) {
  const r = { port, cmd: (...a) => redisRetry(port, ...a) };
  r.info = async (section = 'memory') => {
    const t = await redisRetry(port, 'INFO', section);
    return Object.fromEntries(t.split('\r\n').filter((l) => l.includes(':')).map((l) => { const i = l.indexOf(':'); return [l.slice(0, i), l.slice(i + 1)]; }));
  };
  r.usedMemory = async () => Number((await r.info('memory')).used_memory);
  /** CPU seconds Redis has used so far, from INFO cpu: used_cpu_sys + used_cpu_user (the
   * server; "children" = forks for AOF rewrites, reported apart). */
  r.cpu = async () => {
    const i = await r.info('cpu');
    return { s: Number(i.used_cpu_sys) + Number(i.used_cpu_user), children: Number(i.used_cpu_sys_children ?? 0) + Number(i.used_cpu_user_children ?? 0) };
  };
  return r;
}

/** One Redis command; a timeout (10 s each, resp.mjs) is retried twice: on a loaded box a
 * slow answer is a measurement, not a reason to abort the scenario. */
export async function redisRetry(port, ...a) {
  for (let i = 0; ; i++) {
    try { return await redisCmd(port, ...a); } catch (e) {
      if (i >= 2 || !/redis timeout/.test(String(e.message))) throw e;
      log(`redis ${a[0]}: ${e.message}, retrying`);
    }
  }
}

/** Redis CPU per event+delivery (µs) between two r.cpu() readings. */
export function redisCpuPer(c0, c1, events, deliveries) {
  const s = c1.s - c0.s, n = events + deliveries;
  return { cpuS: r2(s), childrenCpuS: r2(c1.children - c0.children), events, deliveries, usPerOp: n > 0 ? r1((s * 1e6) / n) : null };
}

// ---- HTTP -----------------------------------------------------------------------------------

export async function http(method, url, body, headers = {}) {
  const r = await fetch(url, { method, headers: { 'content-type': 'application/json', ...headers }, body: body == null ? undefined : typeof body === 'string' ? body : JSON.stringify(body) });
  const t = await r.text();
  let j = null;
  try { j = t ? JSON.parse(t) : null; } catch { j = t; }
  return { status: r.status, body: j };
}

export async function startReceiver(name = 'receiver', { port = 0, verify = false, status, body } = {}) {
  const args = ['--port', String(port)];
  if (verify) args.push('--verify');
  if (status) args.push('--status', String(status));
  if (body) args.push('--body', body);
  const p = startProc(name, path.join(HELPERS, 'bench_receiver'), args);
  const first = JSON.parse(await p.waitLine((l) => l.startsWith('{"port"'), 10000));
  const base = `http://127.0.0.1:${first.port}`;
  return {
    port: first.port, base, proc: p, pid: p.pid,
    stats: async () => (await http('GET', `${base}/__stats`)).body,
    timeline: async () => (await http('GET', `${base}/__timeline`)).body,
    reset: async () => http('POST', `${base}/__reset`, ''),
    pause: async () => http('POST', `${base}/__pause`, ''),
    resume: async () => http('POST', `${base}/__resume`, ''),
    mark: async () => http('POST', `${base}/__mark`, ''),
    secret: async (p2, s) => http('POST', `${base}/__secret`, `${p2} ${s}`),
  };
}

export function parseMetrics(text) {
  const m = {};
  for (const l of text.split('\n')) {
    if (!l || l.startsWith('#')) continue;
    const i = l.lastIndexOf(' ');
    m[l.slice(0, i)] = Number(l.slice(i + 1));
  }
  return m;
}

/** wrap: a command line the daemon runs under (e.g. valgrind and its flags), none by default. */
export async function startDaemon(name, redis, { env = {}, httpPort, wsPort, wrap = [], bin = BIN } = {}) {
  httpPort = httpPort ?? await freePort();
  wsPort = wsPort ?? await freePort();
  const e = {
    STATUSRELAY_REDIS_URL: redis.url,
    STATUSRELAY_HTTP_LISTEN: `127.0.0.1:${httpPort}`,
    STATUSRELAY_WS_LISTEN: `127.0.0.1:${wsPort}`,
    STATUSRELAY_UPSTREAM_API_URL: 'http://127.0.0.1:9',
    STATUSRELAY_UPSTREAM_WS_URL: 'ws://127.0.0.1:9/',
    STATUSRELAY_UPSTREAM_API_KEY: API_KEY,
    STATUSRELAY_STREAM_TOKEN: STREAM_TOKEN,
    // every load client is on loopback (one address) and subscribes to its own id without
    // the token: the per-address limit of new anonymous ids is lifted for the load runs
    STATUSRELAY_WS_ANON_IDS_PER_ADDRESS: '1000000',
    STATUSRELAY_ALLOW_PRIVATE_TARGETS: 'true',
    STATUSRELAY_LOG_LEVEL: 'warn',
    ...env,
  };
  const p = wrap.length > 0 ? startProc(name, wrap[0], [...wrap.slice(1), bin, 'serve'], { env: e }) : startProc(name, bin, ['serve'], { env: e });
  const url = `http://127.0.0.1:${httpPort}`;
  const t0 = now();
  for (;;) {
    if (p.exited) throw new Error(`${name} exited; log ${p.logPath}`);
    const ok = await fetch(`${url}/readyz`).then((r) => r.status === 200).catch(() => false);
    if (ok) break;
    // generous: a restart after kill -9 on a loaded box replays the AOF first
    if (now() - t0 > 60000) throw new Error(`${name} not ready within 60 s; log ${p.logPath}`);
    await sleep(25);
  }
  return {
    url, httpPort, wsPort, proc: p, pid: p.pid, env: e, readyMs: now() - t0,
    ingestUrl: `${url}/v1/ingest/upstream`,
    metrics: async () => parseMetrics(await (await fetch(`${url}/metrics`)).text()),
    addWebhook: async (hookUrl, extra = {}) => {
      const r = await http('POST', `${url}/v1/webhooks`, { url: hookUrl, ...extra });
      if (r.status !== 201) throw new Error(`POST /v1/webhooks: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body;
    },
  };
}

/** `statusrelay sim` if this build has it (null otherwise); extraArgs: more sim flags; bin:
 * the binary (BIN). */
export async function startSim(name = 'sim', extraArgs = [], bin = BIN) {
  try { execFileSync(bin, ['sim', '--help'], { stdio: 'ignore' }); } catch { return null; }
  const portFile = path.join(RUN_DIR, `${name}.port`);
  const p = startProc(name, bin, ['sim', '--listen', '127.0.0.1:0', '--port-file', portFile, '--api-key', API_KEY, '--step', '1s', '--seed', '7', '--log-level', 'warn', ...extraArgs]);
  if (!(await until(() => fs.existsSync(portFile) && fs.readFileSync(portFile, 'utf8').trim() !== '', 10000, 50))) throw new Error(`${name}: no port file; log ${p.logPath}`);
  const port = Number(fs.readFileSync(portFile, 'utf8').trim());
  await waitPort(port);
  const base = `http://127.0.0.1:${port}`;
  return { port, base, wsUrl: `ws://127.0.0.1:${port}/`, proc: p, pid: p.pid, stats: async () => (await http('GET', `${base}/_sim/stats`)).body };
}

/** Follow the simulator's new requests and track them in the daemon (1,000 ids per call),
 * as an integrator's backend would for its own requests. */
export function simTracker(sim, d) {
  let after = 0, stop = false, tracked = 0;
  const loop = (async () => {
    while (!stop) {
      const r = await http('GET', `${sim.base}/_sim/requests?after=${after}&limit=1000`).catch(() => null);
      const ids = r?.body?.requests?.map((x) => x.id) ?? [];
      if (ids.length > 0) {
        await http('POST', `${d.url}/v1/requests`, { requestIds: ids });
        tracked += ids.length;
        after = r.body.last ?? after + ids.length;
      } else {
        await sleep(20);
      }
    }
  })();
  return { stop: async () => { stop = true; await loop; return tracked; } };
}

/** Accepted observations so far (every source), from the daemon's metrics. */
export function acceptedEvents(m) {
  let n = 0;
  for (const [k, v] of Object.entries(m)) if (k.startsWith('statusrelay_events_total{') && k.includes('outcome="accepted"')) n += v;
  return n;
}

export function pub(name, url, args, timeoutMs) {
  return runTool(name, path.join(HELPERS, 'bench_pub'), [...args, url], { timeoutMs });
}

/** Wait until f() returns true (polling), at most timeoutMs; returns whether it did. */
export async function until(f, timeoutMs, everyMs = 250) {
  const end = now() + timeoutMs;
  while (now() < end) { if (await f()) return true; await sleep(everyMs); }
  return false;
}

/** Deliveries per second over [fromMs, toMs] (wall ms) from a receiver timeline. */
export function rateIn(tl, fromMs, toMs) {
  let n = 0;
  tl.counts.forEach((c, i) => { const t = tl.startMs + i * tl.bucketMs; if (t >= fromMs && t < toMs) n += c; });
  return n / Math.max(0.001, (toMs - fromMs) / 1000);
}

export const results = { rows: [], scenarios: {} };
/** One table row. ceiling/target optional. */
export function row(scenario, metric, value, unit, { ceiling, ceilingName, target, pass, note } = {}) {
  const ratio = ceiling && value != null ? value / ceiling : null;
  results.rows.push({ scenario, metric, value: value == null ? null : r1(value), unit, ceiling: ceiling == null ? null : r1(ceiling), ceilingName: ceilingName ?? null, ratio: ratio == null ? null : r2(ratio), target: target ?? null, pass: pass ?? null, note: note ?? null });
}

// ---- webhooks -------------------------------------------------------------------------------

export const SAMPLE_BODY = JSON.stringify({
  event: 'request.status.updated', timestamp: 1787054250318,
  data: { status: 'pending', inTxHashes: ['0x' + 'a'.repeat(64)], txHashes: [], updatedAt: 1787054250297, originChainId: 8453, destinationChainId: 42161, depositAddress: null, requestId: '0x' + 'b'.repeat(64), referrer: 'bench', details: null, failReason: 'N/A', refundFailReason: 'N/A' },
  statusrelay: { eventId: 'evt_' + 'c'.repeat(32), seq: 2, previousStatus: 'waiting', source: 'webhook', observedAt: 1787054250320, publishedAt: 1787054250318 },
});

export async function ceilings(rx) {
  // A valid Standard Webhooks signature for the sample body (wrk and httpc_probe resend it).
  const secret = execFileSync(path.join(HELPERS, 'sign_tool'), ['whsec-gen']).toString().trim();
  const bodyFile = path.join(RUN_DIR, 'sample-body.json');
  fs.writeFileSync(bodyFile, SAMPLE_BODY);
  const ts = String(Math.floor(now() / 1000));
  const sig = execFileSync(path.join(HELPERS, 'sign_tool'), ['sw-sign', secret, 'evt_ceiling', ts, bodyFile]).toString().trim();
  await rx.secret('/ceil-verify', secret);
  const headers = { 'Content-Type': 'application/json', 'webhook-id': 'evt_ceiling', 'webhook-timestamp': ts, 'webhook-signature': sig };
  const lua = path.join(RUN_DIR, 'post.lua');
  fs.writeFileSync(lua, `wrk.method = "POST"\nwrk.body = ${JSON.stringify(SAMPLE_BODY)}\n` +
    Object.entries(headers).map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`).join('\n') + '\n');
  // each ceiling is run twice, alternating, and the better run kept: on a shared machine a
  // ceiling can only be underestimated by noise. The receiver's CPU per request (from /proc)
  // gives the cost of signature verification independently of the request rates.
  const wrk = async (conns, p, secs) => {
    await rx.reset();
    const c0 = procCpuTicks(rx.pid);
    const out = execFileSync('wrk', ['-t1', `-c${conns}`, `-d${secs}s`, '-s', lua, `${rx.base}${p}`], { timeout: (secs + 20) * 1000 }).toString();
    const cpuS = (procCpuTicks(rx.pid) - c0) / CLK_TCK;
    fs.appendFileSync(path.join(RUN_DIR, 'wrk.log'), out);
    const rps = Number((out.match(/Requests\/sec:\s+([\d.]+)/) ?? [])[1]);
    const st = await rx.stats();
    return { rps, received: st.requests, sigOk: st.sigOk, sigBad: st.sigBad, receiverCpuUsPerRequest: st.requests ? r2((cpuS * 1e6) / st.requests) : null };
  };
  const probe = async (conc, secs) => {
    await rx.reset();
    const hdr = Object.entries(headers).flatMap(([k, v]) => ['--header', `${k}: ${v}`]);
    const s = await runTool(`httpc_probe-c${conc}`, path.join(HELPERS, 'httpc_probe'),
      ['--concurrency', String(conc), '--count', String(sc(400000)), '--abort-after-ms', String(secs * 1000), '--quiet', ...hdr, 'POST', `${rx.base}/ceil`, SAMPLE_BODY], { timeoutMs: (secs + 30) * 1000 });
    return { rps: s.rps, count: s.count, ok: s.ok, connects: s.connects };
  };
  const best = (a, b) => (b.rps > a.rps ? { ...b, runs: [a.rps, b.rps] } : { ...a, runs: [a.rps, b.rps] });
  const secs = Math.max(2, Math.round(3 * Math.min(1, SCALE * 2)));
  const c = {};
  log('ceilings: wrk -> receiver (16 and 128 connections, with and without signature checks) and bare libcurl multi (httpc_probe), each twice');
  const r1s = [await wrk(16, '/ceil', secs), await wrk(16, '/ceil-verify', secs), await wrk(128, '/ceil', secs), await probe(16, secs), await probe(128, secs)];
  const r2s = [await wrk(16, '/ceil', secs), await wrk(16, '/ceil-verify', secs), await wrk(128, '/ceil', secs), await probe(16, secs), await probe(128, secs)];
  [c.wrk16, c.wrk16verify, c.wrk128, c.curl16, c.curl128] = r1s.map((x, i) => best(x, r2s[i]));
  await rx.reset();
  const cu = (x) => x.receiverCpuUsPerRequest;
  c.verifyCostUsPerRequest = cu(c.wrk16verify) != null && cu(c.wrk16) != null ? r2(cu(c.wrk16verify) - cu(c.wrk16)) : null;
  return c;
}

/** Wait until the receiver has n unique deliveries. Never throws: after timeoutMs it keeps
 * waiting as long as deliveries still arrive (no progress for 20 s ends it, 4 x timeoutMs at
 * most), so a slow box gives a slow number instead of a failed run; st.complete says whether
 * all arrived. */
export async function waitDelivered(rx, n, timeoutMs) {
  let st, last = -1, lastChange = now();
  const t0 = now();
  for (;;) {
    st = await rx.stats().catch(() => st);
    if (st && st.unique >= n) break;
    const u = st?.unique ?? 0;
    if (u !== last) { last = u; lastChange = now(); }
    const waited = now() - t0;
    if (waited > 4 * timeoutMs || (waited > timeoutMs && now() - lastChange > 20000)) {
      log(`receiver: ${u} of ${n} deliveries after ${r1(waited / 1000)} s, giving up waiting`);
      break;
    }
    await sleep(200);
  }
  return { ...st, complete: (st?.unique ?? 0) >= n, expected: n };
}

/** Note text for a wait that ended before every delivery arrived. */
export const incomplete = (st) => (st.complete ? '' : `; INCOMPLETE: ${st.unique} of ${st.expected} arrived`);

// ---- webhook delivery runs (the webhooks and cluster scenarios) -----------------------------
// ctx: { d: the daemon, rx: the receiver (the endpoint's secret set on it), pids: the
// processes cpuMeter reads (name -> pid), redis: { cpu(), usedMemory() } of one Redis, or of
// every master of a cluster summed (clusterRedis) }.

/** One endpoint, closed loop: N events through POST /v1/ingest/upstream (64 in flight), N
 * signed deliveries out, as fast as ingest allows. Sustained rate = deliveries / (first POST
 * -> last delivery); a.cpu covers that whole window, cpuDuringIngest / cpuAfterIngest its
 * two parts. Returns { a, st } (st: the receiver's stats at the end). */
export async function sustainedRun({ d, rx, pids, redis }, N, prefix = 'a1', name = 'pub-1ep') {
  await rx.reset();
  const rss0 = procMem(d.pid);
  let meter = cpuMeter(pids);
  const whole = cpuMeter(pids);
  const rc0 = await redis.cpu();
  const tStart = now();
  const p1 = await pub(name, d.ingestUrl, ['--sign-key', API_KEY, '--prefix', prefix, '--count', String(N), '--concurrency', '64', '--seconds', '60'], 90000);
  const tIngestEnd = now();
  const loadCpu = meter();
  meter = cpuMeter(pids);
  const st1 = await waitDelivered(rx, p1.results.accepted, 180000);
  const drainCpu = meter();
  const wholeCpu = whole();
  const rc1 = await redis.cpu();
  const tl1 = await rx.timeline();
  const firstMs = st1.firstMs, lastMs = st1.lastMs;
  const a = {
    events: N, ingest: p1, delivered: st1.unique, duplicates: st1.duplicates, sigOk: st1.sigOk, sigBad: st1.sigBad, connsOpened: st1.connsOpened,
    ingestRate: r1(p1.rate),
    deliveryRateDuringIngest: r1(rateIn(tl1, tStart + 1000, tIngestEnd)),
    deliveryRateAfterIngest: r1(rateIn(tl1, tIngestEnd, lastMs)),
    sustainedRate: r1(st1.unique / Math.max(0.001, (lastMs - tStart) / 1000)),
    wallS: r2((lastMs - tStart) / 1000), firstDeliveryMs: r1(firstMs - tStart),
    cpuDuringIngest: loadCpu, cpuAfterIngest: drainCpu, cpu: wholeCpu, daemonRssStartMiB: r1(rss0.rssKiB / 1024),
    redisUsedMemoryMiB: r1((await redis.usedMemory()) / 1048576), complete: st1.complete,
    redisCpu: redisCpuPer(rc0, rc1, p1.results.accepted, st1.unique),
  };
  // Deliveries per daemon CPU second (the number that survives a noisy machine).
  a.deliveriesPerDaemonCpuS = r1(st1.unique / ((loadCpu.daemon.cpuS ?? 0) + (drainCpu.daemon.cpuS ?? 0)));
  return { a, st: st1 };
}

// (a2) draining a backlog: the receiver stops answering (POST /__pause: it holds every
// answer, as a receiver that hangs would; the daemon's attempts in flight wait, its
// endpoint window fills, and the fan-out records the rest as pending deliveries), NB
// events are ingested for at most 5 s, then the receiver answers everything again
// (POST /__resume) before the 10 s delivery timeout: the backlog drains without a single
// failed attempt. Drain rate: unique deliveries after the resume / (last - resume).
export async function backlogRun({ d, rx, pids, redis }, NB, sustainedRate, prefix = 'a5', name = 'pub-backlog') {
  await rx.reset();
  await rx.pause();
  const tPause = now();
  const pb = await pub(name, d.ingestUrl, ['--sign-key', API_KEY, '--prefix', prefix, '--count', String(NB), '--concurrency', '64', '--seconds', '5'], 60000);
  // let the open batches commit (1 s commit wait) so the backlog is recorded, but answer
  // the held attempts well inside the delivery timeout
  await sleep(Math.max(0, Math.min(1500, 8000 - (now() - tPause))));
  const before = await rx.stats();
  const bm = cpuMeter(pids);
  const brc0 = await redis.cpu();
  const tResume = now();
  await rx.resume();
  const stb = await waitDelivered(rx, pb.results.accepted, Math.max(60000, (4000 * pb.results.accepted) / Math.max(500, sustainedRate ?? 0)));
  const bcpu = bm();
  const brc1 = await redis.cpu();
  const drained = stb.unique - before.unique;
  return {
    events: NB, ingest: pb, pausedMs: tResume - tPause, deliveredBeforeResume: before.unique, heldAtResume: before.held, backlog: pb.results.accepted - before.unique,
    delivered: stb.unique, duplicates: stb.duplicates, sigOk: stb.sigOk, sigBad: stb.sigBad, complete: stb.complete,
    drainS: r2((stb.lastMs - tResume) / 1000), drainRate: r1(drained / Math.max(0.001, (stb.lastMs - tResume) / 1000)),
    cpu: bcpu, redisCpu: redisCpuPer(brc0, brc1, 0, drained),
  };
}

/** The filters of endpoint i in the filtered 100-endpoint runs (issue 25): 20 wallets in
 * `users` - 15 of its own that no event carries, then the `depositors` wallets bench_pub
 * --depositors gives the events (0xbe5c..., here in upper-case hex: 0x addresses compare
 * case-insensitively) - and 5 referrers - 3 of its own, then the `referrers` ones of bench_pub
 * --referrers (bench-0, ...). Every event matches every endpoint, found at the end of each
 * list (the matcher scans it in order). */
export function filtersOf(i, depositors = 5, referrers = 2) {
  const hex = (n, w) => n.toString(16).padStart(w, '0');
  return {
    users: [...Array.from({ length: 20 - depositors }, (_, k) => `0xf1${hex(i, 4)}${hex(k, 34)}`),
      ...Array.from({ length: depositors }, (_, j) => `0x${`be5c${hex(j, 36)}`.toUpperCase()}`)],
    referrers: [...Array.from({ length: 5 - referrers }, (_, k) => `shop-${i}-${k}`), ...Array.from({ length: referrers }, (_, j) => `bench-${j}`)],
  };
}

/** Latency at a fixed rate offered by bench_pub (L events at `rate`/s, 64 in flight). */
export async function latencyRun({ d, rx, pids }, rate, L, prefix, name = `pub-lat-${rate}`) {
  await rx.reset();
  log(`latency: ${L} events at ${rate}/s, 1 endpoint`);
  const m = cpuMeter(pids);
  const p = await pub(name, d.ingestUrl, ['--sign-key', API_KEY, '--prefix', prefix, '--count', String(L), '--rate', String(rate), '--concurrency', '64', '--seconds', String(Math.ceil(L / rate) + 30)], (L / rate + 60) * 1000);
  const cpu = m();
  const st = await waitDelivered(rx, p.results.accepted, 60000);
  return { rate, offeredBy: 'bench_pub', achievedRate: r1(p.rate), behind: p.behind, events: L, ingest: p, delivered: st.unique, complete: st.complete, expected: st.expected, e2e: st.e2e, relay: st.relay, duplicates: st.duplicates, sigOk: st.sigOk, sigBad: st.sigBad, cpu };
}

/** nginx + nchan (bench/nginx-nchan.conf) on a free port, in a directory of the run: { port,
 * proc, pid: its worker (what serves the clients), master }. */
export async function startNchan() {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(RUN_DIR, 'nginx-'));
  const conf = fs.readFileSync(path.join(ROOT, 'bench/nginx-nchan.conf'), 'utf8').replaceAll('__PORT__', String(port)).replaceAll('__DIR__', dir);
  fs.writeFileSync(path.join(dir, 'nginx.conf'), conf);
  const p = startProc('nginx', 'nginx', ['-p', dir, '-c', path.join(dir, 'nginx.conf'), '-e', path.join(dir, 'nginx-error.log')]);
  await waitPort(port);
  // the worker is the master's child
  let worker = null;
  await until(() => { try { worker = Number(fs.readFileSync(`/proc/${p.pid}/task/${p.pid}/children`, 'utf8').trim().split(/\s+/)[0]) || null; } catch { worker = null; } return worker != null; }, 5000, 50);
  return { port, proc: p, pid: worker ?? p.pid, master: p.pid };
}

/** Wait until progress() (a count read from a load tool's output) reaches want, or stops
 * moving for 2 s, or timeoutMs passes: a bounded wait for messages still arriving. */
export async function settleProgress(progress, want, timeoutMs) {
  const deadline = now() + timeoutMs;
  let lastN = -1, lastChange = now();
  while (now() < deadline) {
    const cur = progress();
    if (cur >= want) break;
    if (cur !== lastN) { lastN = cur; lastChange = now(); } else if (now() - lastChange > 2000) break;
    await sleep(100);
  }
}
