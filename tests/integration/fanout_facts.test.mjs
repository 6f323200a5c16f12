// fanout_facts.test.mjs - the fan-out skips the request-facts read (store/facts_at.lua) for
// events this process applied whose request had no facts as the event was written (issue 26:
// apply.lua says so in its reply, store/apply.h), and still reads it - the same bytes as
// before - for an event whose request has facts. Exact because a facts version written later
// is the version of a later seq (store/facts_put.lua): such an event never carries it. Real
// redis-server and daemon; facts_at's reads are seen in MONITOR (its "HMGET <req> fx fxs
// fxo"), counted, never timed.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { until } from './lib/proc.mjs';
import { monitor as redisMonitor } from './lib/resp.mjs';
import { ingest, upstreamPayload, rid, startReceiver } from './lib/hooks.mjs';

const KEY = 'fanout-facts-test-key';
const P = '{statusrelay}';
const cleanup = [];
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });

const send = async (d, p) => assert.equal(await ingest(d, KEY, upstreamPayload(p)), 200);
/** facts_at.lua's read of request id's hash, from MONITOR's lines. */
const factsReads = (lines, id) =>
  lines.filter((l) => l.includes(`"HMGET" "${P}:req:${id}" "fx" "fxs" "fxo"`)).length;

test('no facts read for events of requests without facts; an event with facts still carries them', async () => {
  const redis = await startRedis();
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY });
  cleanup.push(() => d.stop(), () => redis.stop());
  const rx = await startReceiver();
  cleanup.push(() => rx.stop());
  assert.equal((await d.post('/v1/webhooks', { url: rx.url('/h') })).status, 201);
  const bodies = () => rx.records().map((x) => JSON.parse(x.body));
  const mon = await redisMonitor(redis.port, (f) => cleanup.push(f));

  // a request without facts: three events, each delivered, none read for facts
  const a = rid('nofx');
  const t = Date.now();
  const steps = ['waiting', 'pending', 'success'];
  for (let i = 0; i < steps.length; i++)
    await send(d, { rid: a, status: steps[i], updatedAt: t + i });
  await until(() => bodies().filter((b) => b.data.requestId === a).length >= 3,
    { msg: 'three deliveries of the request without facts' });
  for (const b of bodies().filter((x) => x.data.requestId === a))
    assert.equal(b.statusrelay.request, undefined, 'no facts in its bodies');

  // a request with facts (written as facts_put.lua would: the version of the next seq)
  const b = rid('fx');
  await send(d, { rid: b, status: 'waiting', updatedAt: t });
  await until(() => bodies().some((x) => x.data.requestId === b), { msg: 'its first delivery' });
  const facts = { user: '0x' + '11'.repeat(20), recipient: '0x' + '22'.repeat(20), createdAt: t,
    referrer: 'test', inTxs: [], outTxs: [], fees: null, route: null };
  const seq = Number(await redis.cmd('HGET', `${P}:req:${b}`, 'seq'));
  await redis.cmd('HSET', `${P}:req:${b}`, 'fx', JSON.stringify(facts), 'fxs', String(seq + 1));
  await send(d, { rid: b, status: 'pending', updatedAt: t + 1 });
  await until(() => bodies().filter((x) => x.data.requestId === b).length >= 2,
    { msg: 'the delivery of its next event' });
  const got = bodies().filter((x) => x.data.requestId === b);
  assert.equal(got[0].statusrelay.request, undefined, 'the event before the facts: none');
  assert.deepEqual(got[1].statusrelay.request, facts, 'the event after: the facts of its seq');

  const lines = mon.lines();
  mon.stop();
  assert.equal(factsReads(lines, a), 0, 'no facts_at read for the request without facts');
  assert.ok(factsReads(lines, b) >= 1, 'the request with facts is read');
});
