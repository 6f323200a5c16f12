// cluster_partitions.test.mjs - a deployment with 3 partitions (STATUSRELAY_PARTITIONS=3) on a
// real 3-master Redis Cluster (one replica each) on loopback, with a prefix whose three
// partition slots sit on three different masters (docs/partitions.md): three daemons share
// the fan-outs (one partition each, statusrelay_fanout_partitions_held) and every key lives
// on its partition's master; kill -9 of a daemon mid-load (its partition taken over, nothing
// lost); a manual failover of one partition's master, then of the deployment slot's master,
// mid-load (nothing lost); a live migration of one partition's slot (ASK, TRYAGAIN, MOVED).
// Then 6 partitions on a cluster of 6 masters of its own, as redis-cli --cluster create split
// it: the spread tags put one partition on each master (issue 26), every event delivered once.
// Each load is a bounded stream of signed upstream observations (lib/load.mjs).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { startDaemon } from './lib/stack.mjs';
import { startCluster, partitionOf, partTag, plainTag } from './lib/cluster.mjs';
import { BIN, until } from './lib/proc.mjs';
import { startReceiver } from './lib/hooks.mjs';
import { pump, allDelivered, deliveries, maxGap } from './lib/load.mjs';

const KEY = 'cluster-part-key';
const N = 3;
let cl;
const cleanup = [];

before(async () => { cl = await startCluster({ masters: 3, replicas: 1 }); });
after(async () => {
  for (const f of cleanup.reverse()) { try { await f(); } catch {} }
  await cl?.stop();
});

/** count daemons with N partitions on prefix, seeded with a live master other than the
 * deployment slot's (the daemon finds the others from its map). */
async function daemons(prefix, count, deployment) {
  const alive = cl.alive();
  const seed = (await cl.nodes()).find((x) => x.flags.includes('master') && x.id !== deployment.id &&
    !x.flags.some((f) => f.startsWith('fail')) && alive.includes(x.port));
  const out = [];
  for (let i = 0; i < count; i++) {
    const d = await startDaemon({
      redisUrl: cl.url(seed.port), apiKey: KEY, name: `clp-${prefix}-${i}`,
      env: {
        STATUSRELAY_REDIS_PREFIX: prefix, STATUSRELAY_PARTITIONS: String(N),
        STATUSRELAY_RETRY_SCHEDULE: '0s,200ms,500ms,1s,2s', STATUSRELAY_DELIVERY_TIMEOUT: '2s',
        STATUSRELAY_CONNECT_TIMEOUT: '1s', STATUSRELAY_DELIVERY_LEASE: '3s',
      },
    });
    cleanup.push(() => d.stop());
    out.push(d);
  }
  return out;
}

/** A receiver; delayMs: each answer waits, so attempts are in flight when a fault hits. */
async function receiver(delayMs = 0) {
  const rx = await startReceiver(delayMs ? { delayMs } : {});
  cleanup.push(() => rx.stop());
  return rx;
}

const instanceOf = (d) => /msg="statusrelay started" [^\n]*instance=([0-9a-f]+)/.exec(d.proc.log())[1];

/** One gauge of d's /metrics. */
async function gauge(d, name) {
  const r = await d.get('/metrics');
  assert.equal(r.status, 200);
  const m = new RegExp(`\\n${name} (-?\\d+)\\n`).exec(r.text);
  return m ? Number(m[1]) : NaN;
}

/** Each daemon runs the fan-out of exactly one partition (its gauges say so). */
async function spreadOneEach(ds) {
  await until(async () => {
    for (const d of ds)
      if (await gauge(d, 'statusrelay_partitions') !== N || await gauge(d, 'statusrelay_fanout_partitions_held') !== 1) return false;
    return true;
  }, { msg: 'statusrelay_fanout_partitions_held 1 on each daemon', timeoutMs: 20000, stepMs: 100 });
}

/** The instance holding partition k's fan-out lease (read on its master). */
const holderOf = (prefix, owners, k) => cl.cmd(owners[k].port, 'GET', `${partTag(prefix, k, N)}:fanout`);

/** The delivered entries of an endpoint's listing (every partition, merged). */
async function listed(d, whId) {
  const out = [];
  let cursor = '';
  for (let i = 0; i < 100; i++) {
    const r = await d.get(`/v1/webhooks/${whId}/deliveries?state=delivered&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    assert.equal(r.status, 200, r.text);
    out.push(...r.body.deliveries);
    if (!r.body.cursor) break;
    cursor = r.body.cursor;
  }
  return out;
}

/** Per request, the first reception of each event came in order. */
function assertOrder(got, ids, what) {
  for (const id of ids)
    assert.deepEqual(got.order.get(id), ['waiting', 'pending', 'success'], `${id}: ${what} in order`);
}

/** GET /v1/partitions says partition k is served by masters[k] and the deployment tag by
 * dep (the daemon's routing, so after a failover or a move the new master). */
async function served(d, prefix, slots, masters, dep) {
  const r = await d.get('/v1/partitions');
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.partitions, N);
  assert.equal(r.body.cluster, true);
  assert.deepEqual(r.body.items, slots.map((slot, k) => ({ partition: k, tag: partTag(prefix, k, N), slot, node: `127.0.0.1:${masters[k]}` })));
  assert.deepEqual(r.body.deployment, { tag: `{${prefix}}`, slot: await cl.slotOf(`{${prefix}}`), node: `127.0.0.1:${dep}` });
  return r.body;
}

const quiet = (d) => assert.doesNotMatch(d.proc.log(), /level=error|CROSSSLOT|non local key/);

test('three daemons, 3 partitions on three masters: keys on their own master, one fan-out each, every webhook once in order', async (t) => {
  const { prefix, owners, slots, deployment } = await cl.spreadPrefix('cpa', N);
  const ds = await daemons(prefix, 3, deployment);
  await spreadOneEach(ds);
  const holders = await Promise.all([0, 1, 2].map((k) => holderOf(prefix, owners, k)));
  assert.deepEqual(new Set(holders), new Set(ds.map(instanceOf)), 'the three leases held by three daemons');
  // where the data lives, as an operator sees it (REST and CLI)
  await served(ds[0], prefix, slots, owners.map((o) => o.port), deployment.port);
  const cli = spawnSync(BIN, ['partitions', '--admin-url', ds[0].url], { encoding: 'utf8' });
  assert.equal(cli.status, 0, cli.stderr);
  const rows = cli.stdout.trim().split('\n').map((l) => l.split(/\s+/));
  assert.deepEqual(rows[0], ['PARTITION', 'TAG', 'SLOT', 'NODE']);
  for (let k = 0; k < N; k++) assert.deepEqual(rows[1 + k], [String(k), partTag(prefix, k, N), String(slots[k]), `127.0.0.1:${owners[k].port}`]);
  assert.deepEqual(rows[1 + N], ['deployment', `{${prefix}}`, String(await cl.slotOf(`{${prefix}}`)), `127.0.0.1:${deployment.port}`]);
  const rx = await receiver();
  const wa = await ds[0].post('/v1/webhooks', { url: rx.url('/a') });
  assert.equal(wa.status, 201, wa.text);
  const wb = await ds[1].post('/v1/webhooks', { url: rx.url('/b') });
  assert.equal(wb.status, 201, wb.text);
  // a steady load through all three daemons
  const t0 = Date.now();
  const { ids } = await pump(ds, KEY, 'cpa', 45);
  const n = await allDelivered(ds[2], rx, ids);
  assert.equal(n, 135);
  for (const [wh, path] of [[wa, '/a'], [wb, '/b']]) {
    const l = await until(async () => { const x = await listed(ds[2], wh.body.id); return x.length === 135 && x; },
      { msg: `135 delivered listed for ${path}`, timeoutMs: 15000 });
    const got = deliveries(rx, path);
    assert.equal(got.byId.size, 135, `${path}: every event`);
    assert.equal(got.duplicates, 0, `${path}: each once`);
    assertOrder(got, ids, path);
    assert.deepEqual(new Set(l.map((x) => x.eventId)), new Set(got.byId.keys()), `${path}: the listing is what was received`);
  }
  t.diagnostic(`3 daemons: 270 deliveries in ${Date.now() - t0} ms, each once, in order per request per endpoint`);
  // every key on the master of its tag's slot: partition k's on owners[k], the deployment's
  // on the deployment slot's master
  const per = [0, 1, 2].map((k) => ids.filter((id) => partitionOf(id, N) === k).length);
  const masters = [...new Map(owners.map((o) => [o.id, o])).values()];
  for (const m of masters) {
    const keys = await cl.keysOn(m.port, `{${prefix}*`);
    for (const key of keys) {
      const tag = /^\{([^}]*)\}/.exec(key)[1];
      if (tag === prefix) { assert.equal(m.id, deployment.id, `${key} on the deployment's master`); continue; }
      const k = [0, 1, 2].findIndex((j) => partTag(prefix, j, N) === `{${tag}}`);
      assert.ok(k >= 0, `${key}: a partition's tag`);
      assert.equal(m.id, owners[k].id, `${key} on partition ${k}'s master`);
    }
    for (let k = 0; k < N; k++) {
      if (owners[k].id !== m.id) continue;
      const reqs = keys.filter((x) => x.startsWith(`${partTag(prefix, k, N)}:req:`)).length;
      assert.equal(reqs, per[k], `partition ${k}: its ${per[k]} requests on its master ${m.port}`);
    }
  }
  for (const d of ds) quiet(d);
});

test('kill -9 of one of three daemons mid-load: its partition taken over, every accepted event delivered', async (t) => {
  const { prefix, owners, deployment } = await cl.spreadPrefix('cpk', N);
  const ds = await daemons(prefix, 3, deployment);
  await spreadOneEach(ds);
  const rx = await receiver(40);
  const wh = await ds[0].post('/v1/webhooks', { url: rx.url('/k') });
  assert.equal(wh.status, 201, wh.text);
  const [victim, ...alive] = [ds[2], ds[0], ds[1]];
  const vid = instanceOf(victim);
  const k = (await Promise.all([0, 1, 2].map((j) => holderOf(prefix, owners, j)))).indexOf(vid);
  assert.ok(k >= 0, 'the victim holds a partition');
  let killedAt = 0, takeover;
  const { ids, accepts } = await pump(alive, KEY, 'cpk', 60, async (i) => {
    if (i !== 20) return;
    await victim.stop('SIGKILL');
    killedAt = Date.now();
    takeover = until(async () => { const h = await holderOf(prefix, owners, k); return h !== null && h !== vid && Date.now(); },
      { msg: `partition ${k} taken over`, timeoutMs: 15000, stepMs: 20 });
    takeover.catch(() => {}); // awaited below
  });
  const took = (await takeover) - killedAt;
  const n = await allDelivered(alive[0], rx, ids);
  assert.equal(n, 180, '60 requests x 3 accepted observations');
  const got = deliveries(rx, '/k');
  assert.equal(got.byId.size, 180);
  assertOrder(got, ids, 'first receptions');
  t.diagnostic(`kill -9 of a daemon: partition ${k} taken over in ${took} ms; ${n} events delivered, ${got.duplicates} received twice (at-least-once after a kill), longest time without an accepted event ${maxGap(accepts)} ms`);
  assert.ok(took < 6000, `takeover in ${took} ms`);
  // the two left run the three fan-outs between them
  await until(async () => (await gauge(alive[0], 'statusrelay_fanout_partitions_held')) +
    (await gauge(alive[1], 'statusrelay_fanout_partitions_held')) === N, { msg: 'three partitions held by the two left' });
  for (const d of alive) quiet(d);
});

test('manual failover of one partition\'s master, then of the deployment slot\'s master, mid-load: every accepted event delivered', async (t) => {
  const { prefix, owners, slots, deployment } = await cl.spreadPrefix('cpf', N, { withReplicas: true });
  const k = owners.findIndex((o) => o.id !== deployment.id);
  const dslot = await cl.slotOf(`{${prefix}}`);
  const [d] = await daemons(prefix, 1, deployment);
  const rx = await receiver(40);
  const wh = await d.post('/v1/webhooks', { url: rx.url('/f') });
  assert.equal(wh.status, 201, wh.text);
  const replica = await cl.replicaOf(owners[k].id);
  const dreplica = await cl.replicaOf(deployment.id);
  const { ids, accepts } = await pump(d, KEY, 'cpf', 60, async (i) => {
    if (i === 15) assert.equal(await cl.cmd(replica, 'CLUSTER', 'FAILOVER'), 'OK');
    if (i === 40) {
      assert.equal((await cl.ownerOf(slots[k])).port, replica, `partition ${k}'s replica serves its slot now`);
      assert.equal(await cl.cmd(dreplica, 'CLUSTER', 'FAILOVER'), 'OK');
    }
    if (i === 50) // the last ten requests go through the promoted replica
      assert.equal((await cl.ownerOf(dslot)).port, dreplica, 'the deployment slot\'s replica serves it now');
  });
  const n = await allDelivered(d, rx, ids);
  assert.equal(n, 180);
  const got = deliveries(rx, '/f');
  assertOrder(got, ids, 'first receptions');
  // accepts[3i] is request i's first observation
  const gapPart = maxGap(accepts.slice(3 * 15 - 1, 3 * 40)), gapDep = maxGap(accepts.slice(3 * 40 - 1));
  t.diagnostic(`failover: partition ${k}'s master: longest time without an accepted event ${gapPart} ms; the deployment slot's master: ${gapDep} ms; ${n} events delivered, ${got.duplicates} received twice`);
  const log = d.proc.log();
  for (const p of [replica, dreplica])
    assert.match(log, new RegExp(`msg="redis cluster map" masters=[^\\n]*127\\.0\\.0\\.1:${p}\\b`), `map re-read with ${p} promoted`);
  // GET /v1/partitions follows: the promoted replicas serve the two slots now
  const masters = owners.map((o) => o.port);
  masters[k] = replica;
  for (let j = 0; j < N; j++) if (owners[j].id === deployment.id) masters[j] = dreplica;
  await served(d, prefix, slots, masters, dreplica);
  assert.equal((await d.get('/readyz')).status, 200);
});

test('a partition\'s slot migrates to another master mid-run: work continues, nothing lost', async (t) => {
  const { prefix, owners, slots, deployment } = await cl.spreadPrefix('cpm', N);
  const k = owners.findIndex((o) => o.id !== deployment.id);
  const [d] = await daemons(prefix, 1, deployment);
  const rx = await receiver(40);
  const wh = await d.post('/v1/webhooks', { url: rx.url('/m') });
  assert.equal(wh.status, 201, wh.text);
  let migration;
  const { ids, accepts } = await pump(d, KEY, 'cpm', 60, async (i) => {
    if (i === 15) migration = cl.migrateSlot(slots[k], owners[k]);
  });
  const { to, moved } = await migration;
  assert.ok(moved > 10, `keys moved: ${moved}`);
  assert.equal((await cl.ownerOf(slots[k])).id, to.id);
  assert.equal(await cl.cmd(owners[k].port, 'CLUSTER', 'COUNTKEYSINSLOT', String(slots[k])), 0, 'old master empty');
  const after2 = await pump(d, KEY, 'cpm2', 10); // after the move: through the new master
  const n = await allDelivered(d, rx, [...ids, ...after2.ids]);
  assert.equal(n, 210);
  const got = deliveries(rx, '/m');
  assertOrder(got, [...ids, ...after2.ids], 'first receptions');
  const masters = owners.map((o) => o.port);
  masters[k] = to.port;
  await served(d, prefix, slots, masters, deployment.port);
  t.diagnostic(`migration of partition ${k}'s slot: ${moved} keys moved, ${n} events delivered, ${got.duplicates} received twice, longest time without an accepted event ${maxGap(accepts)} ms`);
  assert.ok(d.proc.log().match(/msg="redis cluster map"/g).length >= 2, 'map re-read after MOVED');
  assert.equal((await d.get('/readyz')).status, 200);
});

test('6 partitions on a 6-master cluster split by redis-cli: one partition per master, every event delivered once', async (t) => {
  // A cluster of its own, slots as redis-cli --cluster create splits them, no slot moved by
  // hand and no prefix searched for: the spread tags put partition k in the k-th sixth of the
  // slot space (store/keys.c key_spread_tag). The plain tags {c6:p<k>} would use 5 masters.
  const M = 6, prefix = 'c6';
  const c6 = await startCluster({ masters: M, replicas: 0 });
  cleanup.push(() => c6.stop());
  const tags = Array.from({ length: M }, (_, k) => partTag(prefix, k, M));
  const slots = await Promise.all(tags.map((tag) => c6.slotOf(tag)));
  const owners = [];
  for (const slot of slots) owners.push(await c6.ownerOf(slot));
  assert.equal(new Set(owners.map((o) => o.id)).size, M, `six partitions on six masters: ${tags.join(' ')}`);
  const plain = new Set();
  for (let k = 0; k < M; k++) plain.add((await c6.ownerOf(await c6.slotOf(plainTag(prefix, k, M)))).id);
  t.diagnostic(`plain tags {${prefix}:p<k>} would use ${plain.size} of ${M} masters; spread tags: slots ${slots.join(', ')}`);
  assert.ok(plain.size < M, 'the plain tags do not spread (issue 26)');
  const ds = [];
  for (let i = 0; i < 2; i++) {
    const d = await startDaemon({
      redisUrl: c6.url(c6.ports[i]), apiKey: KEY, name: `clp6-${i}`,
      env: { STATUSRELAY_REDIS_PREFIX: prefix, STATUSRELAY_PARTITIONS: String(M), STATUSRELAY_RETRY_SCHEDULE: '0s,200ms,500ms,1s,2s' },
    });
    cleanup.push(() => d.stop());
    ds.push(d);
  }
  // where the data lives, as the daemon routes it
  const where = await ds[0].get('/v1/partitions');
  assert.equal(where.status, 200, where.text);
  assert.equal(where.body.tags, 'spread');
  assert.deepEqual(where.body.items, tags.map((tag, k) => ({ partition: k, tag, slot: slots[k], node: `127.0.0.1:${owners[k].port}` })));
  const cli = spawnSync(BIN, ['partitions', '--admin-url', ds[0].url], { encoding: 'utf8' });
  assert.equal(cli.status, 0, cli.stderr);
  const lines = cli.stdout.trim().split('\n');
  assert.deepEqual(lines.slice(1, 1 + M).map((l) => l.split(/\s+/).slice(1, 3)), tags.map((tag, k) => [tag, String(slots[k])]));
  assert.equal(lines.at(-1), 'tags: spread');
  const rx = await receiver();
  const wh = await ds[0].post('/v1/webhooks', { url: rx.url('/six') });
  assert.equal(wh.status, 201, wh.text);
  const { ids } = await pump(ds, KEY, 'c6', 60);
  const n = await allDelivered(ds[1], rx, ids);
  assert.equal(n, 180);
  const got = deliveries(rx, '/six');
  assert.equal(got.byId.size, 180, 'every event');
  assert.equal(got.duplicates, 0, 'each once');
  assertOrder(got, ids, '/six');
  // every master holds the keys of exactly one partition (and one of them the deployment's)
  const dep = await c6.ownerOf(await c6.slotOf(`{${prefix}}`));
  const per = Array.from({ length: M }, (_, k) => ids.filter((id) => partitionOf(id, M) === k).length);
  const counts = [];
  for (let k = 0; k < M; k++) {
    const keys = await c6.keysOn(owners[k].port, `{${prefix}*`);
    const held = new Set(keys.map((key) => /^\{([^}]*)\}/.exec(key)[1]).filter((x) => x !== prefix));
    assert.deepEqual([...held], [tags[k].slice(1, -1)], `master ${owners[k].port} holds partition ${k} only`);
    if (owners[k].id !== dep.id) assert.ok(!keys.some((key) => key.startsWith(`{${prefix}}:`)), 'deployment keys on one master');
    assert.equal(keys.filter((x) => x.startsWith(`${tags[k]}:req:`)).length, per[k], `partition ${k}: its ${per[k]} requests`);
    counts.push(Number(await c6.cmd(owners[k].port, 'CLUSTER', 'COUNTKEYSINSLOT', String(slots[k]))));
  }
  t.diagnostic(`6 masters: keys per partition's slot ${counts.join(', ')}; requests per partition ${per.join(', ')}; 180 events delivered once each`);
  for (const d of ds) quiet(d);
});
