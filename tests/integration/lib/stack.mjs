// stack.mjs - a real redis-server and a real `statusrelay serve` on loopback for tests.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BIN, freePort, startProcess, waitPort, until } from './proc.mjs';
import { redisCmd } from './resp.mjs';

export { redisCmd };

let seq = 0;


/** Start redis-server on a free port in a private directory. aof: appendonly yes. */
export async function startRedis({ aof = false, port, dir } = {}) {
  port = port ?? await freePort();
  dir = dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'sr-redis-'));
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '',
    '--appendonly', aof ? 'yes' : 'no', '--appendfsync', 'everysec', '--protected-mode', 'yes'];
  const p = startProcess(`redis-${port}-${seq++}`, 'redis-server', args);
  await waitPort(port);
  await until(async () => (await redisCmd(port, 'PING')) === 'PONG', { msg: 'redis PING' });
  return {
    port, dir, url: `redis://127.0.0.1:${port}/0`, proc: p,
    cmd: (...a) => redisCmd(port, ...a),
    stop: (sig) => p.stop(sig),
    /** Restart on the same port and directory (AOF replays). */
    async restart() { await p.stop('SIGTERM'); return startRedis({ aof, port, dir }); },
  };
}

/**
 * Start `statusrelay serve`. opts: redisUrl, apiUrl, wsUrl, apiKey, env (extra STATUSRELAY_*),
 * args (extra flags). Returns { http, ws, url, proc, get(path), post(path, body), stop() }.
 */
export async function startDaemon(opts = {}) {
  const httpPort = opts.httpPort ?? await freePort();
  const wsPort = opts.wsPort ?? await freePort();
  const env = {
    STATUSRELAY_REDIS_URL: opts.redisUrl,
    STATUSRELAY_HTTP_LISTEN: `127.0.0.1:${httpPort}`,
    STATUSRELAY_WS_LISTEN: `127.0.0.1:${wsPort}`,
    STATUSRELAY_UPSTREAM_API_URL: opts.apiUrl ?? 'http://127.0.0.1:9',
    STATUSRELAY_UPSTREAM_WS_URL: opts.wsUrl ?? 'ws://127.0.0.1:9/',
    STATUSRELAY_LOG_LEVEL: opts.logLevel ?? 'info',
    STATUSRELAY_ALLOW_PRIVATE_TARGETS: 'true',
    ...(opts.apiKey ? { STATUSRELAY_UPSTREAM_API_KEY: opts.apiKey } : {}),
    ...(opts.env ?? {}),
  };
  const name = opts.name ?? `daemon-${httpPort}`;
  const proc = startProcess(name, opts.bin ?? BIN, ['serve', ...(opts.args ?? [])], { env }); // bin: another build (an older version)
  const url = `http://127.0.0.1:${httpPort}`;
  const headers = opts.env?.STATUSRELAY_ADMIN_TOKEN ? { authorization: `Bearer ${opts.env.STATUSRELAY_ADMIN_TOKEN}` } : {};
  const d = {
    httpPort, wsPort, url, wsUrl: `ws://127.0.0.1:${wsPort}/`, proc, env,
    async get(p) { const r = await fetch(url + p, { headers }); const t = await r.text(); return { status: r.status, body: t ? safeJson(t) : null, text: t }; },
    async post(p, body) {
      const r = await fetch(url + p, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
      const t = await r.text(); return { status: r.status, body: t ? safeJson(t) : null, text: t };
    },
    async del(p) { const r = await fetch(url + p, { method: 'DELETE', headers }); const t = await r.text(); return { status: r.status, body: t ? safeJson(t) : null }; },
    stop: (sig) => proc.stop(sig),
  };
  if (opts.waitReady !== false) {
    await until(async () => {
      if (proc.child.exitCode !== null) throw new Error(`daemon exited: ${proc.log().slice(-2000)}`);
      return (await fetch(url + '/readyz')).status === 200;
    }, { timeoutMs: 15000, msg: `daemon ready (log: ${proc.logPath})` });
  }
  return d;
}

function safeJson(t) { try { return JSON.parse(t); } catch { return t; } }
