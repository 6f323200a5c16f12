// many_endpoints.test.mjs - 50 endpoints on one receiver host (one host:port, so they share
// the daemon's 64 connections to it: relay/common/httpc.c "per-host slots"), mixed rate
// limits, one slow endpoint and one that fails its first answers: every delivery arrives,
// exactly once as a success, per-request order per endpoint, each limited endpoint within its
// limit, none starved. Real redis-server, the daemon, the C hook receiver, events injected
// through signed POST /v1/ingest/upstream.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { until } from './lib/proc.mjs';
import { startReceiver, ingest, upstreamPayload, rid, maxPerSecond } from './lib/hooks.mjs';

const KEY = 'many-endpoints-test-key';
const cleanup = [];
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });

const N_EP = 50;
const N_REQ = 20;
const STATUSES = ['pending', 'submitted', 'success'];
const SLOW = 7; // answers after 400 ms
const FLAKY = 3; // answers 503 three times first (retried, so recorded and claimed)
const limitOf = (k) => (k % 10 === 1 ? 10 : k % 10 === 2 ? 25 : null);

test('50 endpoints on one host, mixed rate limits, a slow and a failing one: all arrive once, in order, none starved', async () => {
  const redis = await startRedis();
  cleanup.push(() => redis.stop());
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, logLevel: 'warn',
    args: ['--retry-schedule', '0s,200ms,200ms,200ms,200ms,200ms,200ms,200ms'] });
  cleanup.push(() => d.stop());
  const rx = await startReceiver({ script: [`/e/${FLAKY}=503,503,503`], delays: [`/e/${SLOW}=400`] });
  cleanup.push(() => rx.stop());
  for (let k = 0; k < N_EP; k++) {
    const r = await d.post('/v1/webhooks', { url: rx.url(`/e/${k}`), rateLimit: limitOf(k) });
    assert.equal(r.status, 201, r.text);
  }
  // every request's statuses in order (seq 1, 2, 3), the requests side by side
  const rids = Array.from({ length: N_REQ }, (_, i) => rid(`many${i}`));
  const t0 = Date.now();
  await Promise.all(rids.map(async (r, i) => {
    for (let s = 0; s < STATUSES.length; s++) {
      const st = await ingest(d, KEY, upstreamPayload({ rid: r, status: STATUSES[s], updatedAt: t0 + i * 10 + s }));
      assert.equal(st, 200);
    }
  }));
  const want = N_REQ * STATUSES.length;
  const okOf = (recs, p) => recs.filter((x) => x.path === p && x.status >= 200 && x.status < 300);
  await until(() => {
    const recs = rx.records();
    for (let k = 0; k < N_EP; k++) if (new Set(okOf(recs, `/e/${k}`).map((x) => x.id)).size < want) return false;
    return true;
  }, { timeoutMs: 90000, stepMs: 250, msg: `${want} deliveries at each of ${N_EP} endpoints` });
  const recs = rx.records();
  let ids0 = null;
  for (let k = 0; k < N_EP; k++) {
    const p = `/e/${k}`;
    const all = recs.filter((x) => x.path === p);
    const ok = okOf(recs, p);
    // exactly once as a success (nothing crashed: no repeat), the same events everywhere
    assert.equal(ok.length, want, `${p}: ${ok.length} successful requests for ${want} events`);
    const ids = [...new Set(ok.map((x) => x.id))].sort();
    assert.equal(ids.length, want, `${p}: duplicates`);
    if (ids0 === null) ids0 = ids;
    else assert.deepEqual(ids, ids0, `${p} received other events`);
    // per request: attempts never go back in seq, successes are 1, 2, 3 in arrival order
    const byReq = new Map();
    for (const x of all) { // file order = arrival order
      const b = JSON.parse(x.body);
      const key = b.data.requestId;
      if (!byReq.has(key)) byReq.set(key, []);
      byReq.get(key).push({ seq: b.statusrelay.seq, ok: x.status >= 200 && x.status < 300, status: b.data.status });
    }
    assert.equal(byReq.size, N_REQ, `${p}: requests`);
    for (const [r, xs] of byReq) {
      for (let i = 1; i < xs.length; i++)
        assert.ok(xs[i].seq >= xs[i - 1].seq, `${p} ${r}: seq ${xs[i].seq} after ${xs[i - 1].seq}`);
      assert.deepEqual(xs.filter((x) => x.ok).map((x) => x.seq), [1, 2, 3], `${p} ${r}: order`);
      assert.deepEqual(xs.filter((x) => x.ok).map((x) => x.status), STATUSES, `${p} ${r}: statuses`);
    }
    const lim = limitOf(k);
    if (lim !== null) {
      const peak = maxPerSecond(all.map((x) => x.t));
      assert.ok(peak <= lim, `${p}: ${peak} arrivals in a second, rateLimit ${lim}`);
    }
  }
  const flaky = recs.filter((x) => x.path === `/e/${FLAKY}`);
  assert.equal(flaky.length, want + 3, `the failing endpoint: 3 failed attempts retried (${flaky.length})`);
  const lastOf = (p) => Math.max(...okOf(recs, p).map((x) => x.t)) - t0;
  console.log(`50 endpoints x ${want}: unlimited done in ${lastOf('/e/0')} ms, slow ${lastOf(`/e/${SLOW}`)} ms, ` +
    `rateLimit 10 ${lastOf('/e/1')} ms, rateLimit 25 ${lastOf('/e/2')} ms, failing ${lastOf(`/e/${FLAKY}`)} ms`);
});
