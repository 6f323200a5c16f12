// event_types.test.mjs - the events only the relay knows (issue 25): request.watch.ended
// (final, abandoned, failure_tail, untracked), request.stuck and endpoint.disabled, each
// created exactly once with two daemons on one Redis and across a kill -9 of one of them,
// signed (verified with the official standardwebhooks package), delivered only to endpoints
// whose filters.events name the type (a default endpoint receives none), a watch.ended after
// the request's last status event, listed in GET /v1/events and replayable; on the dashboard
// stream only to broad subscriptions naming the types (resumable from a typed frame). Real
// redis-server, the simulator, two daemons and webhook receivers on loopback; the windows
// are 1-2 s so the test takes seconds (STATUSRELAY_SETTLED_WATCH, _WAITING_TTL,
// _FAILURE_TAIL, _STUCK_AFTER).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import standardwebhooks from 'standardwebhooks';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { BIN, until } from './lib/proc.mjs';
import { startRedis, startDaemon, redisCmd } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';
import { trackScripted, waitStatus } from './lib/requests.mjs';
import { startReceiver } from './lib/hooks.mjs';
import { client, sub, subscribed } from './lib/dash_client.mjs';

const { Webhook } = standardwebhooks;
const KEY = 'event-types-key';
const TOK = 'event-types-stream-token';
const TYPES = ['request.status.updated', 'request.watch.ended', 'request.stuck', 'endpoint.disabled'];
let redis, sim;
const cleanup = [];

before(async () => {
  redis = await startRedis();
  sim = await startSim({ apiKey: KEY, seed: 25, rateLimit: 0 });
});
after(async () => {
  for (const f of cleanup.reverse()) { try { await f(); } catch {} }
  await sim?.stop();
  await redis?.stop();
});

async function daemon(prefix, name) {
  const d = await startDaemon({
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrl, apiKey: KEY,
    env: {
      STATUSRELAY_REDIS_PREFIX: prefix,
      STATUSRELAY_UPSTREAM_PING_INTERVAL: '1s', STATUSRELAY_UPSTREAM_PING_TIMEOUT: '3s',
      STATUSRELAY_RETRY_SCHEDULE: '0s,200ms,400ms',
      STATUSRELAY_SETTLED_WATCH: '2s', STATUSRELAY_WAITING_TTL: '3s',
      STATUSRELAY_FAILURE_TAIL: '2s', STATUSRELAY_STUCK_AFTER: '2s',
      STATUSRELAY_STREAM_TOKEN: TOK,
    },
    name,
  });
  cleanup.push(() => d.stop());
  return d;
}

async function hook(d, filters, opts = {}) {
  const rx = await startReceiver(opts);
  cleanup.push(() => rx.stop());
  const r = await d.post('/v1/webhooks', { url: rx.url('/h'), ...(filters ? { filters } : {}) });
  assert.equal(r.status, 201, r.text);
  return { rx, id: r.body.id, secret: r.body.secret, filters: r.body.filters };
}

const scripted = (d, path, extra) => trackScripted(sim, d, path, extra);

async function advanceTo(d, id, status) {
  await sim.control(`/requests/${id}/advance`, {});
  return waitStatus(d, id, status);
}

/** Every delivery attempt a receiver got, parsed, in arrival order. */
function received(rx) {
  return rx.records().filter((x) => x.body).map((x) => ({ ...JSON.parse(x.body), headers: x.headers, raw: x.body }));
}

/** One body per event id (retries carry the same webhook-id and bytes). */
function distinct(list) {
  const m = new Map();
  for (const b of list) if (!m.has(b.headers['webhook-id'])) m.set(b.headers['webhook-id'], b);
  return [...m.values()];
}

const keyOf = (b) => `${b.event} ${b.event === 'endpoint.disabled' ? b.data.webhookId : b.data.requestId}`;

test('each event type is created exactly once by two daemons, across a kill -9, and routed by filters.events', async () => {
  const prefix = 'etypes1';
  const d1 = await daemon(prefix, 'etypes-d1');
  const d2 = await daemon(prefix, 'etypes-d2');
  // validation: known types only, a 400 naming the key
  const bad = await d1.post('/v1/webhooks', { url: 'http://127.0.0.1:9/x', filters: { events: ['request.updated'] } });
  assert.equal(bad.status, 400, bad.text);
  assert.match(bad.text, /filters\.events\[0\]/);
  const notList = await d1.post('/v1/webhooks', { url: 'http://127.0.0.1:9/x', filters: { events: 'request.stuck' } });
  assert.equal(notList.status, 400, notList.text);
  assert.match(notList.text, /filters\.events/);

  // the CLI names types too (webhooks add --events), and answers a bad one with the 400
  const run = promisify(execFile);
  const cliEnv = { env: { ...process.env, STATUSRELAY_ADMIN_URL: d1.url } };
  const viaCli = await run(BIN, ['webhooks', 'add', 'http://127.0.0.1:9/cli', '--events', 'request.stuck,endpoint.disabled', '--json'], cliEnv);
  const cliId = JSON.parse(viaCli.stdout).id;
  assert.deepEqual((await d1.get(`/v1/webhooks/${cliId}`)).body.filters, { events: ['request.stuck', 'endpoint.disabled'] });
  await assert.rejects(run(BIN, ['webhooks', 'add', 'http://127.0.0.1:9/cli', '--events', 'stuck'], cliEnv),
    (e) => /filters\.events\[0\]/.test(e.stderr + e.stdout));
  assert.equal((await d1.del(`/v1/webhooks/${cliId}`)).status, 204);

  const plain = await hook(d1); // default: request.status.updated only
  const all = await hook(d2, { events: TYPES });
  assert.deepEqual(all.filters.events, TYPES);
  const typedOnly = await hook(d1, { events: ['request.watch.ended', 'endpoint.disabled'] });
  const gone = await hook(d1, { events: TYPES }, { def: 410 }); // disabled on its first delivery

  // dashboards (on d2, which lives on): a broad subscription naming types, a default one
  const dTyped = client(d2.wsUrl);
  const dDefault = client(d2.wsUrl);
  for (const c of [dTyped, dDefault]) { cleanup.push(() => c.close()); await c.ready; }
  const badSub = client(d2.wsUrl);
  cleanup.push(() => badSub.close());
  await badSub.ready;
  const refused = await subscribed(badSub, sub({ events: 'request.ended' }, { token: TOK }));
  assert.equal(refused.type, 'error', JSON.stringify(refused));
  assert.match(refused.message ?? JSON.stringify(refused), /event type/);
  assert.equal((await subscribed(dTyped, sub({ events: TYPES.slice(1) }, { token: TOK, snapshotLimit: 0 }))).status, 'success');
  assert.equal((await subscribed(dDefault, sub(null, { token: TOK, snapshotLimit: 0 }))).status, 'success');

  const rFinal = await scripted(d1, ['waiting', 'pending', 'success']);
  const dId = client(d2.wsUrl);
  cleanup.push(() => dId.close());
  await dId.ready;
  assert.equal((await subscribed(dId, sub({ id: rFinal }, { token: TOK }))).status, 'success');
  const rAbandoned = await scripted(d2, ['waiting', 'pending']);
  const rStuck = await scripted(d1, ['waiting', 'pending', 'success']);
  const rTail = await scripted(d2, ['waiting', 'failure', 'refund']);
  const rUntracked = await scripted(d1, ['waiting', 'pending']);
  for (const id of [rFinal, rAbandoned, rStuck, rTail, rUntracked]) await waitStatus(d1, id, 'waiting');
  await advanceTo(d1, rFinal, 'pending');
  await advanceTo(d1, rFinal, 'success');
  await advanceTo(d1, rStuck, 'pending');
  await advanceTo(d1, rTail, 'failure');
  assert.equal((await d1.del(`/v1/requests/${rUntracked}`)).status, 204);

  // the 410 endpoint is disabled by its first delivery
  await until(async () => (await d1.get(`/v1/webhooks/${gone.id}`)).body?.enabled === false, { msg: '410 endpoint disabled' });
  // kill -9 one daemon while the windows run; the other decides alone
  d1.proc.child.kill('SIGKILL');
  const want = [
    `request.watch.ended ${rFinal}`, `request.watch.ended ${rAbandoned}`, `request.watch.ended ${rTail}`,
    `request.watch.ended ${rUntracked}`, `request.stuck ${rStuck}`, `endpoint.disabled ${gone.id}`,
  ];
  await until(() => {
    const have = new Set(distinct(received(all.rx)).map(keyOf));
    return want.every((k) => have.has(k));
  }, { timeoutMs: 20000, msg: `every typed event at the all-types endpoint: ${want.join(', ')}` });
  // a restarted daemon (same Redis) and a few more sweeps add nothing
  const d3 = await daemon(prefix, 'etypes-d3');
  await new Promise((r) => setTimeout(r, 3000));

  const got = distinct(received(all.rx));
  const typed = got.filter((b) => b.event !== 'request.status.updated');
  const counts = {};
  for (const b of typed) counts[keyOf(b)] = (counts[keyOf(b)] ?? 0) + 1;
  for (const k of want) assert.equal(counts[k], 1, `${k} exactly once: ${JSON.stringify(counts)}`);
  // no other watch.ended / stuck than those (rTail's failure may also be stuck: at most once)
  for (const [k, n] of Object.entries(counts)) assert.equal(n, 1, `${k} once`);
  console.log(`# typed events at the all-types endpoint: ${JSON.stringify(counts)}`);

  // bodies: signed (official library), reasons, state, ordering
  const wh = new Webhook(all.secret);
  for (const b of got) {
    const v = wh.verify(b.raw, b.headers);
    assert.equal(v.event, b.event);
    assert.ok(TYPES.includes(b.event));
  }
  const ended = (id) => typed.find((b) => b.event === 'request.watch.ended' && b.data.requestId === id);
  assert.equal(ended(rFinal).data.reason, 'final');
  assert.equal(ended(rFinal).data.status, 'success');
  assert.equal(ended(rAbandoned).data.reason, 'abandoned');
  assert.equal(ended(rAbandoned).data.status, 'waiting');
  assert.equal(ended(rTail).data.reason, 'failure_tail');
  assert.equal(ended(rTail).data.failReason, 'UNKNOWN');
  assert.equal(ended(rUntracked).data.reason, 'untracked');
  const stuck = typed.find((b) => b.event === 'request.stuck' && b.data.requestId === rStuck);
  assert.equal(stuck.data.status, 'pending');
  const pendingAt = got.find((b) => b.event === 'request.status.updated' && b.data.requestId === rStuck && b.data.status === 'pending');
  assert.equal(stuck.data.stuckSince, pendingAt.timestamp, 'stuck since its last status change');
  assert.ok(stuck.timestamp >= stuck.data.stuckSince + 2000);
  const dis = typed.find((b) => b.event === 'endpoint.disabled');
  assert.deepEqual(Object.keys(dis.data), ['webhookId', 'url', 'reason', 'at']);
  assert.equal(dis.data.webhookId, gone.id);
  assert.equal(dis.data.url, gone.rx.url('/h'));
  assert.equal(dis.data.reason, 'gone');
  // per-request order: the watch.ended comes after the request's last status event, next seq
  const all2 = received(all.rx);
  for (const id of [rFinal, rAbandoned, rTail]) {
    const mine = all2.filter((b) => b.data.requestId === id);
    const last = mine.filter((b) => b.event === 'request.status.updated').pop();
    const e = mine.findIndex((b) => b.event === 'request.watch.ended');
    assert.ok(mine.indexOf(last) < e, `${id.slice(0, 10)}: watch.ended after the last status event`);
    assert.ok(mine[e].statusrelay.seq > last.statusrelay.seq);
  }
  // the default endpoint received none of them; the typed-only one no status event
  const plainGot = distinct(received(plain.rx));
  assert.ok(plainGot.length >= 5, `status events at the default endpoint: ${plainGot.length}`);
  assert.deepEqual([...new Set(plainGot.map((b) => b.event))], ['request.status.updated']);
  const typedGot = distinct(received(typedOnly.rx)).map(keyOf).sort();
  assert.deepEqual(typedGot, want.filter((k) => !k.startsWith('request.stuck')).sort());
  // the disabled endpoint got its one status delivery attempt(s) and nothing of its own disable
  assert.ok(received(gone.rx).every((b) => b.event !== 'endpoint.disabled'));

  // a status change after the watch ended goes on at the next seq (the typed event took one)
  // and the state record stays readable
  const st = (await d2.get(`/v1/requests/${rFinal}`)).body;
  assert.equal(st.status, 'success');
  assert.equal(st.watch, 'ended');
  assert.equal(st.seq, ended(rFinal).statusrelay.seq);

  // listed in GET /v1/events with their type
  const evs = (await d2.get(`/v1/events?requestId=${rFinal}`)).body.events;
  const le = evs.filter((e) => e.event === 'request.watch.ended');
  assert.equal(le.length, 1, JSON.stringify(evs));
  assert.equal(le[0].eventId, ended(rFinal).headers['webhook-id']);
  assert.equal(le[0].data.reason, 'final');
  const allEvs = (await d2.get('/v1/events?limit=1000')).body.events;
  const de = allEvs.filter((e) => e.event === 'endpoint.disabled');
  assert.equal(de.length, 1);
  assert.equal(de[0].requestId, null);
  assert.equal(de[0].data.webhookId, gone.id);

  // dashboards: the typed subscription got each typed event once (and no status event), the
  // default and the id subscriptions status events only
  const framesTyped = await until(() => {
    const f = dTyped.frames.filter((x) => x.event);
    return want.every((k) => f.some((x) => keyOf(x) === k)) && f;
  }, { msg: 'typed frames on the dashboard' });
  const fk = framesTyped.map(keyOf);
  assert.equal(new Set(fk).size, fk.length, `each typed frame once: ${fk.join(', ')}`);
  assert.ok(framesTyped.every((x) => x.event !== 'request.status.updated'));
  const wf = framesTyped.find((x) => x.event === 'request.watch.ended' && x.data.requestId === rFinal);
  assert.equal(wf.data.reason, 'final');
  assert.equal(wf.statusrelay.eventId, ended(rFinal).headers['webhook-id']);
  assert.ok(dDefault.frames.some((x) => x.event === 'request.status.updated'));
  assert.deepEqual([...new Set(dDefault.frames.filter((x) => x.event).map((x) => x.event))], ['request.status.updated']);
  assert.deepEqual([...new Set(dId.frames.filter((x) => x.event).map((x) => x.event))], ['request.status.updated']);
  // resumable: a typed frame's streamId resumes after it
  const dRes = client(d2.wsUrl);
  cleanup.push(() => dRes.close());
  await dRes.ready;
  const firstTyped = framesTyped[0];
  assert.equal((await subscribed(dRes, sub({ events: TYPES.slice(1) }, { token: TOK, lastEventId: firstTyped.statusrelay.streamId, snapshotLimit: 0 }))).status, 'success');
  const resumed = await until(() => {
    const f = dRes.frames.filter((x) => x.event).map(keyOf);
    return f.length >= framesTyped.length - 1 && f;
  }, { msg: 'resumed typed frames' });
  assert.deepEqual(resumed, fk.slice(1));

  // counted by the fan-out that read them (d1, killed, may have read the endpoint.disabled and
  // the watch.ended events written before the kill: those counts died with it)
  const typedCount = {};
  for (const d of [d2, d3]) {
    const t = await (await fetch(`${d.url}/metrics`)).text();
    for (const m of t.matchAll(/^statusrelay_webhook_fanout_typed_events_total\{type="([^"]+)"\} (\d+)$/gm))
      typedCount[m[1]] = (typedCount[m[1]] ?? 0) + Number(m[2]);
  }
  assert.deepEqual(Object.keys(typedCount).sort(), TYPES.slice(1).sort());
  assert.ok(typedCount['request.watch.ended'] >= 1 && typedCount['request.stuck'] >= 1, JSON.stringify(typedCount));

  // enabled again and disabled again: a second endpoint.disabled, the next seq of that endpoint
  const en = await fetch(`${d2.url}/v1/webhooks/${gone.id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ enabled: true }) });
  assert.equal(en.status, 200, await en.text());
  await scripted(d2, ['waiting']); // a new request's status event for the endpoint: 410 again
  const again = await until(() => distinct(received(all.rx)).filter((b) => b.event === 'endpoint.disabled' && b.data.webhookId === gone.id).length === 2 &&
    distinct(received(all.rx)).filter((b) => b.event === 'endpoint.disabled' && b.data.webhookId === gone.id), { msg: 'second endpoint.disabled' });
  assert.deepEqual(again.map((b) => b.statusrelay.seq), [1, 2]);
  assert.notEqual(again[0].headers['webhook-id'], again[1].headers['webhook-id']);

  // replayable: the same bytes again, marked as a replay
  const rp = await d3.post('/v1/replay', { webhookId: all.id, requestId: rFinal });
  assert.equal(rp.status, 202, rp.text);
  const replayed = await until(() => received(all.rx).find((b) => b.headers['statusrelay-replay'] === '1' &&
    b.event === 'request.watch.ended'), { msg: 'replayed watch.ended' });
  assert.equal(replayed.raw, ended(rFinal).raw);
  assert.equal(replayed.headers['webhook-id'], ended(rFinal).headers['webhook-id']);
});

test('with 3 partitions: endpoint.disabled and watch.ended once each, two daemons', async () => {
  const prefix = 'etypes3';
  const env = { STATUSRELAY_PARTITIONS: '3' };
  const mk = async (name) => {
    const d = await startDaemon({
      redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrl, apiKey: KEY,
      env: {
        STATUSRELAY_REDIS_PREFIX: prefix, STATUSRELAY_RETRY_SCHEDULE: '0s,200ms,400ms',
        STATUSRELAY_SETTLED_WATCH: '2s', STATUSRELAY_WAITING_TTL: '3s', STATUSRELAY_FAILURE_TAIL: '2s',
        STATUSRELAY_STUCK_AFTER: '1h', ...env,
      },
      name,
    });
    cleanup.push(() => d.stop());
    return d;
  };
  const d1 = await mk('etypes3-d1');
  const d2 = await mk('etypes3-d2');
  const all = await hook(d1, { events: TYPES });
  const gones = [];
  for (let i = 0; i < 3; i++) gones.push(await hook(d2, null, { def: 410 }));
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push(await scripted(i % 2 ? d1 : d2, ['waiting', 'pending', 'success']));
  for (const id of ids) { await waitStatus(d1, id, 'waiting'); await advanceTo(d1, id, 'pending'); await advanceTo(d1, id, 'success'); }
  const want = [...ids.map((id) => `request.watch.ended ${id}`), ...gones.map((g) => `endpoint.disabled ${g.id}`)];
  await until(() => {
    const have = new Set(distinct(received(all.rx)).map(keyOf));
    return want.every((k) => have.has(k));
  }, { timeoutMs: 20000, msg: `typed events with 3 partitions: ${want.join(', ')}` });
  await new Promise((r) => setTimeout(r, 2000));
  const counts = {};
  for (const b of distinct(received(all.rx)).filter((x) => x.event !== 'request.status.updated')) counts[keyOf(b)] = (counts[keyOf(b)] ?? 0) + 1;
  assert.deepEqual(Object.keys(counts).sort(), want.sort());
  for (const k of want) assert.equal(counts[k], 1, `${k} once: ${JSON.stringify(counts)}`);
  const wh = new Webhook(all.secret);
  for (const b of received(all.rx)) wh.verify(b.raw, b.headers);
  // the outbox is empty, every partition's stream holds what it should
  const evs = (await d2.get('/v1/events?limit=1000')).body.events;
  assert.equal(evs.filter((e) => e.event === 'endpoint.disabled').length, 3);
  assert.equal(await redisCmd(redis.port, 'LLEN', `{${prefix}}:wdisq`), 0);
  // a record left queued twice (a process died between writing it and removing it, and
  // another flushed it meanwhile): written once
  const at = Date.now();
  const rec = JSON.stringify({ event: { type: 'endpoint.disabled', seq: 1, createdAt: at, webhookId: 'wh_crashed', url: 'http://x.invalid/h', reason: 'failing', at } });
  await redisCmd(redis.port, 'RPUSH', `{${prefix}}:wdisq`, `wh_crashed ${rec}`, `wh_crashed ${rec}`);
  const crashed = await until(() => distinct(received(all.rx)).find((b) => b.event === 'endpoint.disabled' && b.data.webhookId === 'wh_crashed'),
    { msg: 'queued endpoint.disabled flushed' });
  assert.equal(crashed.data.reason, 'failing');
  await until(async () => await redisCmd(redis.port, 'LLEN', `{${prefix}}:wdisq`) === 0, { msg: 'outbox emptied' });
  await new Promise((r) => setTimeout(r, 1500));
  // once in the log (the receiver's deliveries share one webhook-id either way)
  const log = (await d2.get('/v1/events?limit=1000')).body.events;
  assert.equal(log.filter((e) => e.event === 'endpoint.disabled' && e.data.webhookId === 'wh_crashed').length, 1);
  assert.equal(received(all.rx).filter((b) => b.data.webhookId === 'wh_crashed').length, 1);
});

test('a request watched again after the stuck sweep passed its last change is still reported stuck, once', async () => {
  const d = await daemon('etypes4', 'etypes4-d');
  const all = await hook(d, { events: TYPES });
  const id = await scripted(d, ['waiting', 'pending', 'success']);
  await waitStatus(d, id, 'waiting');
  await advanceTo(d, id, 'pending');
  // untracked before it is stuck (2 s): its watch ends, nothing is stuck
  assert.equal((await d.del(`/v1/requests/${id}`)).status, 204);
  await new Promise((r) => setTimeout(r, 3500)); // the sweep's cursor moves past its change
  assert.equal(received(all.rx).filter((b) => b.event === 'request.stuck').length, 0);
  // tracked again: active, unchanged since before the cursor - stuck now, said once
  const t = await d.post('/v1/requests', { requestId: id });
  assert.ok(t.status === 200 || t.status === 201, t.text);
  const stuck = await until(() => received(all.rx).find((b) => b.event === 'request.stuck'), { msg: 'stuck after tracking again' });
  assert.equal(stuck.data.requestId, id);
  await new Promise((r) => setTimeout(r, 2500));
  assert.equal(distinct(received(all.rx)).filter((b) => b.event === 'request.stuck').length, 1);
  const kinds = distinct(received(all.rx)).filter((b) => b.data.requestId === id).map((b) => `${b.event}:${b.statusrelay.seq}`);
  console.log(`# ${kinds.join(' ')}`);
});
