// ingest.test.mjs - the left half of the data flow end to end: the simulator plays the
// upstream, a real redis-server holds the state, and the daemon must know the true state of
// every tracked request whatever the upstream websocket does.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';
import { trackScripted, waitStatus } from './lib/requests.mjs';

const KEY = 'ingest-test-key';
let redis, sim;
let prefixN = 0;

before(async () => {
  redis = await startRedis({ aof: true });
  sim = await startSim({ apiKey: KEY, seed: 11, rateLimit: 0 });
});
after(async () => { await sim?.stop(); await redis?.stop(); });

async function daemon(extra = {}) {
  return startDaemon({
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrl, apiKey: KEY,
    env: {
      STATUSRELAY_REDIS_PREFIX: `ing${prefixN++}`, STATUSRELAY_POLL_SAFETY_INTERVAL: '30s',
      STATUSRELAY_UPSTREAM_PING_INTERVAL: '1s', STATUSRELAY_UPSTREAM_PING_TIMEOUT: '3s',
      ...(extra.env ?? {}),
    },
    name: `ingest-daemon-${prefixN}`,
    ...extra.opts,
  });
}

async function events(d, id) {
  const r = await d.get(`/v1/events?requestId=${id}&limit=100`);
  assert.equal(r.status, 200);
  return r.body.events;
}

const scripted = (d, path, extra) => trackScripted(sim, d, path, extra);

async function subscribed(d, n = 1) {
  await until(async () => {
    const m = await (await fetch(d.url + '/metrics')).text();
    const v = /^statusrelay_upstream_ws_subscriptions (\d+)/m.exec(m);
    return v && Number(v[1]) >= n && /^statusrelay_upstream_ws_state\{state="ready"\} 1$/m.test(m);
  }, { msg: 'upstream websocket ready and subscribed' });
}

/** A facts follow-up (docs/facts.md): the same status again, from the /requests/v3 read. */
const followUp = (e) => e.previousStatus === e.status && e.source === 'requests';
/** The status changes of an event log, facts follow-ups aside (at most one per change). */
function changes(evs) {
  assert.ok(!evs.some((e, i) => i > 0 && followUp(e) && followUp(evs[i - 1])), 'one follow-up per change at most');
  return evs.filter((e) => !followUp(e));
}

function assertTimeline(evs, statuses) {
  assert.deepEqual(changes(evs).map((e) => e.status), statuses, JSON.stringify(evs.map((e) => [e.seq, e.status, e.source])));
  assert.deepEqual(evs.map((e) => e.seq), evs.map((_, i) => i + 1));
}

test('a full lifecycle over the websocket: right final state, event log and seq', async () => {
  const d = await daemon();
  try {
    const path = ['waiting', 'pending', { status: 'failure', failReason: 'SLIPPAGE' }, 'pending', 'refund'];
    const id = await scripted(d, path);
    await waitStatus(d, id, 'waiting');
    await subscribed(d);
    for (let i = 1; i < path.length; i++) {
      await sim.control(`/requests/${id}/advance`, {});
      await waitStatus(d, id, typeof path[i] === 'string' ? path[i] : path[i].status);
    }
    const st = (await d.get(`/v1/requests/${id}`)).body;
    assert.equal(st.failReason, 'SLIPPAGE');
    assert.ok(st.inTxHashes.length >= 1);
    const evs = await events(d, id);
    assert.equal(st.seq, evs.at(-1).seq);
    assertTimeline(evs, ['waiting', 'pending', 'failure', 'pending', 'refund']);
    assert.ok(evs.slice(1).some((e) => e.source === 'ws'), 'websocket delivered the changes');
    // what the relay serves in the upstream shape equals what the upstream says
    const ours = (await d.get(`/intents/status/v3?requestId=${id}`)).body;
    const theirs = await (await fetch(`${sim.url}/intents/status/v3?requestId=${id}`)).json();
    for (const k of ['status', 'inTxHashes', 'txHashes', 'updatedAt', 'originChainId', 'destinationChainId', 'failReason', 'refundFailReason'])
      assert.deepEqual(ours[k], theirs[k], k);
  } finally { await d.stop(); }
});

for (const mode of ['abrupt', '1012']) {
  test(`websocket dropped (${mode}) mid-lifecycle: every status lands exactly once, in order`, async () => {
    const d = await daemon();
    try {
      const path = ['waiting', 'pending', 'submitted', 'success'];
      const ids = [await scripted(d, path), await scripted(d, path), await scripted(d, path)];
      for (const id of ids) await waitStatus(d, id, 'waiting');
      await subscribed(d, 3);
      // each status changes while the connection is down (or just coming back); the relay
      // must catch every one of them (the upstream keeps no history: a status replaced
      // before anyone could observe it cannot be recovered by anybody)
      for (const st of ['pending', 'submitted']) {
        await sim.control('/faults', { dropWs: mode });
        for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
        for (const id of ids) await waitStatus(d, id, st, 15000);
      }
      for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
      for (const id of ids) {
        await waitStatus(d, id, 'success', 15000);
        assertTimeline(await events(d, id), path);
      }
      const m = await (await fetch(d.url + '/metrics')).text();
      assert.match(m, /^statusrelay_upstream_ws_reconnects_total [1-9]/m);
    } finally {
      await sim.control('/faults', null, 'DELETE');
      await d.stop();
    }
  });
}

test('a silent websocket (HTTP still answers) is caught by safety polls', async () => {
  const d = await daemon({ env: { STATUSRELAY_REDIS_PREFIX: `ing${prefixN++}`, STATUSRELAY_POLL_SAFETY_INTERVAL: '1s' } });
  try {
    const id = await scripted(d, ['waiting', 'pending', 'submitted', 'success']);
    await waitStatus(d, id, 'waiting');
    await subscribed(d);
    await sim.control('/faults', { silent: true });
    for (const st of ['pending', 'submitted', 'success']) {
      await sim.control(`/requests/${id}/advance`, {});
      await waitStatus(d, id, st, 10000);
    }
    const m = await (await fetch(d.url + '/metrics')).text();
    assert.match(m, /^statusrelay_upstream_ws_lagging_total [1-9]/m);
    assert.match(d.proc.log(), /upstream websocket lagging/);
    assertTimeline(await events(d, id), ['waiting', 'pending', 'submitted', 'success']);
  } finally {
    await sim.control('/faults', null, 'DELETE');
    await d.stop();
  }
});

test('duplicated and reordered upstream events: no duplicate, no regression', async () => {
  const d = await daemon();
  try {
    const path = ['waiting', 'pending', 'submitted', 'success'];
    const ids = [];
    for (let i = 0; i < 4; i++) ids.push(await scripted(d, path));
    for (const id of ids) await waitStatus(d, id, 'waiting');
    await subscribed(d, 4);
    await sim.control('/faults', { duplicate: true, reorder: true });
    for (let step = 1; step < path.length; step++)
      for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
    for (const id of ids) {
      await waitStatus(d, id, 'success', 15000);
      const evs = await events(d, id);
      const seqs = evs.map((e) => e.seq);
      assert.deepEqual(seqs, [...seqs.keys()].map((k) => k + 1), 'seq has no gap or repeat');
      assert.equal(evs.at(-1).status, 'success');
      assert.equal(new Set(changes(evs).map((e) => e.status)).size, changes(evs).length, 'no status twice');
    }
    const m = await (await fetch(d.url + '/metrics')).text();
    assert.match(m, /statusrelay_events_total\{source="ws",outcome="(duplicate|stale)"\} [1-9]/);
  } finally {
    await sim.control('/faults', null, 'DELETE');
    await d.stop();
  }
});

test('the upstream budget is paced: a small burst, then an even rate (never the whole minute at once)', async () => {
  // a token bucket of burst = budget/10 refilled at (budget - burst) per minute: at most
  // burst + rate x T calls in any T seconds, so at most the budget in any sliding 60 s window
  const budget = 600;
  const burst = budget / 10;
  const rate = (budget - burst) / 60; // 9 calls/s
  // two processes on one Redis: the bucket is shared, so the bounds hold for their sum
  const env = { STATUSRELAY_REDIS_PREFIX: `ing${prefixN++}`, STATUSRELAY_UPSTREAM_BUDGET: String(budget) };
  const d = await daemon({ env });
  const d2 = await daemon({ env }).catch(async (e) => { await d.stop(); throw e; });
  try {
    // the upstream websocket down (dropped, reconnects refused): 40 unconfirmed requests
    // each want a poll every second (40/s), far more than the refill rate
    await sim.control('/faults', { wsRefuse: true, dropWs: 'abrupt' });
    const tReset = Date.now();
    await sim.control('/stats', null, 'DELETE');
    for (let i = 0; i < 40; i++) await scripted(d, ['waiting', 'pending']);
    // cumulative upstream calls, each sample bracketed by the times before and after reading
    // it: the bounds below use the measured times, so a slow machine only loosens them. We
    // sample until a steady window of 2.5 s, starting 1 s after the burst was spent, has
    // been seen (at most 20 s in all)
    const samples = [];
    let spent = null, from = null;
    for (;;) {
      const t0 = Date.now();
      const n = (await sim.control('/stats')).http.total;
      samples.push({ t0, t1: Date.now(), n });
      if (spent === null && n >= burst) spent = samples.at(-1).t1;
      if (spent !== null && from === null && t0 >= spent + 1000) from = samples.at(-1);
      if ((from !== null && t0 - from.t1 >= 2500) || Date.now() - tReset > 20000) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const show = samples.filter((_, i) => i % 5 === 0).map((s) => `${((s.t1 - tReset) / 1000).toFixed(1)}s:${s.n}`).join(' ');
    console.log(`# paced budget: cumulative upstream calls ${show} (budget ${budget}/min = burst ${burst} + ${rate}/s)`);
    // every window we can observe, from the reset on, holds at most burst + rate x its length
    // (+2: a call claimed just before a window may reach the simulator inside it). The old
    // calendar-minute budget followed the demand: 40/s until the minute's 600 were gone.
    const windows = [{ t0: tReset, n: 0 }, ...samples];
    for (let i = 0; i < windows.length; i++)
      for (let j = i + 1; j < windows.length; j++) {
        const secs = (windows[j].t1 - windows[i].t0) / 1000;
        const calls = windows[j].n - windows[i].n;
        assert.ok(calls <= burst + rate * secs + 2,
          `${calls} calls in ${secs.toFixed(2)} s exceed burst ${burst} + ${rate}/s (${show})`);
      }
    // once the burst is spent (demand stays above the rate, so the bucket stays empty), calls
    // keep coming at the refill rate: neither faster nor stalled
    assert.ok(spent !== null, `the burst of ${burst} is spent (${show})`);
    const last = samples.at(-1);
    assert.ok(from !== null && last.t0 - from.t1 >= 2500, `a steady window was observed (${show})`);
    const steady = last.n - from.n;
    const secs = (last.t1 - from.t0) / 1000;
    assert.ok(steady <= rate * secs + 3, `${steady} calls in ${secs.toFixed(2)} s after the burst: not paced at ${rate}/s (${show})`);
    assert.ok(steady >= rate * ((last.t0 - from.t1) / 1000) / 4, `${steady} calls in ${secs.toFixed(2)} s: polling stalled (${show})`);
    // both processes polled (else the sum says nothing about sharing)
    for (const x of [d, d2]) {
      const m = await (await fetch(x.url + '/metrics')).text();
      assert.match(m, /^statusrelay_upstream_budget_used_total [1-9]/m, 'each process spent from the budget');
    }
  } finally {
    await sim.control('/faults', null, 'DELETE');
    await d2.stop();
    await d.stop();
  }
});

test('upstream 503/429 storm: the budget holds and the state converges afterwards', async () => {
  const budget = 60;
  const d = await daemon({ env: { STATUSRELAY_REDIS_PREFIX: `ing${prefixN++}`, STATUSRELAY_UPSTREAM_BUDGET: String(budget) } });
  try {
    // a websocket that says nothing: only polls can find the truth
    await sim.control('/faults', { silent: true, httpErrorRate: 1, httpErrorStatus: 0 });
    const ids = [];
    for (let i = 0; i < 30; i++) ids.push(await scripted(d, ['waiting', 'pending']));
    await sim.control('/stats', null, 'DELETE');
    const t0 = Date.now();
    await new Promise((r) => setTimeout(r, 8000));
    const stats = await sim.control('/stats');
    const calls = stats.http.total;
    const minutes = (Date.now() - t0) / 60000;
    console.log(`# storm: ${calls} upstream calls in ${(minutes * 60).toFixed(1)} s with budget ${budget}/min`);
    // the budget is a bucket of budget/10 refilled at 0.9 x budget per minute
    assert.ok(calls >= 3, `polling goes on during the storm (${calls} calls)`);
    assert.ok(calls <= budget / 10 + (0.9 * budget * minutes) + 2, `calls ${calls} exceed the budget`);
    const m = await (await fetch(d.url + '/metrics')).text();
    assert.match(m, /statusrelay_upstream_http_total\{path="status_v3",class="(5xx|429)"\} [1-9]/);
    await sim.control('/faults', { silent: false, httpErrorRate: 0 });
    for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
    await sim.control('/faults', null, 'DELETE');
    for (const id of ids) await waitStatus(d, id, 'pending', 60000);
  } finally {
    await sim.control('/faults', null, 'DELETE');
    await d.stop();
  }
});

test('Redis restarted (AOF) mid-stream: nothing accepted is lost, no daemon restart', async () => {
  const d = await daemon();
  try {
    const path = ['waiting', 'pending', 'submitted', 'success'];
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push(await scripted(d, path));
    for (const id of ids) await waitStatus(d, id, 'waiting');
    await subscribed(d, 5);
    for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
    for (const id of ids) await waitStatus(d, id, 'pending');
    await redis.cmd('BGREWRITEAOF').catch(() => {});
    await new Promise((r) => setTimeout(r, 1200)); // let everysec fsync
    redis = await redis.restart();
    for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
    for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
    for (const id of ids) {
      await waitStatus(d, id, 'success', 30000);
      assertTimeline(await events(d, id), path);
    }
    assert.equal(d.proc.child.exitCode, null, 'daemon kept running');
    assert.match(d.proc.log(), /redis disconnected/);
  } finally { await d.stop(); }
});

test('Redis frozen (SIGSTOP): commands time out, the store drops the connection instead of hanging, and recovers', async () => {
  const d = await daemon();
  let frozen = false;
  try {
    const path = ['waiting', 'pending', 'submitted', 'success'];
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await scripted(d, path));
    for (const id of ids) await waitStatus(d, id, 'waiting');
    await subscribed(d, 3);
    assert.equal((await d.get('/readyz')).status, 200);
    redis.proc.child.kill('SIGSTOP');
    frozen = true;
    // /readyz says so once its own probe goes unanswered for 1 s; every process polls Redis: the
    // first command waits past the 5 s command timeout, then the connection is freed (its
    // commands fail as on a disconnect)
    await until(async () => (await d.get('/readyz')).status === 503, { timeoutMs: 20000, msg: '/readyz 503 while Redis hangs' });
    await until(() => /redis command timed out, reconnecting/.test(d.proc.log()), { timeoutMs: 20000, msg: 'command timeout logged' });
    await until(() => /redis disconnected/.test(d.proc.log()), { timeoutMs: 20000, msg: 'disconnect logged' });
    redis.proc.child.kill('SIGCONT');
    frozen = false;
    await until(async () => (await d.get('/readyz')).status === 200, { timeoutMs: 20000, msg: '/readyz 200 again' });
    for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
    for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
    for (const id of ids) await sim.control(`/requests/${id}/advance`, {});
    for (const id of ids) {
      await waitStatus(d, id, 'success', 30000);
      assertTimeline(await events(d, id), path);
    }
    assert.equal(d.proc.child.exitCode, null, 'daemon kept running');
  } finally {
    if (frozen) redis.proc.child.kill('SIGCONT');
    await d.stop();
  }
});

test('malformed frames are counted and ignored; the daemon stays up', async () => {
  const d = await daemon();
  try {
    const id = await scripted(d, ['waiting', 'pending']);
    await waitStatus(d, id, 'waiting');
    await subscribed(d);
    await sim.control('/faults', { malformed: 50 });
    await sim.control(`/requests/${id}/advance`, {});
    await waitStatus(d, id, 'pending');
    const m = await (await fetch(d.url + '/metrics')).text();
    const v = /statusrelay_events_total\{source="ws",outcome="rejected"\} (\d+)/.exec(m);
    assert.ok(v && Number(v[1]) >= 1, 'rejected frames counted');
    assert.equal((await d.get('/healthz')).status, 200);
  } finally {
    await sim.control('/faults', null, 'DELETE');
    await d.stop();
  }
});

test('10,000 tracked requests: daemon RSS and Redis memory per request (reported)', async () => {
  const prefix = `ing${prefixN++}`;
  const before = Number(/used_memory:(\d+)/.exec(await redis.cmd('INFO', 'memory'))[1]);
  const d = await daemon({ env: { STATUSRELAY_REDIS_PREFIX: prefix, STATUSRELAY_UPSTREAM_BUDGET: '200' } });
  try {
    const ids = [];
    for (let i = 0; i < 10000; i++) ids.push('0x' + (BigInt(i) + 0xabcdef0000000000000000n).toString(16).padStart(64, '0'));
    for (let i = 0; i < ids.length; i += 1000) {
      const r = await d.post('/v1/requests', { requestIds: ids.slice(i, i + 1000) });
      assert.equal(r.status, 201, r.text);
    }
    await until(async () => {
      const m = await (await fetch(d.url + '/metrics')).text();
      return Number(/^statusrelay_upstream_ws_subscriptions (\d+)/m.exec(m)?.[1] ?? 0) >= 10000;
    }, { msg: '10,000 subscriptions', timeoutMs: 30000 });
    await new Promise((r) => setTimeout(r, 2000));
    const status = fs.readFileSync(`/proc/${d.proc.child.pid}/status`, 'utf8');
    const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)[1]);
    const afterMem = Number(/used_memory:(\d+)/.exec(await redis.cmd('INFO', 'memory'))[1]);
    console.log(`# 10,000 tracked: daemon RSS ${(rssKb / 1024).toFixed(1)} MiB, Redis ${((afterMem - before) / 10000).toFixed(0)} bytes/request`);
    // a sanitizer build carries shadow memory and quarantine: report only
    if (!process.env.ASAN_OPTIONS) assert.ok(rssKb < 64 * 1024, `RSS ${rssKb} KiB`);
  } finally { await d.stop(); }
});
