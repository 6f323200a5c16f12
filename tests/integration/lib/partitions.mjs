// partitions.mjs - request ids by partition (docs/partitions.md: crc16 of the id mod N, the
// function store/keys.c key_partition uses) and ingesting whole lifecycles, for the tests of
// a deployment with STATUSRELAY_PARTITIONS > 1.
import assert from 'node:assert/strict';
import { ingest, upstreamPayload, rid } from './hooks.mjs';
import { partitionOf, partTag, plainTag } from './cluster.mjs';

export { partitionOf, partTag, plainTag };

/** `per` fresh request ids in each of n partitions, partition 0's first. */
export function ridsOverPartitions(tag, per, n = 3) {
  const by = Array.from({ length: n }, () => []);
  for (let i = 0; by.some((x) => x.length < per); i++) {
    const id = rid(`${tag}${i}`);
    if (by[partitionOf(id, n)].length < per) by[partitionOf(id, n)].push(id);
  }
  return by.flat();
}

/** Ingest the statuses (default waiting, pending, success) for each id (retried until 200). */
export async function ingestLifecycles(d, key, ids, statuses = ['waiting', 'pending', 'success']) {
  const t0 = Date.now();
  for (const [i, id] of ids.entries())
    for (const [k, st] of statuses.entries()) {
      let code = 0;
      for (let tries = 0; tries < 100 && code !== 200; tries++) {
        code = await ingest(d, key, upstreamPayload({ rid: id, status: st, updatedAt: t0 + i * 10 + k })).catch(() => 0);
        if (code !== 200) await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(code, 200, `${id} ${st} accepted`);
    }
}
