// rec_pack.test.mjs - the request hash of an ended watch packed by the record pass (issue 24,
// store/chunk_lib.lua, store/rec_lib.lua; STATUSRELAY_COMPRESS_RECORDS, on by default): values
// over 64 B (the deflated record, the facts, search's "ix") in chunks of at most 64 B, the
// hash rewritten, so that Redis keeps it a listpack with its defaults (hash-max-listpack-value
// 64); every reader answers the same bytes as before the pass (GET /v1/requests/{id}, the
// listing, search, the dashboard snapshot); a reversal applied on a packed hash gets the next
// seq and previousStatus and the hash is packed again when its watch has ended again; the
// facts scripts read and merge a chunked fx; binary values survive; the pass's rewrite loses to
// an apply in between; the retention sweep removes a packed request with its index entries.
// Real redis-server (defaults), the simulator, daemons on loopback; some 40 s.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';
import { trackScripted, waitStatus } from './lib/requests.mjs';
import { client, sub, subscribed } from './lib/dash_client.mjs';

const KEY = 'rec-pack-key';
let redis, sim;
const cleanup = [];

before(async () => {
  redis = await startRedis();
  sim = await startSim({ apiKey: KEY, seed: 11, rateLimit: 0 });
});
after(async () => {
  for (const f of cleanup.reverse()) { try { await f(); } catch {} }
  await sim?.stop();
  await redis?.stop();
});

async function daemon(prefix, env = {}) {
  const d = await startDaemon({
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrl, apiKey: KEY,
    env: {
      STATUSRELAY_REDIS_PREFIX: prefix, STATUSRELAY_SETTLED_WATCH: '2s',
      STATUSRELAY_FAILURE_TAIL: '2s', ...env,
    },
    name: `pack-${prefix}`,
  });
  cleanup.push(() => d.stop());
  return d;
}

/** store/<name>.lua with its "-- #include x.lua" lines pasted (relay/common/embed.pl). */
function script(name) {
  const src = fs.readFileSync(path.resolve('../store', name), 'utf8');
  return src.replace(/^-- #include (\S+)$/mg, (_, f) => script(f));
}

/** Every field of hash k with its length in bytes (HSTRLEN: binary values count by bytes). */
async function sizes(k) {
  const f = await redis.cmd('HKEYS', k);
  const o = {};
  for (const x of f) o[x] = await redis.cmd('HSTRLEN', k, x);
  return o;
}

/** What the readers answer about request id (daemon d, dashboard client c). */
async function views(d, c, id, inTx) {
  const snapAt = c.frames.length;
  assert.equal((await subscribed(c, sub({ id }))).status, 'success');
  const snap = await c.wait((f) => c.frames.indexOf(f) >= snapAt && f.statusrelay?.snapshot, 'snapshot');
  const { _at, publishedAt, ...frame } = snap;
  c.send({ type: 'unsubscribe', event: 'request.status.updated', filters: { id } });
  return {
    get: (await d.get(`/v1/requests/${id}`)).text,
    list: (await d.get('/v1/requests?limit=50')).text,
    search: (await d.get(`/v1/requests?q=${inTx}`)).text,
    frame: JSON.stringify(frame),
  };
}

test('an ended watch\'s hash is packed to a listpack and every reader answers the same bytes', async () => {
  const prefix = 'rp1', P = `{${prefix}}`;
  // written as before (the setting off): the hashes of ended watches as a version before kept them
  const a = await daemon(prefix, { STATUSRELAY_COMPRESS_RECORDS: 'false' });
  // tracked with metadata over 64 B (chunked too: "meta")
  const meta = { orderId: `order-${'7'.repeat(40)}`, customer: `customer-${'c'.repeat(40)}` };
  const id = (await sim.control('/requests', { path: ['waiting', 'pending', 'success'], stepMs: 0, autoHashes: true })).id;
  assert.equal((await a.post('/v1/requests', { requestId: id, metadata: meta })).status, 201);
  const rev = await trackScripted(sim, a, ['waiting', 'pending', 'success', 'failure']);
  for (const x of [id, rev]) {
    await waitStatus(a, x, 'waiting');
    await sim.control(`/requests/${x}/advance`, {});
    await waitStatus(a, x, 'pending');
    await sim.control(`/requests/${x}/advance`, {});
    await waitStatus(a, x, 'success');
  }
  const k = `${P}:req:${id}`, kr = `${P}:req:${rev}`;
  for (const x of [k, kr]) {
    await until(async () => await redis.cmd('HGET', x, 'watch') === 'ended' && await redis.cmd('HEXISTS', x, 'fx') === 1,
      { timeoutMs: 20000, msg: `${x}: watch ended, facts` });
  }
  assert.equal(await redis.cmd('OBJECT', 'ENCODING', k), 'hashtable');
  const c = client(a.wsUrl);
  cleanup.push(() => c.close());
  await c.ready;
  const inTx = (await a.get(`/v1/requests/${id}`)).body.inTxHashes[0];
  const was = await views(a, c, id, inTx);
  assert.ok(JSON.parse(was.get).request?.fees, 'facts in GET');
  assert.deepEqual(JSON.parse(was.get).metadata, meta);
  assert.ok(JSON.parse(was.search).requests.some((r) => r.requestId === id), was.search);
  c.close();
  await a.stop();

  // this version, the default setting: the pass deflates the records and packs the hashes
  const b = await daemon(prefix);
  for (const x of [k, kr]) {
    await until(async () => await redis.cmd('HEXISTS', x, 'ck') === 1, { timeoutMs: 30000, msg: `${x} packed` });
    assert.equal(await redis.cmd('OBJECT', 'ENCODING', x), 'listpack');
    const s = await sizes(x);
    for (const [f, n] of Object.entries(s)) assert.ok(n <= 64, `${x} ${f}: ${n} B`);
    assert.ok(!('wu' in s) && !('pt' in s), `unneeded fields dropped: ${Object.keys(s)}`);
    assert.match(await redis.cmd('HGET', x, 'ck'), /\brec\b/);
    assert.match(await redis.cmd('HGET', x, 'ck'), /\bfx\b/);
  }
  assert.match(await redis.cmd('HGET', k, 'ck'), /\bmeta\b/);
  const c2 = client(b.wsUrl);
  cleanup.push(() => c2.close());
  await c2.ready;
  assert.deepEqual(await views(b, c2, id, inTx), was);
  // tracked again with new metadata: the hash is unpacked first (track.lua), then written
  const meta2 = { orderId: `order-${'8'.repeat(70)}` };
  assert.ok([200, 201].includes((await b.post('/v1/requests', { requestId: id, metadata: meta2 })).status));
  assert.equal(await redis.cmd('HEXISTS', k, 'ck'), 0);
  assert.deepEqual((await b.get(`/v1/requests/${id}`)).body.metadata, meta2);
  assert.equal((await b.get(`/v1/requests/${id}`)).body.requestId, id);

  // a reversal of the packed request: the next seq, previousStatus, and packed again once its
  // watch (the failure tail, 2 s) has ended
  const seq = Number(await redis.cmd('HGET', kr, 'seq'));
  await sim.control(`/requests/${rev}/advance`, {});
  assert.ok([200, 201].includes((await b.post('/v1/requests', { requestId: rev })).status));
  const fail = await waitStatus(b, rev, 'failure', 15000);
  assert.equal(fail.seq, seq + 1);
  const ev = await until(async () => {
    const all = await redis.cmd('XRANGE', `${P}:events`, '-', '+');
    for (const [, f] of all) {
      const o = {};
      for (let i = 0; i < f.length; i += 2) o[f[i]] = f[i + 1];
      if (o.rid === rev && JSON.parse(o.rec).status === 'failure') return JSON.parse(o.rec);
    }
    return null;
  }, { msg: 'failure event' });
  assert.equal(ev.seq, seq + 1);
  assert.equal(ev.previousStatus, 'success');
  await until(async () => await redis.cmd('HGET', kr, 'watch') === 'ended' && await redis.cmd('HEXISTS', kr, 'ck') === 1,
    { timeoutMs: 30000, msg: 'packed again' });
  assert.equal(await redis.cmd('OBJECT', 'ENCODING', kr), 'listpack');
  const g = (await b.get(`/v1/requests/${rev}`)).body;
  assert.equal(g.status, 'failure');
  assert.ok(g.seq >= seq + 1, `seq ${g.seq}`);
  assert.ok(g.request?.fees, 'facts still read');
  await b.stop();

  // the retention sweep: packed requests go with their chunks and index entries
  await daemon(prefix, { STATUSRELAY_REQUEST_RETENTION: '1s' });
  await until(async () => await redis.cmd('EXISTS', k, kr) === 0, { timeoutMs: 30000, msg: 'swept' });
  assert.equal(await redis.cmd('ZCARD', `${P}:ct`), 0);
  assert.equal(await redis.cmd('HLEN', `${P}:ix`), 0);
});

test('chunks are binary-safe; readers join them; a write unpacks the hash first', async () => {
  const lib = script('chunk_lib.lua') + script('rec_lib.lua');
  const tag = '{rp2}', k = `${tag}:req:x`;
  // binary values of every byte (with "\0" first), over and under 64 B; packed, joined, unpacked
  const r = await redis.cmd('EVAL', `${lib}
    local function bin(n, s) local t = {} for i = 1, n do t[i] = string.char((i * s) % 256) end return table.concat(t) end
    local want = {rec = 'r' .. bin(300, 7), fx = '\\0' .. bin(500, 13), fx3 = bin(65, 3), ix = bin(64, 5),
                  seq = '4', watch = 'ended', wu = '', pt = '', status = 'success'}
    redis.call('DEL', KEYS[1], '${tag}:rzq')
    for f, v in pairs(want) do redis.call('HSET', KEYS[1], f, v) end
    local enc0 = redis.call('OBJECT', 'ENCODING', KEYS[1])
    local packed = chunks.pack(KEYS[1], rec_drop)
    local enc1 = redis.call('OBJECT', 'ENCODING', KEYS[1])
    local bad = {}
    for f, v in pairs(want) do
      local got = chunks.get(KEYS[1], f)
      if (f == 'wu' or f == 'pt') then if got then bad[#bad + 1] = f end
      elseif got ~= v then bad[#bad + 1] = f end
    end
    local h = chunks.hmget(KEYS[1], {'rec', 'fx', 'seq', 'nope'})
    if h[1] ~= want.rec or h[2] ~= want.fx or h[3] ~= '4' or h[4] then bad[#bad + 1] = 'hmget' end
    local ck = redis.call('HGET', KEYS[1], 'ck')
    local n = redis.call('HLEN', KEYS[1])
    chunks.unpack(KEYS[1])
    for f, v in pairs(want) do
      if f ~= 'wu' and f ~= 'pt' and redis.call('HGET', KEYS[1], f) ~= v then bad[#bad + 1] = 'unpacked ' .. f end
    end
    return {enc0, packed and 1 or 0, enc1, ck, n, redis.call('HLEN', KEYS[1]), table.concat(bad, ','),
            redis.call('ZSCORE', '${tag}:rzq', 'x') or 'none'}`, 1, k);
  assert.equal(r[0], 'hashtable');
  assert.equal(r[1], 1);
  assert.equal(r[2], 'listpack');
  // ck: the chunked fields with their whole lengths, in stream order
  assert.deepEqual(r[3].split(' ').sort(), ['fx3:65', 'fx:501', 'rec:301']);
  // 7 fields kept, ck, one stream of the rests (rec 239 + fx 439 + fx3 3 = 681 B) in 11 parts of 63 B
  assert.equal(r[4], 7 + 1 + 11);
  assert.equal(r[5], 7);
  assert.equal(r[6], '', `wrong values: ${r[6]}`);
  assert.equal(r[7], '0', 'an ended watch unpacked is queued for the pass');
  // a value written whole since (an older version's apply) is read as it is, chunks or not
  const r2 = await redis.cmd('EVAL', `${lib}
    redis.call('DEL', KEYS[1])
    redis.call('HSET', KEYS[1], 'rec', 'r' .. string.rep('a', 200), 'watch', 'ended')
    chunks.pack(KEYS[1], rec_drop)
    redis.call('HSET', KEYS[1], 'rec', '{"x":1}')
    local a = chunks.get(KEYS[1], 'rec')
    -- and a "\\0"-leading value of a field "ck" does not name (search's binary ix)
    redis.call('HSET', KEYS[1], 'ix', '\\0\\2abc')
    return {a, chunks.get(KEYS[1], 'ix') == '\\0\\2abc' and 1 or 0}`, 1, k);
  assert.deepEqual(r2, ['{"x":1}', 1]);
  // a Redis with hash-max-listpack-value 2048 (docs/operations.md "Redis memory") keeps the
  // hash whole: no chunks (they would only cost bytes), the unneeded fields still dropped
  await redis.cmd('CONFIG', 'SET', 'hash-max-listpack-value', '2048');
  try {
    const r3 = await redis.cmd('EVAL', `${lib}
      redis.call('DEL', KEYS[1])
      redis.call('HSET', KEYS[1], 'rec', 'r' .. string.rep('a', 200), 'fx', 'z' .. string.rep('b', 500),
                 'watch', 'ended', 'wu', '', 'pt', '')
      local p = chunks.pack(KEYS[1], rec_drop)
      return {p and 1 or 0, redis.call('OBJECT', 'ENCODING', KEYS[1]), redis.call('HLEN', KEYS[1]),
              chunks.get(KEYS[1], 'fx') == 'z' .. string.rep('b', 500) and 1 or 0,
              redis.call('EXISTS', '${tag}:ckp')}`, 1, k);
    assert.deepEqual(r3, [1, 'listpack', 3, 1, 0]);
  } finally {
    await redis.cmd('CONFIG', 'SET', 'hash-max-listpack-value', '64');
  }
});

test('facts are read and merged on a packed hash; the pass loses to an apply in between', async () => {
  const lib = script('chunk_lib.lua') + script('rec_lib.lua');
  const tag = '{rp3}', k = `${tag}:req:x`;
  const fx = 'z' + 'f'.repeat(400), old = 'd' + 'o'.repeat(150);
  const setup = async () => redis.cmd('EVAL', `${lib}
    redis.call('DEL', KEYS[1], '${tag}:rzq')
    redis.call('HSET', KEYS[1], 'rec', 'r' .. string.rep('q', 200), 'seq', '5', 'watch', 'ended',
               'status', 'success', 'fx', ARGV[1], 'fxs', '3', 'fxo', '2', 'fx2', ARGV[2], 'chg', '1')
    return chunks.pack(KEYS[1], rec_drop) and 1 or 0`, 1, k, fx, old);
  assert.equal(await setup(), 1);
  assert.equal(await redis.cmd('OBJECT', 'ENCODING', k), 'listpack');
  // facts_get: whole values
  const got = await redis.cmd('EVAL', script('facts_get.lua'), 1, k);
  assert.deepEqual(got, [fx, 0, '2', old]);
  // facts_at: the version of seq 2 (fx2 and fx, oldest first)
  assert.deepEqual(await redis.cmd('EVAL', script('facts_at.lua'), 1, k, 1, 2), [[old, fx]]);
  // facts_put: the compare-and-set on the whole value; the hash is unpacked, then written
  const nfx = 'z' + 'n'.repeat(300);
  const put = await redis.cmd('EVAL', script('facts_put.lua'), 1, k, fx, nfx, '', '', '', '');
  assert.equal(put[0], 1);
  assert.equal(await redis.cmd('HGET', k, 'fx'), nfx);
  assert.equal(await redis.cmd('HGET', k, 'fx3'), fx);
  assert.equal(await redis.cmd('HGET', k, 'fx2'), old);
  assert.equal(await redis.cmd('HEXISTS', k, 'ck'), 0);
  assert.equal(await redis.cmd('ZSCORE', `${tag}:rzq`, 'x'), '0', 'queued to be packed again');
  // the pass's step: packs it again (rec_scan.lua: deflated already, not packed)
  const scan = await redis.cmd('EVAL', script('rec_scan.lua'), 2, `${tag}:unwatch`, `${tag}:rzq`, tag, 10, '1');
  assert.deepEqual(scan, [0, [], []]);
  assert.equal(await redis.cmd('OBJECT', 'ENCODING', k), 'listpack');
  assert.deepEqual(await redis.cmd('EVAL', script('facts_get.lua'), 1, k), [nfx, 1, '3', fx]);

  // the pass's write (rec_put.lua "c") after an apply wrote: kept as the apply left it
  const plain = '{"requestId":"x","status":"success","seq":5,"pad":"' + 'p'.repeat(200) + '"}';
  await redis.cmd('DEL', k);
  await redis.cmd('HSET', k, 'rec', plain, 'seq', '5', 'watch', 'ended', 'wu', '', 'fx', fx);
  const applied = plain.replace('"seq":5', '"seq":6');
  await redis.cmd('HSET', k, 'rec', applied, 'seq', '6', 'watch', 'settled');
  const runPut = (...it) => redis.cmd('EVAL', script('rec_put.lua'), 1, `${tag}:rzq`, tag, Date.now(), 1000, ...it);
  assert.deepEqual(await runPut('c', 'x', '5', plain, 'r' + 'z'.repeat(100)), [0, 0]);
  assert.equal(await redis.cmd('HGET', k, 'rec'), applied);
  assert.equal(await redis.cmd('HEXISTS', k, 'ck'), 0);
  assert.equal(await redis.cmd('HGET', k, 'wu'), '');
  // nothing in between: deflated and packed in the same step
  await redis.cmd('HSET', k, 'rec', plain, 'seq', '5', 'watch', 'ended');
  assert.deepEqual(await runPut('c', 'x', '5', plain, 'r' + 'z'.repeat(100)), [1, 0]);
  assert.equal(await redis.cmd('OBJECT', 'ENCODING', k), 'listpack');
  assert.deepEqual(await redis.cmd('EVAL', script('apply_read.lua'), 1, k), ['r' + 'z'.repeat(100)]);
  assert.equal(await redis.cmd('HEXISTS', k, 'wu'), 0);
});

test('a settled request read by the feed with its facts packs into the 1,280 B listpack class', async () => {
  // the bench's shape (make bench SCENARIO=state): requests of the key at success, read by the
  // changes feed with their facts, their watches ended, records deflated, hashes packed. Keys
  // of the default prefix ("{statusrelay}:req:<id>", as the bench's): MEMORY USAGE 1,416 B is a
  // listpack in jemalloc's 1,280 B class, 1,672 B one just over it (class 1,536). One chunk
  // stream a hash (chunk_lib.lua) instead of "<field>~<n>" parts of each value: on 65785ee..
  // 2c6756f about a third of these hashes (the larger facts, 13 chunks) were 1,672 B.
  const fsim = await startSim({ apiKey: KEY, seed: 5, rateLimit: 0 });
  cleanup.push(() => fsim.stop());
  const N = 30, SPAN = 3600 * 1000, P = '{statusrelay}';
  await fsim.control('/requests', { count: N, lifecycle: 'success', spanMs: SPAN, agoMs: 60000 });
  const d = await startDaemon({
    redisUrl: redis.url, apiUrl: fsim.url, wsUrl: fsim.wsUrl, apiKey: KEY, name: 'pack-feed',
    env: { STATUSRELAY_DISCOVER: 'true', STATUSRELAY_DISCOVER_INTERVAL: '1s', STATUSRELAY_DISCOVER_LOOKBACK: '10m',
      STATUSRELAY_SETTLED_WATCH: '1s' },
  });
  cleanup.push(() => d.stop());
  const t0 = Date.now();
  const bf = await d.post('/v1/backfill', { since: t0 - SPAN - 600000, until: t0 });
  assert.equal(bf.status, 202, bf.text);
  await until(async () => (await d.get(`/v1/backfill/${bf.body.backfillId}`)).body?.done, { timeoutMs: 60000, msg: 'backfill' });
  const ids = await redis.cmd('ZRANGE', `${P}:ct`, 0, -1);
  assert.equal(ids.length, N);
  await until(async () => {
    for (const id of ids) if (await redis.cmd('HEXISTS', `${P}:req:${id}`, 'ck') !== 1) return false;
    return Number(await redis.cmd('ZCARD', `${P}:rzq`)) === 0;
  }, { timeoutMs: 60000, stepMs: 500, msg: 'every hash packed' });
  const usage = {};
  let parts = 0;
  for (const id of ids) {
    const k = `${P}:req:${id}`;
    assert.equal(await redis.cmd('OBJECT', 'ENCODING', k), 'listpack');
    assert.ok(await redis.cmd('HEXISTS', k, 'fx'), `${id}: facts`);
    const u = Number(await redis.cmd('MEMORY', 'USAGE', k, 'SAMPLES', '0'));
    usage[u] = (usage[u] ?? 0) + 1;
    // the chunks: "1".."n" (one stream a hash), "<field>~<n>" before
    parts = Math.max(parts, (await redis.cmd('HKEYS', k)).filter((f) => /^\d+$|~\d+$/.test(f)).length);
  }
  assert.ok(parts >= 12, `the larger facts are among them (${parts} parts at most)`);
  for (const u of Object.keys(usage)) assert.ok(Number(u) <= 1416, `MEMORY USAGE of the packed hashes: ${JSON.stringify(usage)}`);
  // and they read as before: GET has the facts of the feed's item
  const g = (await d.get(`/v1/requests/${ids[0]}`)).body;
  assert.equal(g.status, 'success');
  assert.ok(g.request?.fees, 'facts read from the packed hash');
});
