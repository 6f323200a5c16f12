// load.mjs - a bounded stream of upstream observations for failover tests (cluster.test,
// cluster_partitions.test) and the checks of what the receivers got.
//
//   const { ids, accepts } = await pump(daemons, key, 'tag', 60, async (i) => { ... });
//   await allDelivered(d, rx, ids)     every accepted event reached rx (returns the count)
//   deliveries(rx, path)               the 2xx attempts of one endpoint by webhook-id
//   maxGap(accepts)                    the longest time without an accepted event
import assert from 'node:assert/strict';
import { until } from './proc.mjs';
import { ingest, upstreamPayload, rid } from './hooks.mjs';

/** p, or a rejection after ms (an answer that never comes must fail the test, not hang it). */
export function bounded(p, ms) {
  let t;
  return Promise.race([p, new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`no answer in ${ms} ms`)), ms); })])
    .finally(() => clearTimeout(t));
}

/** Ingest a bounded stream: n requests x waiting/pending/success, each observation retried
 * (as the upstream retries) until the daemon answers 200, which it does only once Redis holds
 * it. target: a daemon, or an array of daemons taking the requests in turn. Calls hook(i)
 * before request i. Returns { ids, accepts: [ms of each 200] }. */
export async function pump(target, key, tag, n, hook) {
  const ds = Array.isArray(target) ? target : [target];
  const ids = [];
  const accepts = [];
  const t0 = Date.now();
  for (let i = 0; i < n; i++) {
    await hook?.(i);
    const d = ds[i % ds.length];
    const id = rid(`${tag}${i}`);
    ids.push(id);
    for (const [k, st] of ['waiting', 'pending', 'success'].entries()) {
      let code = 0, lastErr;
      for (let tries = 0; tries < 400 && code !== 200 && Date.now() - t0 < 60000; tries++) {
        code = await bounded(ingest(d, key, upstreamPayload({ rid: id, status: st, updatedAt: t0 + i * 10 + k })), 15000).catch((e) => { lastErr = e; return 0; });
        if (code !== 200) await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(code, 200, `observation ${id} ${st} accepted within 400 tries and 60 s (${lastErr?.cause?.code ?? lastErr?.message})`);
      accepts.push(Date.now());
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  return { ids, accepts };
}

/** Every event of ids (from the event log of d) reached the receiver (on any path); returns
 * the event count. */
export async function allDelivered(d, rx, ids, { timeoutMs = 30000 } = {}) {
  const expected = new Map(); // event id -> request id
  for (const id of ids) {
    const r = await d.get(`/v1/events?requestId=${id}&limit=100`);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body.events.map((e) => e.status), ['waiting', 'pending', 'success'], `${id} timeline`);
    for (const e of r.body.events) expected.set(e.eventId, id);
  }
  let missing = [];
  await until(() => {
    const got = new Set(rx.records().filter((x) => x.status < 300).map((x) => x.headers['webhook-id']));
    missing = [...expected.keys()].filter((e) => !got.has(e));
    return missing.length === 0;
  }, { msg: `all ${expected.size} events delivered`, timeoutMs, stepMs: 200 }).catch((e) => {
    e.message += `; ${missing.length} missing: ${missing.slice(0, 6).map((x) => `${x} (request ${expected.get(x)})`).join(', ')}`;
    e.missing = missing.map((x) => [x, expected.get(x)]);
    throw e;
  });
  return expected.size;
}

/** One endpoint's 2xx attempts (path: its receiver path; all when omitted): { byId: Map
 * webhook-id -> times received, duplicates: receptions beyond the first, order: Map request
 * id -> statuses in order of first reception }. */
export function deliveries(rx, path) {
  const byId = new Map();
  const order = new Map();
  let duplicates = 0;
  for (const x of rx.records()) {
    if (x.status >= 300 || (path && x.path !== path)) continue;
    const id = x.headers['webhook-id'];
    byId.set(id, (byId.get(id) ?? 0) + 1);
    if (byId.get(id) > 1) { duplicates++; continue; }
    const b = JSON.parse(x.body);
    order.set(b.data.requestId, [...(order.get(b.data.requestId) ?? []), b.data.status]);
  }
  return { byId, duplicates, order };
}

/** The longest time between two consecutive timestamps. */
export const maxGap = (ts) => ts.slice(1).reduce((m, t, i) => Math.max(m, t - ts[i]), 0);
