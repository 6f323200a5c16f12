// pack_cost.mjs - Redis time of store/chunk_lib.lua's operations on one request hash of the
// bench's shape (an ended watch with facts: `make bench SCENARIO=state`'s larger hashes, the
// field set and value lengths of one measured with bench/pack_mem.mjs; random bytes): the
// pass's rewrite (chunks.pack), the unpack an apply or a facts write does first
// (chunks.unpack), and a read of the record and the facts (chunks.hmget). Each measured call is
// an EVALSHA on a hash put back by a RESTORE in an EVAL before it; INFO commandstats' evalsha
// usec / calls. Compares chunk_lib.lua as it is with another version of it (an argument: the
// file of an older commit, e.g. `git show 2c6756f:store/chunk_lib.lua > /tmp/old_chunk_lib.lua`).
// Usage: node bench/pack_cost.mjs [OLD_CHUNK_LIB] (prints one JSON line; ROUNDS, default 2000)
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRedis } from '../tests/integration/lib/stack.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const ROUNDS = Number(process.env.ROUNDS ?? 2000);
const lib = (f) => fs.readFileSync(f, 'utf8');
const recLib = lib(path.join(here, '../store/rec_lib.lua'));

// the hash: fields and value lengths of a bench hash with the larger facts (13 chunks)
const SHAPE = `
local function rnd(n, s) local t = {} for i = 1, n do t[i] = string.char((i * s + 17) % 256) end return table.concat(t) end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'rec', 'r' .. rnd(280, 7), 'fx', 'z' .. rnd(640, 13), 'ix', rnd(36, 5),
  'tl', '1764213600000-0,1a2b3c4d-0,2b', 'wb', '1764213600123', 'fxf', '1764213600456', 'first', '1764213600001',
  'chg', '1764213600002', 'cx', '1764213500003', 'cf', '1764213600004', 'src', 'feed:req', 'status', 'success',
  'watch', 'ended', 'tev', '3:411', 'seq', '3', 'fxs', '2', 'trk', '1', 'fk', '1', 'wu', '', 'pt', '')
`;

async function measure(redis, chunkLib, name) {
  const L = chunkLib + recLib;
  const k = '{pc}:req:x', kw = '{pc}:whole', kp = '{pc}:packed';
  // the whole hash (a hashtable) and the packed one, DUMPed once
  await redis.cmd('EVAL', SHAPE, 1, kw);
  await redis.cmd('EVAL', `${L}\n${SHAPE}\nchunks.pack(KEYS[1], rec_drop)`, 1, kp);
  const enc = await redis.cmd('OBJECT', 'ENCODING', kp);
  const usage = Number(await redis.cmd('MEMORY', 'USAGE', kp, 'SAMPLES', '0'));
  const restore = "redis.call('RESTORE', KEYS[1], 0, redis.call('DUMP', KEYS[2]), 'REPLACE')";
  const ops = {
    pack: [kw, `${L}\nreturn chunks.pack(KEYS[1], rec_drop) and 1 or 0`],
    unpack: [kp, `${L}\nreturn chunks.unpack(KEYS[1]) and 1 or 0`],
    read: [kp, `${L}\nlocal h = chunks.hmget(KEYS[1], {'rec', 'fx', 'seq'}) return #h[1] + #h[2]`],
  };
  const out = { name, encoding: enc, memoryUsage: usage };
  for (const [op, [from, src]] of Object.entries(ops)) {
    const sha = await redis.cmd('SCRIPT', 'LOAD', src);
    await redis.cmd('CONFIG', 'RESETSTAT');
    for (let i = 0; i < ROUNDS; i++) {
      await redis.cmd('EVAL', restore, 2, k, from);
      await redis.cmd('EVALSHA', sha, 1, k);
    }
    const m = /calls=(\d+),usec=(\d+)/.exec(await redis.cmd('INFO', 'commandstats'));
    const s = (await redis.cmd('INFO', 'commandstats')).split('\r\n').find((l) => l.startsWith('cmdstat_evalsha:'));
    const [, calls, usec] = /calls=(\d+),usec=(\d+)/.exec(s) ?? m;
    out[`${op}Us`] = Math.round((Number(usec) / Number(calls)) * 10) / 10;
  }
  return out;
}

const redis = await startRedis();
try {
  const res = [await measure(redis, lib(path.join(here, '../store/chunk_lib.lua')), 'this version')];
  if (process.argv[2]) res.push(await measure(redis, lib(process.argv[2]), process.argv[2]));
  console.log(JSON.stringify({ rounds: ROUNDS, results: res }));
} finally {
  await redis.stop();
}
