// sim.mjs - start the upstream simulator (`statusrelay sim`) on a free loopback port for a
// test, and talk to its control API.
//
//   const sim = await startSim({ apiKey: 'k', seed: 7, rate: 0 });
//   sim.url      http://127.0.0.1:PORT   (STATUSRELAY_UPSTREAM_API_URL for the daemon)
//   sim.wsUrl    ws://127.0.0.1:PORT/    (STATUSRELAY_UPSTREAM_WS_URL; add ?apiKey= yourself
//                                         or use sim.wsUrlWithKey)
//   await sim.control('/requests', { lifecycle: 'refund' })   POST when a body is given
//   await sim.control('/stats')                               GET otherwise
//   await sim.control('/faults', null, 'DELETE')              any method
//   await sim.stop()                                          SIGTERM, resolves {code, signal}
//
// control() resolves the parsed JSON body of a 2xx answer and rejects otherwise with an Error
// carrying .status and .body. Paths may be given with or without the "/_sim" prefix.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, startProcess, until } from './proc.mjs';

let seq = 0;

/**
 * opts: apiKey, rate (requests/s), seed, webhookUrl, duration ('5s'), step ('2s'),
 * rateLimit (per minute), extraArgs (array), env (extra environment), name (log file name).
 */
export async function startSim(opts = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sr-sim-'));
  const portFile = path.join(dir, 'port');
  const args = ['sim', '--listen', '127.0.0.1:0', '--port-file', portFile,
    '--seed', String(opts.seed ?? 1), '--rate', String(opts.rate ?? 0)];
  if (opts.apiKey) args.push('--api-key', opts.apiKey);
  if (opts.webhookUrl) args.push('--webhook-url', opts.webhookUrl);
  if (opts.duration) args.push('--duration', String(opts.duration));
  if (opts.step) args.push('--step', String(opts.step));
  if (opts.rateLimit !== undefined) args.push('--rate-limit', String(opts.rateLimit));
  args.push(...(opts.extraArgs ?? []));
  const proc = startProcess(opts.name ?? `sim-${process.pid}-${seq++}`, BIN, args,
    { env: opts.env ?? {} });
  let port;
  try {
    port = await until(() => {
      if (proc.child.exitCode !== null) throw new Error(`sim exited early: ${proc.log()}`);
      const t = fs.existsSync(portFile) ? fs.readFileSync(portFile, 'utf8').trim() : '';
      return t ? Number(t) : 0;
    }, { timeoutMs: 10000, msg: 'simulator port file' });
  } catch (e) {
    await proc.stop('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
    throw new Error(`${e.message}\n${proc.log()}`);
  }
  const url = `http://127.0.0.1:${port}`;
  const wsUrl = `ws://127.0.0.1:${port}/`;

  async function control(p, body, method) {
    const full = p.startsWith('/_sim') ? p : `/_sim${p.startsWith('/') ? '' : '/'}${p}`;
    const m = method ?? (body === undefined || body === null ? 'GET' : 'POST');
    const res = await fetch(url + full, {
      method: m,
      headers: body != null ? { 'content-type': 'application/json' } : {},
      body: body != null ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    let json;
    try { json = JSON.parse(text); } catch { json = text; }
    if (!res.ok) {
      const err = new Error(`sim ${m} ${full}: ${res.status} ${text}`);
      err.status = res.status;
      err.body = json;
      throw err;
    }
    return json;
  }

  return {
    port, url, wsUrl, proc,
    wsUrlWithKey: opts.apiKey ? `${wsUrl}?apiKey=${encodeURIComponent(opts.apiKey)}` : wsUrl,
    control,
    stats: () => control('/stats'),
    log: () => proc.log(),
    async stop(signal = 'SIGTERM') {
      const r = await proc.stop(signal);
      fs.rmSync(dir, { recursive: true, force: true });
      return r;
    },
  };
}
