// apply_keys.test.mjs - the Redis work of one applied event (issue 26, "fewer keys per event";
// store/apply.lua): the request's hash is read once (its watch, metadata, search fields,
// timeline field and the "cx" mark of the creation-time index in one HMGET) and written once
// (the timeline's "tl", the request's search fields "ix" and "cx" go into the same HSET), no
// legacy poll-set lookup for a request that was never tracked by an older version, and the
// creation-time index {P}:ct is written once per request instead of on every event. What an
// older version left (no "cx", not in {P}:ct) is completed by the next event. No {P}:all
// (issue 24, memory): the status set is written on a status change, scored from "cx" (the
// request's {P}:ct score) without a lookup. Real
// redis-server and daemon; the commands are read from MONITOR (the lines the apply script's
// call issues, counted: never timed). The fan-out of an event to several endpoints checks the
// held pairs (store/wh_held.lua) and the existing delivery records (store/wh_fanout.lua) with
// one EXISTS each for the whole batch instead of one command per delivery.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { until } from './lib/proc.mjs';
import { monitor as redisMonitor } from './lib/resp.mjs';
import { ingest, upstreamPayload, rid, startReceiver } from './lib/hooks.mjs';

const KEY = 'apply-keys-test-key';
const P = '{statusrelay}';
const cleanup = [];
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });

async function stack() {
  const redis = await startRedis();
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY });
  cleanup.push(() => d.stop(), () => redis.stop());
  return { redis, d };
}

/** The commands of each apply.lua call that wrote request id: the lines the script issued
 * (MONITOR prints them right after the call, marked "lua"), as [command, key] pairs; calls
 * that issued nothing (an EVALSHA answered NOSCRIPT) left out. */
function applyCalls(lines, id) {
  const out = [];
  let cur = null;
  for (const l of lines) {
    const m = /^\+\d+\.\d+ \[\d+ ([^\]]+)\] "([A-Za-z]+)"(?: "([^"]*)")?/.exec(l);
    if (!m) continue;
    if (m[1] === 'lua') {
      if (cur) cur.push([m[2].toUpperCase(), m[3] ?? '']);
      continue;
    }
    cur = null;
    // apply.lua's call: KEYS start with the events stream, the ct zset, the poll zset
    if (/^EVAL/i.test(m[2]) && l.includes(`"${P}:events" "${P}:ct" "${P}:poll" "${P}:req:${id}"`)) {
      cur = [];
      out.push(cur);
    }
  }
  return out.filter((c) => c.length > 0); // an EVALSHA answered NOSCRIPT issued nothing
}

const send = async (d, p) => assert.equal(await ingest(d, KEY, upstreamPayload(p)), 200);

test('an event reads the request hash once and writes it once; the ct index is written once', async () => {
  const { redis, d } = await stack();
  const mon = await redisMonitor(redis.port, (f) => cleanup.push(f));
  const r = rid('keys');
  const t = Date.now();
  const steps = ['waiting', 'pending', 'submitted', 'success'];
  for (let i = 0; i < steps.length; i++)
    await send(d, { rid: r, status: steps[i], updatedAt: t + i, inTx: ['0x' + 'ab'.repeat(32)] });
  const calls = await until(() => {
    const c = applyCalls(mon.lines(), r);
    return c.length === steps.length && c[steps.length - 1].some(([x]) => x === 'ZADD') ? c : null;
  }, { msg: 'the four apply calls seen by MONITOR' });
  mon.stop();
  const req = `${P}:req:${r}`;
  for (const [i, c] of calls.entries()) {
    const on = (cmd, key) => c.filter(([x, k]) => x === cmd && (key === undefined || k === key)).length;
    assert.equal(on('HMGET', req), 1, `event ${i + 1}: one read of the hash (${JSON.stringify(c)})`);
    assert.equal(on('HGET', req), 0, `event ${i + 1}: no other read of the hash`);
    assert.equal(on('HSET', req), 1, `event ${i + 1}: one write of the hash`);
    assert.equal(on('ZSCORE'), 0, `event ${i + 1}: no legacy poll or ct lookup`);
    assert.equal(on('ZADD', `${P}:ct`), i === 0 ? 1 : 0, `event ${i + 1}: ct written by the first event only`);
    // no {P}:all (issue 24): the status set moves on a status change, scored from "cx"
    assert.equal(on('ZADD', `${P}:all`), 0, `event ${i + 1}: no {P}:all`);
    assert.equal(on('ZADD', `${P}:st:${steps[i]}`), 1, `event ${i + 1}: the status set`);
  }
  // every event of the four: the timeline field in the same HSET, no list command (issue 24)
  for (const [i, c] of calls.entries())
    assert.equal(c.filter(([x]) => x === 'RPUSHX' || x === 'RPUSH').length, 0, `event ${i + 1}: no list command`);
  // what the readers see is unchanged: the timeline in order, the creation time, the search
  assert.equal(await redis.cmd('HGET', req, 'cx'), await redis.cmd('HGET', req, 'first'));
  assert.equal(await redis.cmd('ZSCORE', `${P}:ct`, r), await redis.cmd('HGET', req, 'first'));
  assert.equal(await redis.cmd('ZSCORE', `${P}:st:success`, r), await redis.cmd('HGET', req, 'first'));
  assert.equal(await redis.cmd('EXISTS', `${P}:all`), 0);
  const ev = (await d.get(`/v1/events?requestId=${r}`)).body.events;
  assert.deepEqual(ev.map((e) => e.status), steps);
  assert.deepEqual(ev.map((e) => e.seq), [1, 2, 3, 4]);
  assert.equal(await redis.cmd('EXISTS', `${P}:tl:${r}`), 0, 'four ids fit the hash: no list');
  assert.equal((await redis.cmd('HGET', req, 'tl')).split(',').length, 4);
  const found = (await d.get(`/v1/requests?txHash=${'0x' + 'ab'.repeat(32)}`)).body.requests;
  assert.deepEqual(found.map((x) => x.requestId), [r]);
});

test('a hash an older version wrote (no cx, not in ct) gets both with its next event', async () => {
  const { redis, d } = await stack();
  const r = rid('old');
  const req = `${P}:req:${r}`;
  const t = Date.now();
  await send(d, { rid: r, status: 'waiting', updatedAt: t });
  // as a version before the mark left it: in the hash, not in ct
  await redis.cmd('HDEL', req, 'cx');
  await redis.cmd('ZREM', `${P}:ct`, r);
  await send(d, { rid: r, status: 'pending', updatedAt: t + 1 });
  assert.equal(await redis.cmd('HGET', req, 'cx'), await redis.cmd('HGET', req, 'first'));
  assert.equal(await redis.cmd('ZSCORE', `${P}:ct`, r), await redis.cmd('HGET', req, 'first'));
  const from = Number(await redis.cmd('HGET', req, 'first'));
  const found = (await d.get(`/v1/requests?from=${from}&to=${from}`)).body.requests;
  assert.ok(found.some((x) => x.requestId === r), 'found by its creation time');
  assert.deepEqual((await d.get(`/v1/events?requestId=${r}`)).body.events.map((e) => e.status),
    ['waiting', 'pending']);
});

test('a live fan-out checks held pairs and delivery records with one EXISTS per batch', async () => {
  const { redis, d } = await stack();
  const rx = await startReceiver();
  cleanup.push(() => rx.stop());
  for (let i = 0; i < 3; i++)
    assert.equal((await d.post('/v1/webhooks', { url: rx.url(`/h${i}`) })).status, 201);
  const mon = await redisMonitor(redis.port, (f) => cleanup.push(f));
  const r = rid('fan');
  await send(d, { rid: r, status: 'pending' });
  await until(() => rx.records().length >= 3, { msg: 'three deliveries' });
  // the fan-out's record (wh_fanout.lua) follows the attempts: wait for its XACK
  await until(() => mon.lines().some((l) => / "XACK" /.test(l)), { msg: 'the fan-out committed' });
  const lines = mon.lines();
  mon.stop();
  const lua = (re) => lines.filter((l) => / \[\d+ lua\] /.test(l) && re.test(l));
  const held = lua(new RegExp(`"EXISTS" "\\${P}:order:`));
  assert.equal(held.length, 1, `one EXISTS for the held pairs: ${held.join('\n')}`);
  assert.equal((held[0].match(/:order:/g) || []).length, 3, 'naming the three pairs');
  assert.equal(lua(new RegExp(`"HGET" "\\${P}:dl:`)).length, 0, 'no HGET per delivery record');
  assert.equal(lua(new RegExp(`"EXISTS" "\\${P}:dl:`)).length, 1, 'one EXISTS for the records');
  // and every delivery arrived once
  await new Promise((res) => setTimeout(res, 300));
  assert.deepEqual(rx.records().map((x) => x.path).sort(), ['/h0', '/h1', '/h2']);
});
