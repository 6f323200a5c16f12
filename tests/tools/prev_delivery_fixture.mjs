// prev_delivery_fixture.mjs - writes tests/fixtures/redis/deliveries-v1.rdb: a Redis written by
// the delivery model before the delivery log (every delivery a record, commit 236c94f), for
// integration/delivery_log.test.mjs (the migration test). Run it with the OLD binary:
//   cd tests && STATUSRELAY_BIN=<old statusrelay> STATUSRELAY_HELPERS=<old helpers> \
//     node tools/prev_delivery_fixture.mjs
// What it leaves in Redis (ids in deliveries-v1.json):
//   endpoint A (http://127.0.0.1:47913/a, nothing listening): R1 seq 1 and R2 seq 1 pending
//     (attempts refused, the next due seconds after the save), R1 seq 2 pending behind R1 seq 1;
//   endpoint B (answers 410): R3 seq 1 dead, B disabled;
//   endpoint C (answers 200): R4 seq 1 delivered.
import fs from 'node:fs';
import path from 'node:path';
import { startRedis, startDaemon, redisCmd } from '../integration/lib/stack.mjs';
import { until } from '../integration/lib/proc.mjs';
import { startReceiver, ingest, upstreamPayload, rid } from '../integration/lib/hooks.mjs';

const KEY = 'fixture-api-key';
const redis = await startRedis();
const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, args: ['--retry-schedule', '0s,3s,3s,3s,3s,3s,3s,3s,3s,3s'] });
const rx = await startReceiver({ script: ['/b=410'] });
const R = [rid('m1'), rid('m2'), rid('m3'), rid('m4')];
const mk = async (url, ids) => (await d.post('/v1/webhooks', { url, filters: { requestIds: ids } })).body;
const A = await mk('http://127.0.0.1:47913/a', [R[0], R[1]]);
const B = await mk(rx.url('/b'), [R[2]]);
const C = await mk(rx.url('/c'), [R[3]]);
const send = async (r, status, updatedAt) => {
  if (await ingest(d, KEY, upstreamPayload({ rid: r, status, updatedAt })) !== 200) throw new Error('ingest');
};
const t = Date.now();
await send(R[0], 'pending', t);
await send(R[1], 'pending', t);
await send(R[2], 'pending', t);
await send(R[3], 'pending', t);
await until(async () => (await d.get(`/v1/webhooks/${A.id}/deliveries?state=pending`)).body.deliveries
  .filter((x) => x.attempts.length >= 1).length === 2, { msg: 'A: two first attempts failed' });
await send(R[0], 'success', t + 1000);
await until(async () => (await d.get(`/v1/webhooks/${A.id}/deliveries?state=pending`)).body.deliveries.length === 3, { msg: 'A: 3 pending' });
await until(async () => (await d.get(`/v1/webhooks/${B.id}/deliveries?state=dead`)).body.deliveries.length === 1, { msg: 'B: dead' });
await until(async () => (await d.get(`/v1/webhooks/${C.id}/deliveries?state=delivered`)).body.deliveries.length === 1, { msg: 'C: delivered' });
await d.stop();
await redisCmd(redis.port, 'SAVE');
const out = path.resolve('fixtures/redis');
fs.mkdirSync(out, { recursive: true });
fs.copyFileSync(path.join(redis.dir, 'dump.rdb'), path.join(out, 'deliveries-v1.rdb'));
fs.writeFileSync(path.join(out, 'deliveries-v1.json'), `${JSON.stringify({
  apiKey: KEY, port: 47913, A: A.id, B: B.id, C: C.id, R, secretA: A.secret,
}, null, 2)}\n`);
await rx.stop();
await redis.stop();
console.log('wrote', out);
