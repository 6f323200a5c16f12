// requests.mjs - a request in the simulator and in a daemon, for tests that advance it by hand.
//
//   const id = await trackScripted(sim, d, ['waiting', 'pending', 'success'])   created, tracked
//   const body = await waitStatus(d, id, 'pending')      GET /v1/requests/{id} once it says so
//   const n = await countDeflated(redis, keys)          how many of these request hashes hold a deflated record
import assert from 'node:assert/strict';
import { until } from './proc.mjs';

/** Create a hand-advanced request (its statuses in path; extra: more control fields) in the
 * simulator and track it in daemon d. Resolves its id. */
export async function trackScripted(sim, d, path, extra = {}) {
  const r = await sim.control('/requests', { path, stepMs: 0, autoHashes: true, ...extra });
  const t = await d.post('/v1/requests', { requestId: r.id });
  assert.ok(t.status === 201 || t.status === 200, t.text);
  return r.id;
}

/** Wait until d's GET /v1/requests/{id} has status; resolves that body. */
export async function waitStatus(d, id, status, timeoutMs = 10000) {
  return until(async () => {
    const r = await d.get(`/v1/requests/${id}`);
    return r.status === 200 && r.body.status === status ? r.body : null;
  }, { msg: `${id.slice(0, 10)} reaches ${status}`, timeoutMs });
}

/** How many of the request hashes keys hold a deflated record (store/rec.h): "r" and zlib, or,
 * in a hash the record pass packed (store/chunk_lib.lua), its first part "\0" then "r". */
export async function countDeflated(redis, keys) {
  return Number(await redis.cmd('EVAL',
    "local n = 0 for _, k in ipairs(KEYS) do local r = redis.call('HGET', k, 'rec') " +
    'if r and (string.byte(r) == 114 or (string.byte(r) == 0 and string.byte(r, 2) == 114)) ' +
    'then n = n + 1 end end return n', String(keys.length), ...keys));
}
