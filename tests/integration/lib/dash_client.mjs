// dash_client.mjs - a dashboard stream client for the tests (docs/dashboard.md): every
// frame kept with its arrival time, waits on frames, the subscribe answer. Shared by
// dashboard.test.mjs and partitions_dash.test.mjs.
import WebSocket from 'ws';
import { until } from './proc.mjs';

export const EVENT = 'request.status.updated';

export function client(url, { headers, light = false } = {}) {
  const ws = new WebSocket(url, { headers, perMessageDeflate: false });
  const c = { ws, frames: [], closed: null, pings: 0, n: 0, greeted: false };
  c.open = new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  ws.on('message', (d) => {
    const t = d.toString();
    let f;
    try { f = JSON.parse(t); } catch { f = { raw: t }; }
    f._at = Date.now();
    c.n++;
    if (f.type === 'connection') c.greeted = true;
    if (c.onFrame) c.onFrame(f);
    if (!light) c.frames.push(f);
  });
  ws.on('close', (code, reason) => { c.closed = { code, reason: reason.toString() }; });
  ws.on('ping', () => { c.pings++; });
  ws.on('error', () => {});
  c.send = (o) => ws.send(typeof o === 'string' ? o : JSON.stringify(o));
  c.wait = (pred, msg, timeoutMs = 8000) => until(() => c.frames.find(pred), { timeoutMs, msg });
  c.waitN = (pred, n, msg, timeoutMs = 8000) =>
    until(() => c.frames.filter(pred).length >= n && c.frames.filter(pred), { timeoutMs, msg });
  c.events = () => c.frames.filter((f) => f.event === EVENT && !f.statusrelay?.snapshot);
  c.snapshots = () => c.frames.filter((f) => f.event === EVENT && f.statusrelay?.snapshot);
  c.ofType = (type) => c.frames.filter((f) => f.type === type);
  c.close = () => { try { ws.close(); } catch {} };
  c.ready = c.open.then(() => until(() => c.greeted && (c.frames.find((f) => f.type === 'connection') ?? true), { msg: 'greeting' }));
  c.ready.catch(() => {});
  return c;
}

export const sub = (filters, extra = {}) => ({ type: 'subscribe', event: EVENT, ...(filters ? { filters } : {}), ...extra });
export const isAck = (type) => (f) => f.type === type && f.status === 'success';

/** The answer to one subscribe: its ack, or its refusal ({"type":"error","request":"subscribe"},
 *  after which the server closes the connection: docs/dashboard.md). */
export async function subscribed(c, msg) {
  const before = c.frames.length;
  c.send(msg);
  return c.wait((f, i) => c.frames.indexOf(f) >= before &&
    (f.type === 'subscribe' || (f.type === 'error' && f.request === 'subscribe')), 'subscribe answer');
}
