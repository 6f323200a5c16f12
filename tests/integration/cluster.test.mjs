// cluster.test.mjs - the daemon on a real 3-master Redis Cluster (one replica each) on
// loopback, with a redis-cluster:// URL: the webhook lifecycle fed by the simulator, a
// manual failover of the deployment's master under a bounded stream of events (no accepted
// event lost), and a live migration of the deployment's slot to another master (ASK,
// TRYAGAIN, then MOVED) with work going on. Every daemon's deployment lives in one slot
// (one hash tag); the test finds its master and seeds the daemon with another node.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Webhook } from 'standardwebhooks';
import { startDaemon } from './lib/stack.mjs';
import { startCluster } from './lib/cluster.mjs';
import { startSim } from './lib/sim.mjs';
import { until } from './lib/proc.mjs';
import { startReceiver, ingest, upstreamPayload, rid } from './lib/hooks.mjs';

const KEY = 'cluster-test-key';
let cl, sim;
const cleanup = [];

before(async () => {
  cl = await startCluster({ masters: 3, replicas: 1 });
  sim = await startSim({ apiKey: KEY, seed: 16, rateLimit: 0 });
});
after(async () => {
  for (const f of cleanup.reverse()) { try { await f(); } catch {} }
  await sim?.stop();
  await cl?.stop();
});

/** A daemon on prefix, seeded with a master that does NOT own the prefix's slot. */
async function daemon(prefix, env = {}) {
  const slot = await cl.slotOf(prefix);
  const owner = await cl.ownerOf(slot);
  const other = (await cl.nodes()).find((x) => x.flags.includes('master') && x.id !== owner.id);
  const d = await startDaemon({
    redisUrl: cl.url(other.port), apiUrl: sim.url, wsUrl: sim.wsUrl, apiKey: KEY,
    env: {
      STATUSRELAY_REDIS_PREFIX: prefix, STATUSRELAY_RETRY_SCHEDULE: '0s,200ms,500ms,1s,2s',
      STATUSRELAY_DELIVERY_TIMEOUT: '2s', STATUSRELAY_CONNECT_TIMEOUT: '1s', STATUSRELAY_DELIVERY_LEASE: '3s',
      ...env,
    },
    name: `cluster-daemon-${prefix}`,
  });
  cleanup.push(() => d.stop());
  return { d, slot, owner };
}

async function receiver(opts) {
  const rx = await startReceiver(opts);
  cleanup.push(() => rx.stop());
  return rx;
}

async function delivered(d, whId) {
  const out = [];
  let cursor = '';
  for (let i = 0; i < 100; i++) {
    const r = await d.get(`/v1/webhooks/${whId}/deliveries?state=delivered&limit=100${cursor ? `&cursor=${cursor}` : ''}`);
    assert.equal(r.status, 200, r.text);
    out.push(...r.body.deliveries);
    if (!r.body.cursor) break;
    cursor = r.body.cursor;
  }
  return out;
}

test('webhook lifecycle on a cluster: sim events tracked, delivered signed, listed', async () => {
  const { d, owner } = await daemon('clu1');
  const ready = await d.get('/readyz');
  assert.equal(ready.status, 200);
  const rx = await receiver();
  const wh = await d.post('/v1/webhooks', { url: rx.url('/c') });
  assert.equal(wh.status, 201, wh.text);
  const ids = [];
  for (let i = 0; i < 3; i++) {
    const r = await sim.control('/requests', { path: ['waiting', 'pending', 'success'], stepMs: 0, autoHashes: true });
    const t = await d.post('/v1/requests', { requestId: r.id });
    assert.ok(t.status === 201 || t.status === 200, t.text);
    ids.push(r.id);
  }
  for (const id of ids) {
    await until(async () => (await d.get(`/v1/requests/${id}`)).body?.status === 'waiting', { msg: 'tracked waiting' });
  }
  for (const step of ['pending', 'success']) {
    for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
    for (const id of ids) {
      await until(async () => (await d.get(`/v1/requests/${id}`)).body?.status === step,
        { msg: `${id} reaches ${step}`, timeoutMs: 15000 });
    }
  }
  await until(() => rx.records().length >= 9, { msg: '9 deliveries', timeoutMs: 15000 });
  const recs = rx.records();
  for (const x of recs) new Webhook(wh.body.secret).verify(x.body, x.headers);
  const got = new Map();
  for (const x of recs) {
    const b = JSON.parse(x.body);
    got.set(b.data.requestId, [...(got.get(b.data.requestId) ?? []), b.data.status]);
  }
  for (const id of ids) assert.deepEqual(got.get(id), ['waiting', 'pending', 'success'], `${id} in order`);
  const list = await until(async () => { const l = await delivered(d, wh.body.id); return l.length === 9 && l; },
    { msg: '9 delivered in the listing' });
  assert.deepEqual(new Set(list.map((x) => x.eventId)), new Set(recs.map((x) => x.headers['webhook-id'])));
  // the keys are on the slot's master, not on the seed
  const keys = await cl.cmd(owner.port, 'CLUSTER', 'COUNTKEYSINSLOT', String(await cl.slotOf('clu1')));
  assert.ok(keys > 0, 'deployment keys on its master');
});
