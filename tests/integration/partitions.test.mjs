// partitions.test.mjs - STATUSRELAY_PARTITIONS (docs/partitions.md), first step: the count is
// fixed for a deployment. A process whose count differs from what the deployment's Redis
// recorded ({P}:config), or that asks for more than one partition on the data of a
// 1-partition deployment, refuses to start (exit 1, one error line); a 1-partition deployment
// (the default: today's layout) writes no record at all. On a single Redis and on a real
// 3-master Redis Cluster (the record lives on the master of the deployment slot).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BIN, startProcess } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startCluster } from './lib/cluster.mjs';
import { rid } from './lib/hooks.mjs';
import { partitionOf, partTag, ridsOverPartitions, ingestLifecycles } from './lib/partitions.mjs';

let redis;
const cleanup = [];

before(async () => { redis = await startRedis(); });
after(async () => {
  for (const f of cleanup.reverse()) { try { await f(); } catch {} }
  await redis?.stop();
});

async function daemon(redisUrl, prefix, partitions, opts = {}) {
  const env = { STATUSRELAY_REDIS_PREFIX: prefix };
  if (partitions !== undefined) env.STATUSRELAY_PARTITIONS = String(partitions);
  const d = await startDaemon({ redisUrl, env, name: `part-${prefix}-${partitions}-${Date.now()}`, ...opts });
  cleanup.push(() => d.stop());
  return d;
}

/** A daemon that must refuse: it exits by itself with 1 and says why in one line. */
async function refused(redisUrl, prefix, partitions, recorded) {
  const d = await daemon(redisUrl, prefix, partitions, { waitReady: false });
  const { code } = await Promise.race([
    d.proc.exited,
    new Promise((_, rej) => setTimeout(() => rej(new Error(`still running: ${d.proc.log().slice(-1500)}`)), 15000)),
  ]);
  assert.equal(code, 1, d.proc.log());
  const log = d.proc.log();
  assert.match(log, new RegExp(`level=error thread=core msg="refusing redis: partition count differs from the deployment's" partitions=${partitions} recorded=${recorded}\\n`));
  assert.match(log, /msg="refusing to run" reason="STATUSRELAY_PARTITIONS=\d+ but this deployment's Redis has \d+ partition/);
  assert.doesNotMatch(log, /msg="redis ready"/, 'never ready: nothing ran against the data');
}

test('one partition (the default) writes no record; more on its data are refused', async () => {
  const d = await daemon(redis.url, 'pa');
  const id = rid('pa');
  const r = await d.post('/v1/requests', { requestId: id });
  assert.equal(r.status, 201, r.text);
  assert.equal(await redis.cmd('EXISTS', '{pa}:config'), 0, 'no record for a 1-partition deployment');
  const where = await d.get('/v1/partitions');
  assert.equal(where.status, 200, where.text);
  assert.deepEqual(where.body, { partitions: 1, cluster: false, tags: 'plain', deployment: { tag: '{pa}', slot: null, node: `127.0.0.1:${redis.port}` },
    items: [{ partition: 0, tag: '{pa}', slot: null, node: `127.0.0.1:${redis.port}` }] });
  assert.equal(await redis.cmd('EXISTS', `{pa}:req:${id}`), 1, 'today\'s key names');
  await refused(redis.url, 'pa', 3, 1);
  assert.equal(await redis.cmd('EXISTS', '{pa}:config'), 0, 'a refused process writes nothing');
  // explicit 1 on the same data: fine, and the first daemon never noticed the refused one
  await daemon(redis.url, 'pa', 1);
  assert.equal((await d.get(`/v1/requests/${id}`)).status, 200);
});

test('a deployment started with 3 partitions records 3; 1 and 2 are refused, 3 restarts', async () => {
  const d = await daemon(redis.url, 'pb', 3);
  assert.equal(await redis.cmd('HGET', '{pb}:config', 'partitions'), '3/spread', 'a new deployment: spread tags');
  await d.stop();
  await refused(redis.url, 'pb', 1, 3);
  await refused(redis.url, 'pb', 2, 3);
  const again = await daemon(redis.url, 'pb', 3);
  assert.equal((await again.get('/readyz')).status, 200);
  assert.equal(await redis.cmd('HGET', '{pb}:config', 'partitions'), '3/spread');
});

test('out-of-range counts are refused at start-up naming the setting', async () => {
  for (const [v, why] of [['0', /STATUSRELAY_PARTITIONS/], ['65', /invalid setting STATUSRELAY_PARTITIONS: at most 64/], ['x', /STATUSRELAY_PARTITIONS/]]) {
    const p = startProcess(`part-bad-${v}`, BIN, ['serve'], {
      env: { STATUSRELAY_REDIS_URL: redis.url, STATUSRELAY_PARTITIONS: v, STATUSRELAY_HTTP_LISTEN: '127.0.0.1:0', STATUSRELAY_WS_LISTEN: '127.0.0.1:0' },
    });
    const { code } = await p.exited;
    assert.notEqual(code, 0);
    assert.match(p.log(), why);
  }
});

test('on a 3-master Redis Cluster the record lives on the deployment slot\'s master', async () => {
  const cl = await startCluster({ masters: 3, replicas: 0 });
  cleanup.push(() => cl.stop());
  const slot = await cl.slotOf('{pc}:config');
  const owner = await cl.ownerOf(slot);
  const other = (await cl.nodes()).find((x) => x.flags.includes('master') && x.id !== owner.id);
  const d = await daemon(cl.url(other.port), 'pc', 3);
  assert.equal(await cl.cmd(owner.port, 'HGET', '{pc}:config', 'partitions'), '3/spread');
  await d.stop();
  await refused(cl.url(other.port), 'pc', 1, 3);
  // a 1-partition deployment on the cluster: no record, and 3 refused on its data
  const one = await daemon(cl.url(other.port), 'pd');
  assert.equal((await one.post('/v1/requests', { requestId: rid('pd') })).status, 201);
  await refused(cl.url(other.port), 'pd', 3, 1);
  assert.equal(await cl.cmd((await cl.ownerOf(await cl.slotOf('pd'))).port, 'EXISTS', '{pd}:config'), 0);
});

/** Sim requests until every one of n partitions has at least per of them. */
async function idsOverPartitions(sim, n, per) {
  const by = Array.from({ length: n }, () => []);
  for (let i = 0; i < 200 && by.some((x) => x.length < per); i++) {
    const r = await sim.control('/requests', { path: ['waiting', 'pending', 'success'], stepMs: 0, autoHashes: true });
    const k = partitionOf(r.id, n);
    if (by[k].length < per) by[k].push(r.id);
  }
  assert.ok(by.every((x) => x.length === per), 'ids in every partition');
  return by.flat();
}

for (const mode of ['websocket', 'polls only']) {
  test(`3 partitions on one Redis (${mode}): requests tracked, followed and read in their own partition`, async () => {
    const { startSim } = await import('./lib/sim.mjs');
    const { until } = await import('./lib/proc.mjs');
    const sim = await startSim({ apiKey: 'part-key', seed: 5, rateLimit: 0 });
    cleanup.push(() => sim.stop());
    const prefix = mode === 'websocket' ? 'pw' : 'pp';
    const d = await daemon(redis.url, prefix, 3, {
      apiUrl: sim.url, wsUrl: mode === 'websocket' ? sim.wsUrl : 'ws://127.0.0.1:9/', apiKey: 'part-key',
    });
    const ids = await idsOverPartitions(sim, 3, 2);
    const t = await d.post('/v1/requests', { requestIds: ids });
    assert.equal(t.status, 201, t.text);
    assert.equal(t.body.tracked, 6, t.text);
    for (const step of ['waiting', 'pending', 'success']) {
      if (step !== 'waiting') for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
      for (const id of ids)
        await until(async () => (await d.get(`/v1/requests/${id}`)).body?.status === step,
          { msg: `${id} reaches ${step} (${mode})`, timeoutMs: 20000 });
    }
    for (const id of ids) {
      const k = partitionOf(id, 3);
      assert.equal(await redis.cmd('EXISTS', `${partTag(prefix, k, 3)}:req:${id}`), 1, `${id} in partition ${k}`);
      assert.equal(await redis.cmd('EXISTS', `{${prefix}}:req:${id}`), 0, 'not under the deployment tag');
      const ev = await d.get(`/v1/events?requestId=${id}`);
      assert.equal(ev.status, 200, ev.text);
      // the status changes; besides them only facts follow-ups (one per change at most: the
      // facts read by id when first seen and when settled, docs/facts.md)
      const evs = ev.body.events;
      assert.deepEqual(evs.filter((e) => e.previousStatus !== e.status).map((e) => e.status),
        ['waiting', 'pending', 'success'], `${id} timeline`);
      assert.ok(evs.filter((e) => e.previousStatus === e.status).every((e) => e.source === 'requests'), `${id} follow-ups`);
    }
    for (let k = 0; k < 3; k++) {
      const xlen = await redis.cmd('XLEN', `${partTag(prefix, k, 3)}:events`);
      assert.ok(xlen >= 6 && xlen <= 12, `partition ${k}: 2 requests x 3 status changes (+ facts follow-ups): ${xlen}`);
      assert.equal(await redis.cmd('ZCARD', `${partTag(prefix, k, 3)}:ct`), 2);
    }
    // (the fan-out, not partitioned yet, creates its consumer group's empty stream there)
    assert.equal(await redis.cmd('XLEN', `{${prefix}}:events`), 0, 'no event under the deployment tag');
    assert.equal(await redis.cmd('EXISTS', `{${prefix}}:all`), 0);
    if (mode === 'websocket') // the holder subscribed the watch sets of all three partitions
      await until(async () => /\nstatusrelay_upstream_ws_subscriptions 6\n/.test((await d.get('/metrics')).text),
        { msg: '6 upstream subscriptions' });
    // gauges summed over the partitions
    await until(async () => /\nstatusrelay_requests_by_status\{status="success"\} 6\n/.test((await d.get('/metrics')).text),
      { msg: '6 successes in /metrics', timeoutMs: 5000 });
    assert.doesNotMatch(d.proc.log(), /level=error/);
  });
}

/** Every id's three events reached rx, in order per request. */
async function allInOrder(rx, ids, until) {
  await until(() => rx.records().length >= 3 * ids.length, { msg: `${3 * ids.length} deliveries`, timeoutMs: 30000 });
  const got = new Map();
  for (const x of rx.records()) {
    const b = JSON.parse(x.body);
    got.set(b.data.requestId, [...(got.get(b.data.requestId) ?? []), b.data.status]);
  }
  for (const id of ids) assert.deepEqual(got.get(id), ['waiting', 'pending', 'success'], `${id} delivered once each, in order`);
}

const instanceOf = (d) => /msg="statusrelay started" [^\n]*instance=([0-9a-f]+)/.exec(d.proc.log())[1];

test('3 partitions, one daemon: webhooks fanned out from every partition, in order per request', async () => {
  const { startReceiver } = await import('./lib/hooks.mjs');
  const { until } = await import('./lib/proc.mjs');
  const rx = await startReceiver();
  cleanup.push(() => rx.stop());
  const d = await daemon(redis.url, 'pf', 3, { apiKey: 'pf-key', env: { STATUSRELAY_REDIS_PREFIX: 'pf', STATUSRELAY_PARTITIONS: '3', STATUSRELAY_RETRY_SCHEDULE: '0s,200ms,500ms' } });
  const wh = await d.post('/v1/webhooks', { url: rx.url('/pf') });
  assert.equal(wh.status, 201, wh.text);
  const ids = ridsOverPartitions('pf', 3);
  await ingestLifecycles(d, 'pf-key', ids);
  await allInOrder(rx, ids, until);
  const me = instanceOf(d);
  for (let k = 0; k < 3; k++) {
    assert.equal(await redis.cmd('GET', `${partTag('pf', k, 3)}:fanout`), me, `partition ${k}'s fan-out lease held by the only daemon`);
    assert.equal(await redis.cmd('XLEN', `${partTag('pf', k, 3)}:events`), 9);
  }
  assert.equal(await redis.cmd('EXISTS', '{pf}:fanout'), 0, 'no deployment-wide fan-out lease');
  const where = await d.get('/v1/partitions');
  assert.deepEqual(where.body.items.map((x) => [x.tag, x.slot, x.node]), [0, 1, 2].map((k) => [partTag('pf', k, 3), null, `127.0.0.1:${redis.port}`]));
  await until(async () => /\nstatusrelay_fanout_partitions_held 3\n/.test((await d.get('/metrics')).text),
    { msg: 'the only daemon runs the three fan-outs (/metrics)' });
  assert.doesNotMatch(d.proc.log(), /level=error/);
});

/** A deployment made before the spread tags (docs/partitions.md "Tag schemes"): its record is
 * "3", what every earlier version wrote. With STATUSRELAY_OLD_BIN (a build of an earlier
 * version, e.g. bin-old/statusrelay) that version makes it for real - an endpoint and three
 * delivered lifecycles - and is then shown to refuse a deployment recorded with spread tags;
 * without it the record is written as that version writes it. */
test('a deployment recorded before the spread tags keeps its plain tags {P:p<k>}; an older version refuses a spread one', async (t) => {
  const { startReceiver } = await import('./lib/hooks.mjs');
  const { until } = await import('./lib/proc.mjs');
  const old = process.env.STATUSRELAY_OLD_BIN;
  t.diagnostic(old ? `written first by ${old}` : 'STATUSRELAY_OLD_BIN unset: the old record written by hand');
  const rx = await startReceiver();
  cleanup.push(() => rx.stop());
  const opts = { apiKey: 'po-key', env: { STATUSRELAY_REDIS_PREFIX: 'po', STATUSRELAY_PARTITIONS: '3', STATUSRELAY_RETRY_SCHEDULE: '0s,200ms,500ms' } };
  const early = old ? ridsOverPartitions('po-old', 1) : [];
  if (old) {
    const o = await daemon(redis.url, 'po', 3, { ...opts, bin: old });
    assert.equal((await o.post('/v1/webhooks', { url: rx.url('/po') })).status, 201);
    await ingestLifecycles(o, 'po-key', early);
    await allInOrder(rx, early, until);
    await o.stop();
  } else {
    await redis.cmd('HSET', '{po}:config', 'partitions', '3');
  }
  assert.equal(await redis.cmd('HGET', '{po}:config', 'partitions'), '3', 'the record of an earlier version');
  const d = await daemon(redis.url, 'po', 3, opts);
  if (!old) assert.equal((await d.post('/v1/webhooks', { url: rx.url('/po') })).status, 201);
  const where = await d.get('/v1/partitions');
  assert.equal(where.body.tags, 'plain');
  assert.deepEqual(where.body.items.map((x) => x.tag), ['{po:p0}', '{po:p1}', '{po:p2}']);
  const late = ridsOverPartitions('po-new', 1);
  await ingestLifecycles(d, 'po-key', late);
  await allInOrder(rx, [...early, ...late], until);
  for (const id of [...early, ...late]) {
    assert.equal(await redis.cmd('EXISTS', `{po:p${partitionOf(id, 3)}}:req:${id}`), 1, `${id} under the plain tag`);
    const r = await d.get(`/v1/requests/${id}`);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.status, 'success');
  }
  for (let k = 0; k < 3; k++) assert.equal(await redis.cmd('XLEN', `{po:p${k}}:events`), 3 * (1 + (old ? 1 : 0)));
  const ev = await d.get('/v1/events?limit=100');
  assert.equal(ev.status, 200, ev.text);
  assert.equal(ev.body.events.length, 9 * (1 + (old ? 1 : 0)), 'the old events and the new in one listing');
  assert.deepEqual(await redis.cmd('KEYS', '{po:p*.*'), [], 'no key under a spread tag');
  assert.equal(await redis.cmd('HGET', '{po}:config', 'partitions'), '3', 'the record unchanged');
  assert.doesNotMatch(d.proc.log(), /level=error/);
  if (old) { // a spread deployment is no count to the older version: it refuses, writes nothing
    const n = await daemon(redis.url, 'pn', 3);
    await n.stop();
    const o = await daemon(redis.url, 'pn', 3, { bin: old, waitReady: false });
    const { code } = await o.proc.exited;
    assert.equal(code, 1, o.proc.log());
    assert.match(o.proc.log(), /msg="refusing redis: partition count differs from the deployment's" partitions=3 recorded=3\/spread\n/);
    assert.equal(await redis.cmd('HGET', '{pn}:config', 'partitions'), '3/spread');
  }
});

test('3 partitions, three daemons: the fan-out leases spread, a killed daemon\'s partition is taken over', async () => {
  const { startReceiver } = await import('./lib/hooks.mjs');
  const { until } = await import('./lib/proc.mjs');
  const rx = await startReceiver();
  cleanup.push(() => rx.stop());
  const env = { STATUSRELAY_REDIS_PREFIX: 'ps', STATUSRELAY_PARTITIONS: '3', STATUSRELAY_RETRY_SCHEDULE: '0s,200ms,500ms', STATUSRELAY_DELIVERY_LEASE: '3s', STATUSRELAY_DELIVERY_TIMEOUT: '2s', STATUSRELAY_CONNECT_TIMEOUT: '1s' };
  const ds = [];
  for (let i = 0; i < 3; i++) ds.push(await daemon(redis.url, 'ps', 3, { apiKey: 'ps-key', env }));
  const holders = async () => Promise.all([0, 1, 2].map((k) => redis.cmd('GET', `${partTag('ps', k, 3)}:fanout`)));
  const spread = await until(async () => { const h = await holders(); return new Set(h).size === 3 && !h.includes(null) && h; },
    { msg: 'each daemon holds one partition', timeoutMs: 15000 });
  assert.deepEqual(new Set(spread), new Set(ds.map(instanceOf)));
  const wh = await ds[0].post('/v1/webhooks', { url: rx.url('/ps') });
  assert.equal(wh.status, 201, wh.text);
  const first = ridsOverPartitions('psa', 2);
  await ingestLifecycles(ds[1], 'ps-key', first);
  await allInOrder(rx, first, until);
  // kill -9 the holder of partition 0: the other two take it over
  const victim = ds.find((x) => instanceOf(x) === spread[0]);
  await victim.stop('SIGKILL');
  const t0 = Date.now();
  const alive = ds.filter((x) => x !== victim);
  await until(async () => { const h = await holders(); return h.every((x) => x !== null && x !== spread[0]); },
    { msg: 'partition 0 taken over', timeoutMs: 15000 });
  const took = Date.now() - t0;
  const second = ridsOverPartitions('psb', 2);
  await ingestLifecycles(alive[0], 'ps-key', second);
  await allInOrder(rx, [...first, ...second], until);
  console.log(`# partitions: a killed daemon's fan-out partition taken over in ${took} ms`);
  assert.ok(took < 6000, `takeover in ${took} ms`);
  for (const x of alive) assert.doesNotMatch(x.proc.log(), /level=error/);
});

test('3 partitions: the retention sweep runs in every partition (event age, a deleted endpoint\'s deliveries, idle requests)', async () => {
  const { startReceiver } = await import('./lib/hooks.mjs');
  const { until } = await import('./lib/proc.mjs');
  const rx = await startReceiver();
  cleanup.push(() => rx.stop());
  const d = await daemon(redis.url, 'pr', 3, { apiKey: 'pr-key', env: { STATUSRELAY_REDIS_PREFIX: 'pr', STATUSRELAY_PARTITIONS: '3', STATUSRELAY_EVENT_RETENTION_AGE: '3s',
    STATUSRELAY_SETTLED_WATCH: '1s', STATUSRELAY_REQUEST_RETENTION: '4s' } });
  const wh = await d.post('/v1/webhooks', { url: rx.url('/pr') });
  assert.equal(wh.status, 201, wh.text);
  const ids = ridsOverPartitions('pr', 2);
  await ingestLifecycles(d, 'pr-key', ids);
  await allInOrder(rx, ids, until);
  const perPart = async (kind) => Promise.all([0, 1, 2].map((k) => redis.cmd('EXISTS', `${partTag('pr', k, 3)}:${kind}:${wh.body.id}`)));
  assert.deepEqual(await perPart('dls'), [1, 1, 1], 'each partition lists its deliveries');
  assert.equal((await d.del(`/v1/webhooks/${wh.body.id}`)).status, 204);
  await until(async () => (await perPart('dls')).every((x) => x === 0) && (await perPart('dlh')).every((x) => x === 0),
    { msg: 'the deleted endpoint\'s listing and delivered log gone from every partition', timeoutMs: 20000 });
  await until(async () => {
    const lens = await Promise.all([0, 1, 2].map((k) => redis.cmd('XLEN', `${partTag('pr', k, 3)}:events`)));
    return lens.every((x) => x === 0);
  }, { msg: 'events past the age bound trimmed in every partition', timeoutMs: 20000 });
  assert.equal(await redis.cmd('ZCARD', '{pr}:whgone'), 1, 'remembered until the grace is over');
  await until(async () => {
    const n = await Promise.all([0, 1, 2].map((k) => redis.cmd('ZCARD', `${partTag('pr', k, 3)}:ct`)));
    return n.every((x) => x === 0);
  }, { msg: 'idle settled requests forgotten in every partition', timeoutMs: 20000 });
  for (const id of ids) assert.equal((await d.get(`/v1/requests/${id}`)).status, 404, id);
});

test('3 partitions on a 3-master Redis Cluster: each partition on its own master, webhooks delivered in order', async () => {
  const { startReceiver } = await import('./lib/hooks.mjs');
  const { until } = await import('./lib/proc.mjs');
  const cl = await startCluster({ masters: 3, replicas: 0 });
  cleanup.push(() => cl.stop());
  // a prefix whose three partition tags hash to slots of three different masters
  const { prefix, owners } = await cl.spreadPrefix('pk', 3);
  const rx = await startReceiver();
  cleanup.push(() => rx.stop());
  const d = await daemon(cl.url(owners[0].port), prefix, 3, {
    apiKey: 'pk-key', env: { STATUSRELAY_REDIS_PREFIX: prefix, STATUSRELAY_PARTITIONS: '3', STATUSRELAY_RETRY_SCHEDULE: '0s,200ms,500ms' },
  });
  const wh = await d.post('/v1/webhooks', { url: rx.url('/pk') });
  assert.equal(wh.status, 201, wh.text);
  // a second endpoint whose first answers fail: retries go through the claim and outcome
  // scripts of each partition, and the endpoint's health through the deployment's hash
  const rx2 = await startReceiver({ script: ['/retry=500,500,500,500,500,500'] });
  cleanup.push(() => rx2.stop());
  const wh2 = await d.post('/v1/webhooks', { url: rx2.url('/retry') });
  assert.equal(wh2.status, 201, wh2.text);
  const ids = ridsOverPartitions(prefix, 3);
  await ingestLifecycles(d, 'pk-key', ids);
  await allInOrder(rx, ids, until);
  const delivered2 = () => rx2.records().filter((x) => x.status < 300);
  await until(() => delivered2().length >= 27, { msg: '27 deliveries on the failing endpoint', timeoutMs: 30000 });
  assert.equal(rx2.records().filter((x) => x.status === 500).length, 6, 'its first six answers failed');
  const got2 = new Map();
  for (const x of delivered2()) {
    const b = JSON.parse(x.body);
    got2.set(b.data.requestId, [...(got2.get(b.data.requestId) ?? []), b.data.status]);
  }
  for (const id of ids)
    assert.deepEqual(got2.get(id), ['waiting', 'pending', 'success'], `${id}: delivered once each to the failing endpoint, in order`);
  const ep = await d.get(`/v1/webhooks/${wh2.body.id}`);
  assert.equal(ep.status, 200, ep.text);
  assert.equal(ep.body.enabled, true);
  for (let k = 0; k < 3; k++) {
    assert.equal(await cl.cmd(owners[k].port, 'XLEN', `${partTag(prefix, k, 3)}:events`), 9, `partition ${k}'s events on its master`);
    const counted = await cl.cmd(owners[k].port, 'CLUSTER', 'COUNTKEYSINSLOT', String(await cl.slotOf(partTag(prefix, k, 3))));
    assert.ok(counted >= 9 + 1, `partition ${k}'s keys (requests, timelines, stream...) on master ${owners[k].port}: ${counted}`);
    for (const other of owners.filter((_, j) => j !== k))
      assert.equal(await cl.cmd(other.port, 'CLUSTER', 'COUNTKEYSINSLOT', String(await cl.slotOf(partTag(prefix, k, 3)))), 0, 'none on another master');
  }
  assert.equal(await cl.cmd((await cl.ownerOf(await cl.slotOf(`{${prefix}}`))).port, 'HGET', `{${prefix}}:config`, 'partitions'), '3/spread');
  assert.doesNotMatch(d.proc.log(), /level=error|CROSSSLOT|non local key|fan-out check failed|script failed/);
});

test('3 partitions: GET /v1/requests pages through every partition in first-seen order, cursor as before', async () => {
  const d = await daemon(redis.url, 'pl', 3);
  const ids = ridsOverPartitions('pl', 4);
  for (const [i, id] of ids.entries()) { // in three calls: several first-seen times
    if (i % 4 === 0) await new Promise((r) => setTimeout(r, 5));
    assert.ok([200, 201].includes((await d.post('/v1/requests', { requestId: id })).status));
  }
  const seen = [];
  let cursor = '';
  for (let page = 0; page < 10; page++) {
    const r = await d.get(`/v1/requests?limit=5${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    assert.equal(r.status, 200, r.text);
    assert.ok(r.body.requests.length <= 5);
    seen.push(...r.body.requests);
    if (r.body.cursor === null) break;
    cursor = r.body.cursor;
  }
  assert.deepEqual(seen.map((x) => x.requestId).sort(), [...ids].sort(), 'every request once, from all partitions');
  for (let i = 1; i < seen.length; i++) {
    const a = seen[i - 1], b = seen[i];
    assert.ok(a.firstSeenAt < b.firstSeenAt || (a.firstSeenAt === b.firstSeenAt && a.requestId < b.requestId),
      `order by (first seen, id) at ${i}`);
  }
  const none = await d.get('/v1/requests?status=success');
  assert.equal(none.status, 200, none.text);
  assert.deepEqual(none.body, { requests: [], cursor: null });
});

test('3 partitions: GET /v1/events merges every partition\'s stream, the cursor is one position per partition', async () => {
  const d = await daemon(redis.url, 'pv', 3, { apiKey: 'pv-key', env: { STATUSRELAY_REDIS_PREFIX: 'pv', STATUSRELAY_PARTITIONS: '3' } });
  const empty = await d.get('/v1/events');
  assert.deepEqual(empty.body, { events: [], cursor: null });
  const ids = ridsOverPartitions('pv', 3);
  await ingestLifecycles(d, 'pv-key', ids);
  const seen = [];
  let cursor = '';
  for (let page = 0; page < 20; page++) {
    const r = await d.get(`/v1/events?limit=4${cursor ? `&after=${encodeURIComponent(cursor)}` : ''}`);
    assert.equal(r.status, 200, r.text);
    assert.match(r.body.cursor, /^\d+-\d+,\d+-\d+,\d+-\d+$/);
    cursor = r.body.cursor;
    if (r.body.events.length === 0) break;
    assert.ok(r.body.events.length <= 4);
    assert.equal(r.body.events.at(-1).streamId, r.body.cursor, 'the last event\'s streamId is the cursor');
    seen.push(...r.body.events);
  }
  assert.equal(seen.length, 27, 'every event once');
  assert.equal(new Set(seen.map((e) => e.eventId)).size, 27);
  for (const e of seen) assert.equal(e.partition, partitionOf(e.requestId, 3));
  // every event's streamId is the vector after it: each moves one component forward
  const vec = (s) => s.split(',').map((x) => x.split('-').map(BigInt));
  const after = (a, b) => a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);
  for (const [i, e] of seen.entries()) {
    const v = vec(e.streamId), prev = i ? vec(seen[i - 1].streamId) : [[0n, 0n], [0n, 0n], [0n, 0n]];
    assert.equal(v.length, 3, e.streamId);
    for (let k = 0; k < 3; k++)
      if (k === e.partition) assert.ok(after(v[k], prev[k]), `${e.streamId} moves partition ${k}`);
      else assert.deepEqual(v[k], prev[k], `${e.streamId} keeps partition ${k}`);
  }
  // so "after" = any event's streamId resumes right after that event
  for (const i of [0, 5, 13, 25]) {
    const r = await d.get(`/v1/events?limit=100&after=${encodeURIComponent(seen[i].streamId)}`);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body.events.map((e) => e.eventId), seen.slice(i + 1).map((e) => e.eventId), `after event ${i}`);
  }
  for (const id of ids) // per request: exact order
    assert.deepEqual(seen.filter((e) => e.requestId === id).map((e) => e.status), ['waiting', 'pending', 'success']);
  // tailing: "$" gives the newest positions, then only what comes after
  const tail = await d.get('/v1/events?after=$');
  assert.equal(tail.status, 200, tail.text);
  assert.deepEqual(tail.body.events, []);
  const more = ridsOverPartitions('pvz', 1);
  await ingestLifecycles(d, 'pv-key', more);
  const next = await d.get(`/v1/events?after=${encodeURIComponent(tail.body.cursor)}`);
  assert.deepEqual(next.body.events.map((e) => e.requestId).sort(), [...more, ...more, ...more].sort());
  // a single stream id is not a cursor of a 3-partition deployment
  const bad = await d.get(`/v1/events?after=${encodeURIComponent(seen[0].streamId.split(',')[seen[0].partition])}`);
  assert.equal(bad.status, 400, bad.text);
  assert.equal(bad.body.error.code, 'invalid_parameter');
  // a request's own events: its partition's stream, as with one partition
  const one = await d.get(`/v1/events?requestId=${ids[0]}`);
  assert.deepEqual(one.body.events.map((e) => e.status), ['waiting', 'pending', 'success']);
});

test('3 partitions: an endpoint\'s deliveries are listed from every partition, newest first, cursor one offset per partition', async () => {
  const { startReceiver } = await import('./lib/hooks.mjs');
  const { until } = await import('./lib/proc.mjs');
  const rx = await startReceiver();
  cleanup.push(() => rx.stop());
  const d = await daemon(redis.url, 'pd3', 3, { apiKey: 'pd3-key', env: { STATUSRELAY_REDIS_PREFIX: 'pd3', STATUSRELAY_PARTITIONS: '3' } });
  const wh = await d.post('/v1/webhooks', { url: rx.url('/pd3') });
  assert.equal(wh.status, 201, wh.text);
  const ids = ridsOverPartitions('pd3', 3);
  await ingestLifecycles(d, 'pd3-key', ids);
  await allInOrder(rx, ids, until);
  const list = async (state) => {
    const out = [];
    let cursor = '';
    for (let page = 0; page < 30; page++) {
      const r = await d.get(`/v1/webhooks/${wh.body.id}/deliveries?limit=4${state ? `&state=${state}` : ''}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      assert.equal(r.status, 200, r.text);
      assert.ok(r.body.deliveries.length <= 4);
      out.push(...r.body.deliveries);
      if (r.body.cursor === null) break;
      assert.match(r.body.cursor, /^\d+,\d+,\d+$/);
      cursor = r.body.cursor;
    }
    return out;
  };
  const all = await until(async () => { const l = await list(); return l.length === 27 && l; }, { msg: '27 listed' });
  assert.equal(new Set(all.map((x) => x.id)).size, 27, 'each once');
  assert.deepEqual(new Set(all.map((x) => x.eventId)), new Set(rx.records().map((x) => x.headers['webhook-id'])));
  for (let i = 1; i < all.length; i++) assert.ok(all[i - 1].createdAt >= all[i].createdAt, 'newest first');
  assert.equal((await list('delivered')).length, 27);
  assert.equal((await list('dead')).length, 0);
  const bad = await d.get(`/v1/webhooks/${wh.body.id}/deliveries?cursor=5`);
  assert.equal(bad.status, 400, bad.text);
});

test('3 partitions: replays (dead, by endpoint and time, by request) reach every partition', async () => {
  const { startReceiver } = await import('./lib/hooks.mjs');
  const { until } = await import('./lib/proc.mjs');
  const rxa = await startReceiver();
  const rxd = await startReceiver({ def: 500 });
  cleanup.push(() => rxa.stop(), () => rxd.stop());
  const d = await daemon(redis.url, 'prp', 3, { apiKey: 'prp-key', env: { STATUSRELAY_REDIS_PREFIX: 'prp', STATUSRELAY_PARTITIONS: '3', STATUSRELAY_RETRY_SCHEDULE: '0s,100ms' } });
  const wa = await d.post('/v1/webhooks', { url: rxa.url('/a') });
  const wd = await d.post('/v1/webhooks', { url: rxd.url('/d') });
  assert.equal(wa.status, 201, wa.text);
  assert.equal(wd.status, 201, wd.text);
  const dead = async () => {
    const r = await d.get(`/v1/webhooks/${wd.body.id}/deliveries?state=dead&limit=100`);
    assert.equal(r.status, 200, r.text);
    return r.body.deliveries.length;
  };
  const ok = (rx) => rx.records().filter((x) => x.status < 300);
  const first = ridsOverPartitions('prp', 2);
  await ingestLifecycles(d, 'prp-key', first);
  await allInOrder(rxa, first, until);
  await until(async () => (await dead()) === 18, { msg: '18 dead on the failing endpoint', timeoutMs: 20000 });
  await new Promise((r) => setTimeout(r, 20));
  const mid = Date.now();
  await new Promise((r) => setTimeout(r, 20));
  const second = ridsOverPartitions('prq', 1);
  await ingestLifecycles(d, 'prp-key', second);
  await allInOrder(rxa, [...first, ...second], until);
  await until(async () => (await dead()) === 27, { msg: '27 dead', timeoutMs: 20000 });
  // counts summed over the partitions
  const dry = async (body) => {
    const r = await d.post('/v1/replay', { ...body, dryRun: true });
    assert.equal(r.status, 200, r.text);
    return r.body.count;
  };
  assert.equal(await dry({ dead: true }), 27, 'dead deliveries of every partition');
  assert.equal(await dry({ webhookId: wa.body.id, since: mid }), 9, 'the second batch: one request per partition');
  assert.equal(await dry({ webhookId: wa.body.id, since: 0 }), 27);
  // dead ones replayed once the endpoint answers: each event once, same ids as endpoint a got
  await rxd.setScript(`/d=${Array(40).fill(200).join(',')}`);
  const rp = await d.post('/v1/replay', { dead: true });
  assert.equal(rp.status, 202, rp.text);
  assert.equal(rp.body.count, 27);
  await until(() => ok(rxd).length >= 27, { msg: '27 dead deliveries replayed', timeoutMs: 20000 });
  const ids = (rx) => ok(rx).map((x) => x.headers['webhook-id']);
  assert.equal(new Set(ids(rxd)).size, 27, 'each once');
  assert.deepEqual(new Set(ids(rxd)), new Set(ids(rxa)));
  for (const x of ok(rxd)) assert.equal(x.headers['statusrelay-replay'], '1');
  // by endpoint and time: the second batch again, from its three partitions
  const byTime = await d.post('/v1/replay', { webhookId: wa.body.id, since: mid });
  assert.equal(byTime.status, 202, byTime.text);
  assert.equal(byTime.body.count, 9);
  await until(() => ok(rxa).length >= 36, { msg: '9 replayed to a', timeoutMs: 20000 });
  const again = ok(rxa).slice(27).map((x) => JSON.parse(x.body).data.requestId);
  assert.deepEqual(again.sort(), [...second, ...second, ...second].sort());
  // by request: its partition only, every endpoint
  const one = first[first.length - 1];
  const byReq = await d.post('/v1/replay', { requestId: one });
  assert.equal(byReq.status, 202, byReq.text);
  assert.equal(byReq.body.count, 6, '3 events x 2 endpoints');
  await until(() => ok(rxa).length >= 39 && ok(rxd).length >= 30, { msg: 'replay by request', timeoutMs: 20000 });
  for (const rx of [rxa, rxd])
    assert.deepEqual(rx.records().slice(-3).map((x) => JSON.parse(x.body).data.requestId), [one, one, one]);
  assert.doesNotMatch(d.proc.log(), /level=error/);
});
