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
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, startProcess, waitPort, until } from './proc.mjs';
import { redisCmd } from './resp.mjs';

let seq = 0;

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
    /** Kill one node (SIGKILL). */
    kill: (port) => nodes.find((x) => x.port === port).proc.stop('SIGKILL'),
    stop: stopAll,
  };
  return cl;
}

/**
 * A prefix (stem + a number) whose partition tags `{<prefix>:p<k>}`, k = 0..partitions-1,
 * hash to slots of as many different masters as there can be (min(partitions, masters)),
 * with owners[k] = { port, id } the master of partition k; null if none of `tries` does.
 */
export async function prefixOnMasters(cl, partitions = 3, { stem = 'pk', tries = 500 } = {}) {
  const masters = (await cl.nodes()).filter((x) => x.flags.includes('master') && x.slots.length > 0).length;
  const want = Math.min(partitions, masters);
  for (let i = 0; i < tries; i++) {
    const prefix = `${stem}${i}`;
    const owners = [];
    for (let k = 0; k < partitions; k++) owners.push(await cl.ownerOf(await cl.slotOf(`{${prefix}:p${k}}`)));
    if (new Set(owners.map((x) => x.id)).size === want) return { prefix, owners };
  }
  return null;
}
