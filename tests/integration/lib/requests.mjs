// requests.mjs - a request in the simulator and in a daemon, for tests that advance it by hand.
//
//   const id = await trackScripted(sim, d, ['waiting', 'pending', 'success'])   created, tracked
//   const body = await waitStatus(d, id, 'pending')      GET /v1/requests/{id} once it says so
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
