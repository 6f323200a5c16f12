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
import { startReceiver } from './lib/hooks.mjs';
import { pump, allDelivered, maxGap } from './lib/load.mjs';

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
  // a live master: an earlier test may have killed one that CLUSTER NODES still lists
  const alive = cl.alive();
  const other = (await cl.nodes()).find((x) => x.flags.includes('master') && x.id !== owner.id &&
    !x.flags.some((f) => f.startsWith('fail')) && alive.includes(x.port));
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
  // 9 status changes, and the facts follow-ups (flagged "facts": docs/facts.md) between them
  const isFollowUp = (x) => (JSON.parse(x.body).statusrelay.flags ?? []).includes('facts');
  await until(() => rx.records().filter((x) => !isFollowUp(x)).length >= 9, { msg: '9 deliveries', timeoutMs: 15000 });
  await new Promise((res) => setTimeout(res, 1000)); // a follow-up of the last change
  const recs = rx.records();
  for (const x of recs) new Webhook(wh.body.secret).verify(x.body, x.headers);
  const got = new Map();
  for (const x of recs.filter((r) => !isFollowUp(r))) {
    const b = JSON.parse(x.body);
    got.set(b.data.requestId, [...(got.get(b.data.requestId) ?? []), b.data.status]);
  }
  for (const id of ids) assert.deepEqual(got.get(id), ['waiting', 'pending', 'success'], `${id} in order`);
  const list = await until(async () => { const l = await delivered(d, wh.body.id); return l.length === rx.records().length && l; },
    { msg: 'every delivery in the listing' });
  assert.deepEqual(new Set(list.map((x) => x.eventId)), new Set(rx.records().map((x) => x.headers['webhook-id'])));
  // the keys are on the slot's master, not on the seed
  const keys = await cl.cmd(owner.port, 'CLUSTER', 'COUNTKEYSINSLOT', String(await cl.slotOf('clu1')));
  assert.ok(keys > 0, 'deployment keys on its master');
});

test('manual failover of the deployment master mid-load: every accepted event delivered', async (t) => {
  const { d, slot, owner } = await daemon(await prefixWithReplica('clu2'));
  const rx = await receiver();
  const wh = await d.post('/v1/webhooks', { url: rx.url('/f') });
  assert.equal(wh.status, 201, wh.text);
  const replica = await cl.replicaOf(owner.id);
  let failedOverAt = 0;
  const { ids, accepts } = await pump(d, KEY, 'fo', 60, async (i) => {
    if (i !== 20) return;
    failedOverAt = Date.now();
    assert.equal(await cl.cmd(replica, 'CLUSTER', 'FAILOVER'), 'OK');
  });
  const now = await cl.ownerOf(slot);
  assert.equal(now.port, replica, 'the replica serves the slot now');
  assert.ok(failedOverAt > 0);
  const n = await allDelivered(d, rx, ids);
  assert.equal(n, 180, '60 requests x 3 accepted observations = 180 events');
  const gap = maxGap(accepts);
  t.diagnostic(`failover: ${n} events delivered, longest time without an accepted event ${gap} ms`);
  assert.match(d.proc.log(), new RegExp(`msg="redis cluster map" masters=[^\\n]*127\\.0\\.0\\.1:${replica}\\b`), 'map re-read with the promoted replica');
  // the old master is a replica now and still reachable: nothing else to wait for
  assert.equal((await d.get('/readyz')).status, 200);
});

test('the deployment slot migrates to another master mid-run: work continues, nothing lost', async (t) => {
  const { d, slot, owner } = await daemon('clu3');
  const rx = await receiver();
  const wh = await d.post('/v1/webhooks', { url: rx.url('/m') });
  assert.equal(wh.status, 201, wh.text);
  let migration;
  const { ids, accepts } = await pump(d, KEY, 'mig', 60, async (i) => {
    if (i === 15) migration = cl.migrateSlot(slot, owner);
  });
  const { to, moved } = await migration;
  assert.ok(moved > 10, `keys moved: ${moved}`);
  assert.equal((await cl.ownerOf(slot)).id, to.id);
  assert.equal(await cl.cmd(owner.port, 'CLUSTER', 'COUNTKEYSINSLOT', String(slot)), 0, 'old master empty');
  // after the move: more events, all through the new master
  const after2 = await pump(d, KEY, 'mig2', 10);
  const n = await allDelivered(d, rx, [...ids, ...after2.ids]);
  assert.equal(n, 210);
  t.diagnostic(`migration: ${moved} keys moved, ${n} events delivered, longest time without an accepted event ${maxGap(accepts)} ms`);
  // the daemon saw the slot change hands (logged only when the map differs)
  assert.ok(d.proc.log().match(/msg="redis cluster map"/g).length >= 2, 'map re-read after MOVED');
  assert.equal((await d.get('/readyz')).status, 200);
});

test('kill -9 of the deployment master mid-load: the replica takes over, every accepted event delivered', async (t) => {
  const { d, slot, owner } = await daemon(await prefixWithReplica('clu4'));
  const rx = await receiver();
  const wh = await d.post('/v1/webhooks', { url: rx.url('/k') });
  assert.equal(wh.status, 201, wh.text);
  const replica = await cl.replicaOf(owner.id);
  let killedAt = 0;
  const { ids, accepts } = await pump(d, KEY, 'kill', 60, async (i) => {
    if (i !== 20) return;
    killedAt = Date.now();
    await cl.kill(owner.port);
  });
  assert.ok(killedAt > 0);
  const now = await cl.ownerOf(slot);
  assert.equal(now.port, replica, 'the replica was promoted');
  const n = await allDelivered(d, rx, ids);
  assert.equal(n, 180);
  const gap = maxGap(accepts);
  t.diagnostic(`kill -9: ${n} events delivered, longest time without an accepted event ${gap} ms (cluster-node-timeout 2000 ms)`);
  const log = d.proc.log();
  assert.match(log, new RegExp(`msg="redis cluster node disconnected" node=127\\.0\\.0\\.1:${owner.port}`));
  assert.match(log, new RegExp(`msg="redis cluster map" masters=[^\\n]*127\\.0\\.0\\.1:${replica}\\b`));
  // one line for the refused reconnects, not one per attempt
  assert.ok((log.match(/msg="redis cluster node connect failed"/g) ?? []).length <= 2, 'no reconnect flood');
  assert.equal((await d.get('/readyz')).status, 200);
});

/** A prefix whose slot's master has a replica now (an earlier test may have left a master
 * without one). */
async function prefixWithReplica(base) {
  for (let i = 0; i < 50; i++) {
    const owner = await cl.ownerOf(await cl.slotOf(`${base}${i}`));
    if (await cl.replicaOf(owner.id).catch(() => 0)) return `${base}${i}`;
  }
  throw new Error('no master with a replica');
}

test('a master that hangs (SIGSTOP) mid-load: dropped after the command timeout, replica promoted, nothing lost', async (t) => {
  const { d, slot, owner } = await daemon(await prefixWithReplica('clu5'));
  const rx = await receiver();
  const wh = await d.post('/v1/webhooks', { url: rx.url('/h') });
  assert.equal(wh.status, 201, wh.text);
  const replica = await cl.replicaOf(owner.id);
  try {
    const { ids, accepts } = await pump(d, KEY, 'hang', 40, async (i) => { if (i === 15) cl.pause(owner.port); });
    assert.equal((await cl.ownerOf(slot)).port, replica, 'the replica was promoted');
    const n = await allDelivered(d, rx, ids);
    assert.equal(n, 120);
    t.diagnostic(`hung master: ${n} events delivered, longest time without an accepted event ${maxGap(accepts)} ms (command timeout 5 s)`);
    assert.match(d.proc.log(), new RegExp(`msg="redis command timed out, reconnecting" node=127\\.0\\.0\\.1:${owner.port}`));
  } finally {
    cl.resume(owner.port);
  }
});
