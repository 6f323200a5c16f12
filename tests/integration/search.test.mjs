// search.test.mjs - search (DESIGN "Search", docs/search.md): GET /v1/requests with q, user,
// txHash, referrer, from, to returns exactly the owners, on one Redis with 1 and with 3
// partitions; the indexes go with the request retention; and a q or txHash the relay does not
// know is looked up once through the upstream's term search (the simulator's /requests/v3
// ?term=), the request found tracked and returned, its facts (user, referrer, createdAt)
// indexed. And on a real 3-master Redis Cluster with 3 partitions on three masters: every
// index entry on its request's partition's master, searches gathered over the three.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { BIN, until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';
import { ingest, rid } from './lib/hooks.mjs';
import { ridsOverPartitions, partitionOf, partTag } from './lib/partitions.mjs';
import { startCluster } from './lib/cluster.mjs';

// The text-form {P}:ix field of an index entry "<kind>:<value>" (store/search_lib.lua
// search_field; versions before 65785ee's successor): "<kind>#" and the first 16 hex digits of
// the entry's SHA-1.
const ixd = (e) => crypto.createHash('sha1').update(e).digest('hex').slice(0, 16);
const ixf = (e) => `${e.slice(0, e.indexOf(':'))}#${ixd(e)}`;
// The binary form (search_fbin): the field "\n" and the digest's 8 bytes in the bucket hash
// {P}:ix:<the digest's first 3 hex digits>, the value 32-byte ids. The tests' Redis client is
// text only, so these scripts convert in Redis: IXB (KEYS[1] the bucket, ARGV[1] the entry)
// answers the entry's ids as "0x.." text, space-separated, "*" (in the zset
// {P}:ix:#<digest>) or nil.
const LUA_FB = `local d = redis.sha1hex(ARGV[1])
local f = '\\n' .. struct.pack('>I4I4', tonumber(string.sub(d, 1, 8), 16), tonumber(string.sub(d, 9, 16), 16))
local function hex(b) return string.format('0x%08x%08x%08x%08x%08x%08x%08x%08x', struct.unpack('>I4I4I4I4I4I4I4I4', b)) end
`;
const IXB = `${LUA_FB}local v = redis.call('HGET', KEYS[1], f)
if not v or v == '*' then return v end
local t = {}
for i = 1, #v - 31, 32 do t[#t + 1] = hex(string.sub(v, i, i + 31)) end
return table.concat(t, ' ')`;
const ixbucket = (ix, e) => `${ix}:${ixd(e).slice(0, 3)}`;
const ixb = (cmd, ix, e) => cmd('EVAL', IXB, 1, ixbucket(ix, e), e);

const KEY = 'search-key';
let redis, sim;
const cleanup = [];

before(async () => {
  redis = await startRedis();
  sim = await startSim({ apiKey: KEY, seed: 24, rateLimit: 0 });
});
after(async () => {
  for (const f of cleanup.reverse()) { try { await f(); } catch {} }
  await sim?.stop();
  await redis?.stop();
});

async function daemon(prefix, env = {}, opts = {}) {
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, env: { STATUSRELAY_REDIS_PREFIX: prefix, ...env },
    name: `search-${prefix}-${Date.now() % 100000}`, ...opts });
  cleanup.push(() => d.stop());
  return d;
}

const hex = (n) => '0x' + crypto.randomBytes(n).toString('hex');
/** A hex string with its letters in mixed case (as a wallet's checksum form would be). */
const mixed = (h) => '0x' + [...h.slice(2)].map((c, i) => (i % 2 ? c.toUpperCase() : c)).join('');

/** One signed upstream webhook observation with hashes, referrer and deposit address. */
function payload({ id, status, updatedAt, inTx = [], outTx = [], referrer = null, dep = null }) {
  return {
    event: 'request.status.updated', timestamp: updatedAt,
    data: {
      status, inTxHashes: inTx, txHashes: outTx, updatedAt, originChainId: 1, destinationChainId: 8453,
      depositAddress: dep, requestId: id, referrer, details: null,
      failReason: 'N/A', refundFailReason: 'N/A',
    },
  };
}

async function send(d, p) {
  let code = 0;
  for (let i = 0; i < 50 && code !== 200; i++) {
    code = await ingest(d, KEY, p).catch(() => 0);
    if (code !== 200) await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(code, 200, `${p.data.requestId} ${p.data.status} accepted`);
}

/** Every id a search lists, following the cursor (page size limit). */
async function search(d, qs, limit = 2) {
  const ids = [];
  let cursor = null;
  for (let pages = 0; pages < 50; pages++) {
    const r = await d.get(`/v1/requests?${qs}&limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`);
    assert.equal(r.status, 200, `${qs}: ${r.text}`);
    ids.push(...r.body.requests.map((o) => o.requestId));
    cursor = r.body.cursor;
    if (!cursor) return ids;
  }
  throw new Error('too many pages');
}
const same = (a, b, msg) => assert.deepEqual([...a].sort(), [...b].sort(), msg);

/** Requests with known hashes (mixed case), referrers and deposit addresses, ingested over
 * waiting -> pending -> success; returns what each owns. */
async function seed(d, ids) {
  const t0 = Date.now();
  const owned = [];
  for (const [i, id] of ids.entries()) {
    const o = {
      id, inTx: mixed(hex(32)), outTx: mixed(hex(32)), depTx: mixed(hex(32)),
      depositor: mixed(hex(20)), address: mixed(hex(20)), referrer: i % 2 ? 'ref.odd' : 'ref-even',
    };
    const dep = { address: o.address, depositor: o.depositor, depositAddressType: 'open', depositTxHash: o.depTx };
    await send(d, payload({ id, status: 'waiting', updatedAt: t0 + i * 10, referrer: o.referrer }));
    await send(d, payload({ id, status: 'pending', updatedAt: t0 + i * 10 + 1, referrer: o.referrer, inTx: [o.inTx], dep }));
    await send(d, payload({ id, status: 'success', updatedAt: t0 + i * 10 + 2, referrer: o.referrer, inTx: [o.inTx], outTx: [o.outTx], dep }));
    const g = await d.get(`/v1/requests/${id}`);
    o.first = g.body.firstSeenAt;
    owned.push(o);
  }
  return owned;
}

async function checkOwners(d, owned) {
  for (const o of owned) {
    same(await search(d, `q=${o.id}`), [o.id], 'q: a request id');
    for (const h of [o.inTx, o.outTx, o.depTx]) {
      same(await search(d, `q=${h.toLowerCase()}`), [o.id], `q: hash ${h} (lower case)`);
      same(await search(d, `txHash=${h.toUpperCase().replace('0X', '0x')}`), [o.id], `txHash ${h} (upper case)`);
    }
    same(await search(d, `q=${o.depositor.toUpperCase().replace('0X', '0x')}`), [o.id], 'q: a wallet (the depositor), case folded');
    same(await search(d, `user=${o.depositor.toLowerCase()}`), [o.id], 'user: the depositor');
    same(await search(d, `q=${o.address}`), [o.id], 'q: the deposit address');
    same(await search(d, `txHash=${o.inTx}&referrer=${o.referrer}`), [o.id], 'AND: hash and its referrer');
    same(await search(d, `txHash=${o.inTx}&referrer=nobody`), [], 'AND: hash and another referrer');
    same(await search(d, `q=${o.outTx}&status=success`), [o.id], 'AND: status');
    same(await search(d, `q=${o.outTx}&status=pending`), [], 'AND: another status');
  }
  for (const ref of ['ref.odd', 'ref-even'])
    same(await search(d, `referrer=${ref}`), owned.filter((o) => o.referrer === ref).map((o) => o.id), `referrer ${ref}, every page`);
  same(await search(d, 'referrer=REF-EVEN'), [], 'referrers are not case folded');
  // creation time: first seen until facts say createdAt; inclusive bounds
  const firsts = owned.map((o) => o.first).sort((a, b) => a - b);
  const lo = firsts[1], hi = firsts[firsts.length - 2];
  const inRange = owned.filter((o) => o.first >= lo && o.first <= hi).map((o) => o.id);
  same(await search(d, `from=${lo}&to=${hi}`), inRange, 'time range alone, every page');
  same(await search(d, `referrer=ref-even&from=${lo}&to=${hi}`),
    owned.filter((o) => o.referrer === 'ref-even' && o.first >= lo && o.first <= hi).map((o) => o.id), 'referrer and time range');
  same(await search(d, `q=${hex(32)}`), [], 'an unknown hash (the upstream does not know it either)');
}

for (const partitions of [1, 3]) {
  test(`search by every kind of hash, wallet (mixed case), referrer and time range: exactly the owners (${partitions} partition${partitions > 1 ? 's' : ''})`, async () => {
    const prefix = `srch${partitions}x${process.pid}`;
    const d = await daemon(prefix, { STATUSRELAY_PARTITIONS: String(partitions) });
    const ids = partitions > 1 ? ridsOverPartitions(`s${partitions}`, 2, partitions) : [rid('a'), rid('b'), rid('c'), rid('d'), rid('e')];
    const owned = await seed(d, ids);
    if (partitions > 1) {
      // each index entry lives in the partition of its request
      for (const o of owned) {
        const tag = partTag(prefix, partitionOf(o.id, partitions), partitions);
        assert.equal(await ixb(redis.cmd, `${tag}:ix`, `tx:${o.inTx.toLowerCase()}`), o.id, `${o.id} in ${tag}`);
      }
    }
    await checkOwners(d, owned);
    // statusrelay find TERM: the owner with its status and hashes; nothing found: exit 3
    const find = (term) => spawnSync(BIN, ['find', term], { encoding: 'utf8', env: { ...process.env, STATUSRELAY_ADMIN_URL: d.url } });
    const f = find(owned[0].outTx.toUpperCase().replace('0X', '0x'));
    assert.equal(f.status, 0, f.stderr);
    assert.match(f.stdout, new RegExp(`^request    ${owned[0].id}$`, 'm'));
    assert.match(f.stdout, /^status     success$/m);
    assert.match(f.stdout, new RegExp(`^out tx     ${owned[0].outTx}`, 'm'));
    assert.match(f.stdout, /^facts      /m);
    const j = spawnSync(BIN, ['find', owned[0].depositor, '--json'], { encoding: 'utf8', env: { ...process.env, STATUSRELAY_ADMIN_URL: d.url } });
    assert.equal(j.status, 0, j.stderr);
    assert.deepEqual(JSON.parse(j.stdout).requests.map((o) => o.requestId), [owned[0].id]);
    const nf = find(hex(32));
    assert.equal(nf.status, 3, nf.stdout + nf.stderr);
    assert.match(nf.stderr, /nothing found/);
    const bad = await d.get('/v1/requests?q=a%20b');
    assert.equal(bad.status, 400, bad.text);
    assert.equal(bad.body.error?.field ?? bad.body.field ?? 'q', 'q');
    assert.equal((await d.get('/v1/requests?from=5&to=4')).status, 400);
    assert.equal((await d.get('/v1/requests?q=x&stuck=true')).status, 400);
  });
}

test('a referrer of 60 requests (past the small list: its own zset) lists every one, over 3 partitions', async () => {
  const prefix = `srchmany${process.pid}`;
  const d = await daemon(prefix, { STATUSRELAY_PARTITIONS: '3' });
  const ids = ridsOverPartitions('many', 20, 3);
  const t0 = Date.now();
  for (const [i, id] of ids.entries())
    await send(d, payload({ id, status: 'pending', updatedAt: t0 + i, referrer: 'shared', inTx: [hex(32)] }));
  same(await search(d, 'referrer=shared', 7), ids, 'every owner, every page');
  const promoted = [];
  for (let p = 0; p < 3; p++)
    if (await ixb(redis.cmd, `${partTag(prefix, p, 3)}:ix`, 'ref:shared') === '*') promoted.push(p);
  assert.ok(promoted.length > 0, 'a partition holding more than 16 moved them to a zset');
});

test('3 partitions on a 3-master Redis Cluster: entries on their partition\'s master, searches return exactly the owners', async () => {
  const cl = await startCluster({ masters: 3, replicas: 0 });
  cleanup.push(() => cl.stop());
  const { prefix, owners: masters } = await cl.spreadPrefix('srchcl', 3);
  const alive = cl.alive();
  const d = await startDaemon({ redisUrl: cl.url(alive[0]), apiKey: KEY, name: `search-cluster-${prefix}`,
    env: { STATUSRELAY_REDIS_PREFIX: prefix, STATUSRELAY_PARTITIONS: '3' } });
  cleanup.push(() => d.stop());
  const owned = await seed(d, ridsOverPartitions('cl', 2, 3));
  for (const o of owned) {
    const k = partitionOf(o.id, 3);
    assert.equal(await ixb((...a) => cl.cmd(masters[k].port, ...a), `${partTag(prefix, k, 3)}:ix`, `tx:${o.outTx.toLowerCase()}`), o.id,
      `${o.id}: its entry on partition ${k}'s master`);
  }
  await checkOwners(d, owned);
  assert.doesNotMatch(d.proc.log(), /level=error|CROSSSLOT|non local key/);
});

test('a wallet with 1010 requests: its index keeps the newest 1000 (no key grows without bound)', async () => {
  const prefix = `srchcap${process.pid}`;
  const d = await daemon(prefix);
  const wallet = mixed(hex(20));
  const ids = Array.from({ length: 1010 }, (_, i) => rid(`cap${i}`));
  const t0 = Date.now();
  for (let i = 0; i < ids.length; i += 10) // 10 at a time, in creation order
    await Promise.all(ids.slice(i, i + 10).map((id, j) => send(d, payload({ id, status: 'waiting', updatedAt: t0 + i + j,
      dep: { address: hex(20), depositor: wallet, depositAddressType: 'open' } }))));
  const key = `{${prefix}}:ix:#${ixd(`w:${wallet.toLowerCase()}`)}`;
  assert.equal(await ixb(redis.cmd, `{${prefix}}:ix`, `w:${wallet.toLowerCase()}`), '*');
  assert.equal(Number(await redis.cmd('ZCARD', key)), 1000, 'capped');
  const found = await search(d, `user=${wallet}`, 500);
  assert.equal(found.length, 1000);
  assert.equal(new Set(found).size, 1000, 'no duplicate over the pages');
  // the oldest went first (the first batches: first seen before the later ones, up to a
  // shared millisecond), and each is still found by its id
  const missing = ids.filter((id) => !found.includes(id));
  assert.equal(missing.length, 10);
  const early = new Set(ids.slice(0, 20));
  assert.ok(missing.every((id) => early.has(id)), 'the oldest dropped');
  const gone = missing[0];
  same(await search(d, `q=${gone}`), [gone]);
});

test('removing a request (the retention sweep) removes its index entries', async () => {
  const prefix = `srchgc${process.pid}`;
  const d = await daemon(prefix, { STATUSRELAY_REQUEST_RETENTION: '2s', STATUSRELAY_SETTLED_WATCH: '1s' });
  const owned = await seed(d, [rid('gc1'), rid('gc2')]);
  assert.ok(Number(await redis.cmd('HSTRLEN', `{${prefix}}:req:${owned[0].id}`, 'ix')) > 0, 'indexed');
  await until(async () => Number(await redis.cmd('ZCARD', `{${prefix}}:ct`)) === 0, { timeoutMs: 20000, msg: 'requests swept' });
  const left = await redis.cmd('KEYS', `{${prefix}}:ix*`);
  assert.deepEqual(left, [], 'no index key left');
  assert.equal(Number(await redis.cmd('ZCARD', `{${prefix}}:ct`)), 0, 'creation-time index empty');
  same(await search(d, `txHash=${owned[0].inTx}&referrer=${owned[0].referrer}`), [], 'not found any more');
});

test('index entries written before the digest fields (main at 52c16ea) are still found, reused and swept', async () => {
  const prefix = `srchold${process.pid}`;
  const d = await daemon(prefix, { STATUSRELAY_REQUEST_RETENTION: '2s', STATUSRELAY_SETTLED_WATCH: '1s' });
  const id = rid('legacy1'), other = rid('legacy2'), R = 'ref.legacy';
  const t0 = Date.now();
  await send(d, payload({ id, status: 'waiting', updatedAt: t0, referrer: R }));
  // the layout the version before wrote: the entry itself as the field and in the own list
  // (in place of the binary field this version wrote)
  const ix = `{${prefix}}:ix`, req = `{${prefix}}:req:${id}`, e = `ref:${R}`;
  assert.equal(await ixb(redis.cmd, ix, e), id);
  assert.equal(await redis.cmd('EVAL', `${LUA_FB}redis.call('HDEL', KEYS[3], f)
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
    local m = redis.call('HGET', KEYS[2], 'ix')
    local i = string.find(m, f, 1, true)
    redis.call('HSET', KEYS[2], 'ix', string.sub(m, 1, i - 1) .. string.sub(m, i + 9) .. ARGV[1] .. '\\n')
    return redis.call('HGET', KEYS[2], 'ix')`, 3, ix, req, ixbucket(ix, e), e, id), `${e}\n`);
  same(await search(d, `referrer=${R}`), [id], 'found under the old field');
  // said again by a later record: kept under the old field, no second field
  await send(d, payload({ id, status: 'pending', updatedAt: t0 + 1, referrer: null }));
  await send(d, payload({ id, status: 'success', updatedAt: t0 + 2, referrer: R }));
  await send(d, payload({ id: other, status: 'success', updatedAt: t0 + 3, referrer: R }));
  assert.equal(await redis.cmd('HGET', ix, e), id, 'the old field keeps its request');
  assert.equal(await ixb(redis.cmd, ix, e), other, 'a new request goes to the binary field');
  assert.equal(await redis.cmd('HGET', req, 'ix'), `${e}\n`, 'no second field for the old request');
  same(await search(d, `referrer=${R}`), [id, other], 'both fields answer, each id once');
  await until(async () => Number(await redis.cmd('ZCARD', `{${prefix}}:ct`)) === 0, { timeoutMs: 20000, msg: 'requests swept' });
  assert.deepEqual(await redis.cmd('KEYS', `{${prefix}}:ix*`), [], 'no index key left');
});

test('index entries are binary (32-byte ids, a request\'s own list under 64 B); entries in the text form of 65785ee are still found, reused and swept', async () => {
  const prefix = `srchbin${process.pid}`;
  const d = await daemon(prefix, { STATUSRELAY_REQUEST_RETENTION: '2s', STATUSRELAY_SETTLED_WATCH: '1s' });
  const ix = `{${prefix}}:ix`, reqk = (id) => `{${prefix}}:req:${id}`;
  const owned = await seed(d, [rid('bin1'), rid('bin2')]);
  for (const o of owned) // in, out and deposit hash, deposit address, depositor, referrer
    assert.equal(Number(await redis.cmd('HSTRLEN', reqk(o.id), 'ix')), 6 * 9, `${o.id}: six 9-byte fields (a listpack value: <= 64 B)`);
  assert.equal(await redis.cmd('EXISTS', ix), 0, 'no text entry');
  const shape = await redis.cmd('EVAL', `local out = {}
    for _, k in ipairs(redis.call('KEYS', ARGV[1])) do
      local a = redis.call('HGETALL', k)
      for i = 1, #a, 2 do out[#out + 1] = #a[i] .. ':' .. #a[i + 1] .. ':' .. redis.call('OBJECT', 'ENCODING', k) end
    end
    return out`, 0, `${ix}:???`);
  assert.equal(shape.length, 12);
  for (const x of shape) assert.equal(x, '9:32:listpack', 'a 9-byte field, one 32-byte id, in a bucket hash (a listpack)');
  for (const o of owned) {
    for (const v of [o.inTx, o.outTx, o.depTx, o.address, o.depositor]) same(await search(d, `q=${v}`), [o.id], `q=${v}`);
    same(await search(d, `referrer=${o.referrer}`), [o.id]);
  }

  // a request indexed by 65785ee: text fields "<kind>#<digest>", text ids, its own list one
  // field a line (written here as that version wrote them)
  const old = rid('txt'), t0 = Date.now();
  const h = hex(32), outTx = hex(32);
  await send(d, payload({ id: old, status: 'waiting', updatedAt: t0 }));
  assert.equal(await redis.cmd('HGET', reqk(old), 'ix'), null, 'nothing indexed yet');
  await redis.cmd('HSET', ix, ixf(`tx:${h}`), old, ixf('ref:ref-even'), old);
  const list = `${ixf(`tx:${h}`)}\n${ixf('ref:ref-even')}\n`;
  await redis.cmd('HSET', reqk(old), 'ix', list);
  same(await search(d, `txHash=${h.toUpperCase().replace('0X', '0x')}`), [old], 'found under its text field');
  same(await search(d, 'referrer=ref-even'), [owned[0].id, old], 'a value in both forms: each id once');
  // said again by its next record: kept in the text form; a new value goes binary
  await send(d, payload({ id: old, status: 'pending', updatedAt: t0 + 1, inTx: [h], referrer: 'ref-even' }));
  assert.equal(await redis.cmd('HGET', reqk(old), 'ix'), list, 'no second field for a value it has');
  assert.equal(await ixb(redis.cmd, ix, `tx:${h}`), null);
  await send(d, payload({ id: old, status: 'success', updatedAt: t0 + 2, inTx: [h], outTx: [outTx], referrer: 'ref-even' }));
  assert.equal(Number(await redis.cmd('HSTRLEN', reqk(old), 'ix')), list.length + 9, 'the text lines and one binary field');
  assert.equal(await ixb(redis.cmd, ix, `tx:${outTx}`), old);
  same(await search(d, `q=${outTx}`), [old]);
  same(await search(d, `txHash=${h}&referrer=ref-even`), [old]);

  // an id of another form than 0x and 64 hex digits is indexed in the text form
  const plain = `plain-${process.pid}.${Date.now()}`, ph = hex(32);
  await send(d, payload({ id: plain, status: 'pending', updatedAt: t0 + 3, inTx: [ph], referrer: 'ref-even' }));
  assert.equal(await redis.cmd('HGET', ix, ixf(`tx:${ph}`)), plain);
  assert.equal(await redis.cmd('HGET', reqk(plain), 'ix'), `${ixf(`tx:${ph}`)}\n${ixf('ref:ref-even')}\n`);
  same(await search(d, `txHash=${ph}`), [plain]);
  same(await search(d, 'referrer=ref-even'), [owned[0].id, old, plain], 'all three forms');

  // the retention sweep removes every form
  await send(d, payload({ id: plain, status: 'success', updatedAt: t0 + 4, inTx: [ph], referrer: 'ref-even' }));
  await until(async () => (await redis.cmd('KEYS', `{${prefix}}:req:*`)).length === 0, { timeoutMs: 30000, msg: 'requests swept' });
  assert.deepEqual(await redis.cmd('KEYS', `{${prefix}}:ix*`), [], 'no index key left');
  same(await search(d, 'referrer=ref-even'), [], 'not found any more');
});

test('a 65785ee process next to this one (STATUSRELAY_OLD_BIN): it misses binary entries, never answers a wrong request, and what it indexes is found and swept', async (t) => {
  const oldBin = process.env.STATUSRELAY_OLD_BIN;
  if (!oldBin) { t.skip('STATUSRELAY_OLD_BIN unset (a build of 65785ee)'); return; }
  const prefix = `srchmix${process.pid}`;
  const d = await daemon(prefix, { STATUSRELAY_REQUEST_RETENTION: '4s', STATUSRELAY_SETTLED_WATCH: '1s' });
  // its settled watches end as fast; it never sweeps (retention: the default)
  const o = await daemon(prefix, { STATUSRELAY_SETTLED_WATCH: '1s' }, { bin: oldBin, name: `search-old-${prefix}` });
  const owned = await seed(d, [rid('mix1'), rid('mix2')]);
  for (const x of owned) {
    for (const v of [x.inTx, x.outTx, x.address, x.depositor]) {
      const got = await search(o, `q=${v}`);
      assert.ok(got.every((id) => id === x.id), `the old process answers no wrong request for ${v}: ${got}`);
    }
  }
  // the old process indexes a new hash of a request this version indexed (its text line
  // appended to the binary fields of "ix") and a request of its own
  const late = hex(32), t0 = Date.now();
  await send(o, payload({ id: owned[0].id, status: 'refund', updatedAt: t0, inTx: [owned[0].inTx], outTx: [late], referrer: owned[0].referrer }));
  same(await search(d, `q=${late}`), [owned[0].id], 'its text entry found here');
  same(await search(d, `q=${owned[0].inTx}`), [owned[0].id], 'the binary entries still found');
  const theirs = rid('mixold'), th = hex(32);
  await send(o, payload({ id: theirs, status: 'success', updatedAt: t0 + 1, inTx: [th], referrer: owned[0].referrer }));
  same(await search(d, `txHash=${th}`), [theirs]);
  same(await search(d, `referrer=${owned[0].referrer}`), [owned[0].id, theirs], 'a value in both forms');
  same(await search(o, `txHash=${th}`), [theirs], 'the old process finds its own');
  assert.doesNotMatch(o.proc.log(), /level=error/);
  await o.stop();
  await until(async () => (await redis.cmd('KEYS', `{${prefix}}:req:*`)).length === 0, { timeoutMs: 30000, msg: 'requests swept' });
  assert.deepEqual(await redis.cmd('KEYS', `{${prefix}}:ix*`), [], 'every form swept');
});

test('a q or txHash the relay does not know is looked up once through the upstream term search; the request is tracked, its facts indexed', async () => {
  const prefix = `srchterm${process.pid}`;
  const d = await daemon(prefix, {}, { apiUrl: sim.url, wsUrl: sim.wsUrl });
  const user = mixed(hex(20));
  const made = await sim.control('/requests', { lifecycle: 'success', user, referrer: 'term-ref', stepMs: 50 });
  const id = made.id;
  // wait for the simulator to reach success (its hashes exist then)
  const v = await until(async () => { const r = await sim.control(`/requests/${id}`); return r.terminal && r.statusV3?.txHashes?.length ? r : null; },
    { timeoutMs: 15000, msg: 'simulated request settled' });
  const inTx = v.statusV3.inTxHashes[0], outTx = v.statusV3.txHashes[0];
  assert.match(inTx, /^0x/, 'an EVM deposit');
  assert.equal((await d.get(`/v1/requests/${id}`)).status, 404, 'the relay never saw it');

  // (f) a txHash the relay does not know: one term lookup, the request tracked and returned
  const r = await d.get(`/v1/requests?txHash=${inTx.toUpperCase().replace('0X', '0x')}`);
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.body.requests.map((o) => o.requestId), [id]);
  assert.equal(r.body.requests[0].tracked, true, 'tracked');
  assert.equal(r.body.requests[0].status, 'success');
  const g = await d.get(`/v1/requests/${id}`);
  assert.equal(g.status, 200);
  assert.equal(g.body.tracked, true);
  same(await search(d, `q=${outTx}`), [id], 'its other hash is indexed too (kept as is: not 0x)');

  // the facts of the item are indexed: user (any case), creation time, referrer - without
  // asking the upstream again
  same(await search(d, `user=${user.toUpperCase().replace('0X', '0x')}`), [id], 'user from facts');
  same(await search(d, `q=${user.toLowerCase()}`), [id], 'q: the wallet');
  const createdAt = v.createdAt;
  same(await search(d, `from=${createdAt}&to=${createdAt}`), [id], 'createdAt from facts');
  same(await search(d, `from=${createdAt + 1}&user=${user}`), [], 'after its createdAt');
  // the simulator's items carry a referrer once it serves the full item (issue 24 facts):
  // indexed from the facts then; until then the status record's referrer is covered above
  const item = await (await fetch(`${sim.url}/requests/v3?id=${id}`, { headers: { 'x-api-key': KEY } })).json();
  if (item.requests?.[0]?.referrer ?? item.requests?.[0]?.data?.referrer)
    same(await search(d, 'referrer=term-ref'), [id], 'referrer from facts');
  const log = d.proc.log();
  assert.equal((log.match(/msg="search term looked up"/g) ?? []).length, 1, 'one term lookup');

  // a wallet the upstream does not know either: one lookup, nothing found, nothing tracked
  const none = await d.get(`/v1/requests?q=${hex(20)}`);
  assert.deepEqual(none.body, { requests: [], cursor: null });
  assert.equal((d.proc.log().match(/msg="search term looked up" found=0/g) ?? []).length, 1);
});

test('term lookups of an anonymous caller (no admin token) stay within its miss rate; a caller with the token is not limited by it', async () => {
  const anon = await daemon(`srchanon${process.pid}`, { STATUSRELAY_ANON_MISS_RATE: '1' }, { apiUrl: sim.url, wsUrl: sim.wsUrl });
  const first = await anon.get(`/v1/requests?q=${hex(32)}`);
  assert.equal(first.status, 200, first.text);
  const r = await fetch(`${anon.url}/v1/requests?txHash=${hex(32)}`);
  const body = await r.json();
  assert.equal(r.status, 429, JSON.stringify(body));
  assert.equal(body.error.code, 'rate_limited');
  assert.match(r.headers.get('retry-after') ?? '', /^\d+$/);
  assert.equal((await anon.get(`/v1/requests?q=${rid('x')}&from=0`)).status, 429, 'an unknown id is a lookup too');
  const admin = await daemon(`srchadm${process.pid}`, { STATUSRELAY_ANON_MISS_RATE: '1', STATUSRELAY_ADMIN_TOKEN: 'search-admin-token-0123456789' },
    { apiUrl: sim.url, wsUrl: sim.wsUrl });
  for (let i = 0; i < 3; i++) {
    const a = await admin.get(`/v1/requests?q=${hex(32)}`);
    assert.equal(a.status, 200, a.text);
    assert.deepEqual(a.body.requests, []);
  }
  assert.equal((admin.proc.log().match(/msg="search term looked up" found=0/g) ?? []).length, 3, 'one upstream call per search');
});
