// hooks.mjs - webhook test helpers: the C receiver (helpers/hook_receiver), hostile raw TCP
// receivers, signed upstream ingest to inject events, and record readers.
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { HELPERS, OUT, startProcess, until } from './proc.mjs';

let n = 0;

/** Start helpers/hook_receiver. opts: script (array of "/p=500,200"), def, delayMs, delays,
 *  minimal, noRecord. Returns { port, url(path), records(), stop(), setScript(spec) }. */
export async function startReceiver(opts = {}) {
  const out = path.join(OUT, `hooks-${process.pid}-${n++}.jsonl`);
  fs.writeFileSync(out, '');
  const args = ['--out', out];
  for (const s of opts.script ?? []) args.push('--script', s);
  if (opts.def) args.push('--default', String(opts.def));
  if (opts.delayMs) args.push('--delay-ms', String(opts.delayMs));
  for (const d of opts.delays ?? []) args.push('--delay', d);
  if (opts.minimal) args.push('--minimal');
  if (opts.noRecord) args.push('--no-record');
  const p = startProcess(`hook-receiver-${n}`, path.join(HELPERS, 'hook_receiver'), args);
  const port = await until(() => {
    const m = /\{"port":(\d+)\}/.exec(p.log());
    return m ? Number(m[1]) : 0;
  }, { msg: 'hook_receiver port' });
  return {
    port, proc: p, file: out,
    url: (pth = '/') => `http://127.0.0.1:${port}${pth}`,
    records: () => readRecords(out),
    async setScript(spec) {
      const r = await fetch(`http://127.0.0.1:${port}/__script`, { method: 'POST', body: spec });
      if (r.status !== 200) throw new Error(`bad script ${spec}`);
    },
    stop: () => p.stop(),
  };
}

export function readRecords(file) {
  const t = fs.readFileSync(file, 'utf8');
  const out = [];
  for (const line of t.split('\n')) {
    if (!line) continue;
    try { out.push(JSON.parse(line)); } catch { /* a line being written */ }
  }
  return out;
}

/** Raw TCP server answering each connection with behaviour(socket, requestText). */
export async function startRawServer(behaviour) {
  const sockets = new Set();
  let hits = 0;
  const srv = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    let buf = '';
    let fired = false;
    s.on('data', (d) => {
      buf += d.toString('latin1');
      const he = buf.indexOf('\r\n\r\n');
      if (he < 0 || fired) return;
      const m = /content-length:\s*(\d+)/i.exec(buf.slice(0, he));
      const need = he + 4 + (m ? Number(m[1]) : 0);
      if (buf.length < need) return;
      fired = true;
      hits++;
      behaviour(s, buf.slice(0, need));
    });
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return {
    port: srv.address().port,
    url: (p = '/') => `http://127.0.0.1:${srv.address().port}${p}`,
    hits: () => hits,
    stop: () => new Promise((r) => { for (const s of sockets) s.destroy(); srv.close(() => r()); }),
  };
}

/** An upstream-shaped webhook payload for one observation. */
export function upstreamPayload({ rid, status = 'pending', updatedAt = Date.now(), origin = 1,
  dest = 8453, inTx = [], outTx = [] }) {
  return {
    event: 'request.status.updated', timestamp: updatedAt,
    data: {
      status, inTxHashes: inTx, txHashes: outTx, updatedAt, originChainId: origin,
      destinationChainId: dest, depositAddress: null, requestId: rid, referrer: null,
      details: null, failReason: status === 'failure' || status === 'refund' ? 'UNKNOWN' : 'N/A',
      refundFailReason: 'N/A',
    },
  };
}

/** POST one observation to /v1/ingest/upstream, signed with apiKey. Returns the status. */
export async function ingest(daemon, apiKey, payload) {
  const body = JSON.stringify(payload);
  const ts = String(Date.now());
  const sig = crypto.createHmac('sha256', apiKey).update(`${ts}.${body}`).digest('hex');
  const r = await fetch(`${daemon.url}/v1/ingest/upstream`, {
    method: 'POST', body,
    headers: { 'content-type': 'application/json', 'x-signature-timestamp': ts, 'x-signature-sha256': sig },
  });
  await r.text();
  return r.status;
}

export function rid(tag = '') {
  return '0x' + crypto.createHash('sha256').update(`${tag}:${Math.random()}:${Date.now()}`).digest('hex');
}

export async function patch(daemon, p, body) {
  const r = await fetch(daemon.url + p, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const t = await r.text();
  return { status: r.status, body: t ? JSON.parse(t) : null };
}

/** The most arrivals (times t, ms) in any window [t, t + 1000). */
export function maxPerSecond(times) {
  const t = [...times].sort((a, b) => a - b);
  let best = 0;
  for (let i = 0, j = 0; i < t.length; i++) {
    while (t[j] <= t[i] - 1000) j++;
    best = Math.max(best, i - j + 1);
  }
  return best;
}
