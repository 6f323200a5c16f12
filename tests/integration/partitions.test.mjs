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
  assert.equal(await redis.cmd('EXISTS', `{pa}:req:${id}`), 1, 'today\'s key names');
  await refused(redis.url, 'pa', 3, 1);
  assert.equal(await redis.cmd('EXISTS', '{pa}:config'), 0, 'a refused process writes nothing');
  // explicit 1 on the same data: fine, and the first daemon never noticed the refused one
  await daemon(redis.url, 'pa', 1);
  assert.equal((await d.get(`/v1/requests/${id}`)).status, 200);
});

test('a deployment started with 3 partitions records 3; 1 and 2 are refused, 3 restarts', async () => {
  const d = await daemon(redis.url, 'pb', 3);
  assert.equal(await redis.cmd('HGET', '{pb}:config', 'partitions'), '3');
  await d.stop();
  await refused(redis.url, 'pb', 1, 3);
  await refused(redis.url, 'pb', 2, 3);
  const again = await daemon(redis.url, 'pb', 3);
  assert.equal((await again.get('/readyz')).status, 200);
  assert.equal(await redis.cmd('HGET', '{pb}:config', 'partitions'), '3');
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
  assert.equal(await cl.cmd(owner.port, 'HGET', '{pc}:config', 'partitions'), '3');
  await d.stop();
  await refused(cl.url(other.port), 'pc', 1, 3);
  // a 1-partition deployment on the cluster: no record, and 3 refused on its data
  const one = await daemon(cl.url(other.port), 'pd');
  assert.equal((await one.post('/v1/requests', { requestId: rid('pd') })).status, 201);
  await refused(cl.url(other.port), 'pd', 3, 1);
  assert.equal(await cl.cmd((await cl.ownerOf(await cl.slotOf('pd'))).port, 'EXISTS', '{pd}:config'), 0);
});

/** The partition of a request id: CRC16-XMODEM of its bytes mod n (store/keys.c). */
function partitionOf(id, n) {
  let c = 0;
  for (const b of Buffer.from(id)) {
    c ^= b << 8;
    for (let i = 0; i < 8; i++) c = (c & 0x8000 ? (c << 1) ^ 0x1021 : c << 1) & 0xffff;
  }
  return c % n;
}

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
      assert.equal(await redis.cmd('EXISTS', `{${prefix}:p${k}}:req:${id}`), 1, `${id} in partition ${k}`);
      assert.equal(await redis.cmd('EXISTS', `{${prefix}}:req:${id}`), 0, 'not under the deployment tag');
      const ev = await d.get(`/v1/events?requestId=${id}`);
      assert.equal(ev.status, 200, ev.text);
      assert.deepEqual(ev.body.events.map((e) => e.status), ['waiting', 'pending', 'success'], `${id} timeline`);
    }
    for (let k = 0; k < 3; k++) {
      assert.equal(await redis.cmd('XLEN', `{${prefix}:p${k}}:events`), 6, `partition ${k}: 2 requests x 3 events`);
      assert.equal(await redis.cmd('ZCARD', `{${prefix}:p${k}}:all`), 2);
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
