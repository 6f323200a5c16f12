// proc.mjs - start and stop real processes for integration tests (loopback only).
// Every process started here is killed when the test process exits, even on failure.
import { spawn } from 'node:child_process';
import net from 'node:net';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export const BIN = process.env.STATUSRELAY_BIN ?? path.resolve('../bin/statusrelay');
export const HELPERS = process.env.STATUSRELAY_HELPERS ?? path.resolve('../build/helpers');
export const OUT = path.resolve('out');
fs.mkdirSync(OUT, { recursive: true });

const live = new Set();
process.on('exit', () => { for (const p of live) { try { p.kill('SIGKILL'); } catch {} } });

const handedOut = new Set(); // ports freePort gave this process: never given twice

function osFreePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

/** A free TCP port on 127.0.0.1 (bound then released), never one this process was given
 * before: the kernel may hand the same ephemeral port to two calls in a row before either
 * is bound (seen: a daemon's REST and dashboard ports equal, "Address already in use"). */
export async function freePort() {
  for (let i = 0; ; i++) {
    const port = await osFreePort();
    if (!handedOut.has(port) || i >= 50) {
      handedOut.add(port);
      return port;
    }
  }
}

/** Resolve when host:port accepts TCP connections, or throw after timeoutMs. */
export async function waitPort(port, host = '127.0.0.1', timeoutMs = 10000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const c = net.connect(port, host);
      c.once('connect', () => { c.destroy(); resolve(true); });
      c.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > end) throw new Error(`port ${host}:${port} not listening after ${timeoutMs} ms`);
    await sleep(50);
  }
}

/** Poll fn() until it returns a truthy value; throw with msg after timeoutMs. */
export async function until(fn, { timeoutMs = 10000, stepMs = 50, msg = 'condition' } = {}) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    if (Date.now() > end) throw new Error(`timed out waiting for ${msg}: ${last instanceof Error ? last.message : JSON.stringify(last)}`);
    await sleep(stepMs);
  }
}

/**
 * Spawn a process; its stdout/stderr go to out/<name>.log. Returns
 * { child, name, log(): string, stop(signal='SIGTERM', timeoutMs=5000): Promise<exitCode>,
 *   exited: Promise<{code, signal}> }.
 */
export function startProcess(name, cmd, args, { env = {}, cwd } = {}) {
  const logPath = path.join(OUT, `${name}.log`);
  const fd = fs.openSync(logPath, 'w');
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, cwd, stdio: ['ignore', fd, fd] });
  fs.closeSync(fd);
  live.add(child);
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => { live.delete(child); resolve({ code, signal }); }));
  return {
    child, name, exited, logPath,
    log: () => fs.readFileSync(logPath, 'utf8'),
    async stop(signal = 'SIGTERM', timeoutMs = 5000) {
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      child.kill(signal);
      const t = setTimeout(() => { try { child.kill('SIGKILL'); } catch {} }, timeoutMs);
      const r = await exited;
      clearTimeout(t);
      return r;
    },
  };
}
