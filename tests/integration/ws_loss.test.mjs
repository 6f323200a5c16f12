// ws_loss.test.mjs - losing the upstream websocket brings polls forward: a few seconds after
// the drop (the grace, 3 s) every watched request is due for polling at once, and polled every
// STATUSRELAY_POLL_INTERVAL while the websocket stays down, instead of waiting out the 30 s
// safety schedule of the requests the websocket had confirmed. The simulator drops its
// websocket and refuses reconnects while its status endpoint keeps answering; a change made
// 2 s after the drop must reach the relay's webhook within 8 s of the drop (before: ~22 s).
// Real redis-server, the simulator, the daemon and a webhook receiver on loopback.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';
import { waitStatus } from './lib/requests.mjs';
import { startReceiver } from './lib/hooks.mjs';

const KEY = 'ws-loss-key';
let redis, sim;

before(async () => {
  redis = await startRedis();
  sim = await startSim({ apiKey: KEY, seed: 22, rateLimit: 0 });
});
after(async () => {
  await sim?.stop();
  await redis?.stop();
});

const simReq = (id) => sim.control(`/requests/${id}`, null, 'GET');
const metrics = async (d) => (await fetch(d.url + '/metrics')).text();

test('a change 2 s after the upstream websocket drops is delivered within 8 s of the drop', async () => {
  const d = await startDaemon({
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrl, apiKey: KEY,
    env: {
      STATUSRELAY_REDIS_PREFIX: 'wsloss',
      STATUSRELAY_UPSTREAM_PING_INTERVAL: '1s', STATUSRELAY_UPSTREAM_PING_TIMEOUT: '3s',
    },
    name: 'ws-loss-daemon',
  });
  const rx = await startReceiver();
  try {
    assert.equal((await d.post('/v1/webhooks', { url: rx.url('/h') })).status, 201);
    const ids = [];
    for (let i = 0; i < 3; i++) {
      const r = await sim.control('/requests', { path: ['waiting', 'pending', 'submitted'], stepMs: 0, autoHashes: true });
      assert.equal((await d.post('/v1/requests', { requestId: r.id })).status, 201);
      ids.push(r.id);
    }
    const [id] = ids;
    await until(async () => /^statusrelay_upstream_ws_state\{state="ready"\} 1$/m.test(await metrics(d)), { msg: 'upstream websocket ready' });
    await until(() => /gap repaired/.test(d.proc.log()), { msg: 'gap repair done' });
    for (const x of ids) {
      await waitStatus(d, x, 'waiting');
      await until(async () => (await simReq(x)).subscribed === true, { msg: 'subscribed upstream' });
    }
    // confirmed by the websocket: on the 30 s safety schedule from here
    for (const x of ids) await sim.control(`/requests/${x}/advance`, {});
    for (const x of ids) assert.equal((await waitStatus(d, x, 'pending')).lastSource, 'ws');
    await new Promise((r) => setTimeout(r, 500)); // the polls of the change are rescheduled

    const t0 = Date.now();
    await sim.control('/faults', { wsRefuse: true, dropWs: 'abrupt' });
    await until(async () => /^statusrelay_upstream_ws_state\{state="ready"\} 0$/m.test(await metrics(d)), { msg: 'the relay saw the drop', timeoutMs: 5000 });
    await new Promise((r) => setTimeout(r, Math.max(0, 2000 - (Date.now() - t0))));
    const polls0 = (await simReq(id)).statusPolls;
    await sim.control(`/requests/${id}/advance`, {});
    const tChange = Date.now();
    const ev = await until(() => rx.records().map((x) => JSON.parse(x.body))
      .find((b) => b.data.requestId === id && b.data.status === 'submitted'),
    { msg: 'submitted webhook', timeoutMs: 35000, stepMs: 100 });
    const dt = Date.now() - t0;
    console.log(`# change made ${tChange - t0} ms after the drop, delivered ${dt} ms after the drop`);
    assert.equal(ev.statusrelay.source, 'poll', 'found by a poll: the websocket is down');
    assert.ok(dt < 8000, `delivered ${dt} ms after the drop (bound 8000)`);
    assert.ok((await simReq(id)).statusPolls > polls0);
    assert.match(d.proc.log(), /still down: every watched request is polled now/);
    // while it stays down, the others are polled every STATUSRELAY_POLL_INTERVAL (1 s)
    const other = ids[1];
    const a = (await simReq(other)).statusPolls;
    await new Promise((r) => setTimeout(r, 4000));
    const b = (await simReq(other)).statusPolls;
    assert.ok(b - a >= 2, `polled ${b - a} times in 4 s while the websocket is down`);
  } finally {
    await sim.control('/faults', null, 'DELETE');
    await rx.stop();
    await d.stop();
  }
});
