// cluster.mjs - a real Redis Cluster on loopback for tests: N masters (default 3) with
// `replicas` replicas each (redis-server --cluster-enabled yes, then redis-cli --cluster
// create --cluster-yes), waited for until every node says cluster_state:ok and every replica
// is in sync. stop() kills every node and removes its directory.
//
//   const cl = await startCluster({ masters: 3, replicas: 1 });
//   cl.url([port])          redis-cluster://127.0.0.1:<port>  (STATUSRELAY_REDIS_URL)
//   await cl.slotOf(key)    CLUSTER KEYSLOT
//   await cl.ownerOf(slot)  { port, id } of the master serving the slot now
//   await cl.replicaOf(id)  port of a replica of that master
//   await cl.cmd(port, ...) one command to one node
//   await cl.spreadPrefix(base, n)  a prefix whose n partition slots sit on n masters
//   await cl.migrateSlot(slot, from) move a slot to another master (ASK, TRYAGAIN, MOVED)
//   await cl.keysOn(port, match)     every key of one node matching a SCAN pattern
//   partitionOf(id, n)               the partition of a request id (store/keys.c)
//   partTag(prefix, k, n)            partition k's hash tag (spread tags: store/keys.c)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, startProcess, waitPort, until } from './proc.mjs';
import { redisCmd } from './resp.mjs';

let seq = 0;

/** CRC16-XMODEM of a string's bytes (Redis Cluster's key hash, store/cluster_slot.c). */
export function crc16(str) {
  let c = 0;
  for (const b of Buffer.from(str)) {
    c ^= b << 8;
    for (let i = 0; i < 8; i++) c = (c & 0x8000 ? (c << 1) ^ 0x1021 : c << 1) & 0xffff;
  }
  return c;
}

/** The partition of a request id: CRC16-XMODEM of its bytes mod n (store/keys.c). */
export function partitionOf(id, n) {
  return crc16(id) % n;
}

/** The hash tag of partition k of n in a deployment recorded with the spread tags (every
 * deployment made since them; store/keys.c key_spread_tag): "{prefix:p<k>.<x>}", x the
 * smallest whose slot is in the middle half of the k-th of n equal slot ranges. n = 1:
 * "{prefix}". plainTag: the tags of a deployment recorded before ("{prefix:p<k>}"). */
export function partTag(prefix, k, n) {
  if (n <= 1) return `{${prefix}}`;
  const lo = Math.floor((4 * k + 1) * 16384 / (4 * n)), hi = Math.floor((4 * k + 3) * 16384 / (4 * n));
  for (let x = 0; x < 1e7; x++) {
    const slot = crc16(`${prefix}:p${k}.${x}`) & 0x3fff;
    if (slot >= lo && slot < hi) return `{${prefix}:p${k}.${x}}`;
  }
  throw new Error(`no spread tag for ${prefix} ${k}/${n}`);
}
export const plainTag = (prefix, k, n) => (n <= 1 ? `{${prefix}}` : `{${prefix}:p${k}}`);

/** Parse CLUSTER NODES text into [{ id, port, flags, master, slots: [[lo, hi]...] }]. */
export function parseNodes(text) {
  return text.trim().split('\n').map((line) => {
    const f = line.split(' ');
    const port = Number(/:(\d+)@/.exec(f[1])[1]);
    const slots = f.slice(8).filter((s) => /^\d/.test(s))
      .map((s) => s.split('-').map(Number)).map((r) => (r.length === 1 ? [r[0], r[0]] : r));
    return { id: f[0], port, flags: f[2].split(','), master: f[3], slots };
  });
}

/** args: more redis-server arguments for every node (the bench: its AOF settings). */
export async function startCluster({ masters = 3, replicas = 1, nodeTimeoutMs = 2000, args: extra = [] } = {}) {
  const n = masters * (1 + replicas);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sr-cluster-'));
  const nodes = [];
  const stopAll = async () => {
    await Promise.all(nodes.map((x) => x.proc.stop('SIGKILL')));
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < n; i++) {
      const port = await freePort();
      const d = path.join(dir, String(port));
      fs.mkdirSync(d);
      const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', d, '--save', '',
        '--appendonly', 'no', '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf',
        '--cluster-node-timeout', String(nodeTimeoutMs), '--protected-mode', 'yes', ...extra];
      nodes.push({ port, proc: startProcess(`cluster-${port}-${seq++}`, 'redis-server', args) });
    }
    for (const x of nodes) await waitPort(x.port);
    const create = spawnSync('redis-cli', ['--cluster', 'create',
      ...nodes.map((x) => `127.0.0.1:${x.port}`), '--cluster-replicas', String(replicas),
      '--cluster-yes'], { encoding: 'utf8', timeout: 60000 });
    if (create.status !== 0) throw new Error(`redis-cli --cluster create: ${create.stdout}${create.stderr}`);
    await until(async () => {
      for (const x of nodes) {
        const info = await redisCmd(x.port, 'CLUSTER', 'INFO');
        if (!/cluster_state:ok/.test(info) || !new RegExp(`cluster_known_nodes:${n}\\b`).test(info)) return false;
      }
      // every replica attached and in sync (a manual failover needs it)
      for (const x of nodes) {
        const info = await redisCmd(x.port, 'INFO', 'replication');
        if (/role:slave/.test(info) && !/master_link_status:up/.test(info)) return false;
      }
      return true;
    }, { timeoutMs: 30000, stepMs: 200, msg: 'cluster_state:ok on every node' });
  } catch (e) {
    await stopAll();
    throw e;
  }
  const cmd = (port, ...a) => redisCmd(port, ...a);
  const cl = {
    dir, ports: nodes.map((x) => x.port), cmd,
    url: (port = nodes[0].port) => `redis-cluster://127.0.0.1:${port}`,
    /** Ports of the nodes neither killed nor paused. */
    alive: () => nodes.filter((x) => !x.paused && x.proc.child.exitCode === null && x.proc.child.signalCode === null).map((x) => x.port),
    async nodes(port = cl.alive()[0]) { return parseNodes(await cmd(port, 'CLUSTER', 'NODES')); },
    async slotOf(key) { return Number(await cmd(cl.alive()[0], 'CLUSTER', 'KEYSLOT', key)); },
    /** The master serving slot, as every node agrees (waits until they do). */
    async ownerOf(slot) {
      return until(async () => {
        let owner = null;
        for (const p of cl.alive()) {
          const m = (await cl.nodes(p)).find((x) => x.flags.includes('master') && !x.flags.includes('fail') &&
            x.slots.some(([lo, hi]) => slot >= lo && slot <= hi));
          if (!m || (owner && owner.id !== m.id)) return null;
          owner = m;
        }
        return owner;
      }, { timeoutMs: 20000, stepMs: 100, msg: `one agreed owner of slot ${slot}` });
    },
    async replicaOf(id) {
      const r = (await cl.nodes()).find((x) => x.master === id && x.flags.includes('slave'));
      if (!r) throw new Error(`no replica of ${id}`);
      return r.port;
    },
    /** Freeze one node (SIGSTOP: connections stay open, nothing is answered) / thaw it. */
    pause: (port) => { const x = nodes.find((y) => y.port === port); x.paused = true; x.proc.child.kill('SIGSTOP'); },
    resume: (port) => { const x = nodes.find((y) => y.port === port); x.paused = false; x.proc.child.kill('SIGCONT'); },
    /** A prefix base<i> whose n partition tags (partTag) hash to slots of n different
     * masters (withReplicas: each of them has a replica now; with n masters split evenly
     * base0 already spreads: the spread tags' point). Returns { prefix, slots,
     * owners: the master of each partition, deployment: the master of {prefix} }. */
    async spreadPrefix(base, n = 3, { withReplicas = false } = {}) {
      for (let i = 0; i < 500; i++) {
        const prefix = `${base}${i}`;
        const slots = [], owners = [];
        for (let k = 0; k < n; k++) {
          slots.push(await cl.slotOf(partTag(prefix, k, n)));
          owners.push(await cl.ownerOf(slots[k]));
        }
        if (new Set(owners.map((x) => x.id)).size !== n) continue;
        if (withReplicas && (await Promise.all(owners.map((o) => cl.replicaOf(o.id).catch(() => 0)))).includes(0)) continue;
        return { prefix, slots, owners, deployment: await cl.ownerOf(await cl.slotOf(`{${prefix}}`)) };
      }
      throw new Error(`no prefix ${base}<i> spreading ${n} partitions over ${n} masters`);
    },
    /** Move one slot from its master to another (to, or the first other master) with the
     * primitives redis-cli --cluster reshard uses (SETSLOT IMPORTING/MIGRATING, MIGRATE in
     * batches of 5 with a pause, SETSLOT NODE on every master), so a client meets ASK and
     * TRYAGAIN while keys move, then MOVED. Returns { to, moved: keys moved }. */
    async migrateSlot(slot, from, to) {
      // the masters as each node says itself (a view may lag behind a failover just made)
      const masters = [];
      for (const port of cl.alive()) {
        const role = await cmd(port, 'ROLE');
        if (Array.isArray(role) && role[0] === 'master') masters.push({ port, id: await cmd(port, 'CLUSTER', 'MYID') });
      }
      to = to ?? masters.find((x) => x.id !== from.id);
      assert.equal(await cmd(to.port, 'CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', from.id), 'OK');
      assert.equal(await cmd(from.port, 'CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', to.id), 'OK');
      let moved = 0;
      for (let round = 0; round < 1000; round++) {
        const keys = await cmd(from.port, 'CLUSTER', 'GETKEYSINSLOT', String(slot), '5');
        if (keys.length === 0) break;
        const r = await cmd(from.port, 'MIGRATE', '127.0.0.1', String(to.port), '', '0', '5000', 'KEYS', ...keys);
        assert.ok(!(r instanceof Error), `MIGRATE: ${r?.message}`);
        moved += keys.length;
        await new Promise((res) => setTimeout(res, 5)); // clients run against a half-moved slot
      }
      for (const m of [to, ...masters.filter((x) => x.id !== to.id)])
        assert.equal(await cmd(m.port, 'CLUSTER', 'SETSLOT', String(slot), 'NODE', to.id), 'OK');
      return { to, moved };
    },
    /** Every key of the node at port matching pattern (SCAN, bounded). */
    async keysOn(port, pattern) {
      const out = [];
      let cursor = '0';
      for (let i = 0; i < 10000; i++) {
        const [next, keys] = await cmd(port, 'SCAN', cursor, 'MATCH', pattern, 'COUNT', '1000');
        out.push(...keys);
        cursor = next;
        if (cursor === '0') return out;
      }
      throw new Error(`SCAN of ${port} did not end`);
    },
    /** Kill one node (SIGKILL). */
    kill: (port) => nodes.find((x) => x.port === port).proc.stop('SIGKILL'),
    stop: stopAll,
  };
  return cl;
}
