// ops.test.mjs - what an operator relies on: settings validation, --print-config,
// --check-config, /metrics accepted by promtool, the CLI against a live daemon, graceful
// shutdown with deliveries in flight, the upstream-websocket lease moving to another process
// after kill -9, and the Docker files checked against `make deps`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { WebSocketServer } from 'ws';
import YAML from 'yaml';
import { BIN, OUT, freePort, until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startReceiver, ingest, upstreamPayload, rid } from './lib/hooks.mjs';

const run = promisify(execFile);
const KEY = 'ops-test-key';
let redis;

before(async () => { redis = await startRedis(); });
after(async () => { await redis?.stop(); });

function serve(args, env = {}) {
  return spawnSync(BIN, ['serve', ...args], { env: { ...process.env, ...env }, encoding: 'utf8' });
}

test('a bad setting stops start-up with one line naming it and exit status 2', () => {
  const cases = [
    [['--poll-interval', 'soon'], {}, 'STATUSRELAY_POLL_INTERVAL'],
    [[], { STATUSRELAY_UPSTREAM_BUDGET: '-3' }, 'STATUSRELAY_UPSTREAM_BUDGET'],
    [['--redis-url', 'http://x'], {}, 'STATUSRELAY_REDIS_URL'],
    [['--http-listen', '0.0.0.0:8080'], {}, 'STATUSRELAY_ADMIN_TOKEN'],
    [['--delivery-lease', '5s', '--delivery-timeout', '10s'], {}, 'STATUSRELAY_DELIVERY_LEASE'],
    [['--retry-schedule', '1s,,x'], {}, 'STATUSRELAY_RETRY_SCHEDULE'],
  ];
  for (const [args, env, name] of cases) {
    const r = serve([...args, '--check-config'], env);
    assert.equal(r.status, 2, `${name}: ${r.stderr}`);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0], new RegExp(name));
  }
});

test('flags win over the environment; --print-config masks secrets; --check-config', () => {
  const r = serve(['--print-config', '--upstream-budget', '77'], {
    STATUSRELAY_UPSTREAM_BUDGET: '55', STATUSRELAY_UPSTREAM_API_KEY: 'super-secret-key',
    STATUSRELAY_ADMIN_TOKEN: 'a-very-long-admin-token',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^STATUSRELAY_UPSTREAM_BUDGET=77$/m);
  assert.match(r.stdout, /^STATUSRELAY_UPSTREAM_API_KEY=\*\*\*\*$/m);
  assert.match(r.stdout, /^STATUSRELAY_ADMIN_TOKEN=\*\*\*\*$/m);
  assert.doesNotMatch(r.stdout, /super-secret-key|a-very-long-admin-token/);
  const c = serve(['--check-config']);
  assert.equal(c.status, 0);
  assert.match(c.stdout, /configuration ok/);
});

test('every subcommand answers --help; unimplemented input is refused', () => {
  for (const cmd of ['serve', 'sim', 'track', 'status', 'webhooks', 'deliveries', 'replay', 'tail']) {
    const r = spawnSync(BIN, [cmd, '--help'], { encoding: 'utf8' });
    assert.equal(r.status, 0, `${cmd} --help: ${r.stderr}`);
    assert.ok(r.stdout.length > 40, `${cmd} --help prints usage`);
  }
  const bad = spawnSync(BIN, ['frobnicate'], { encoding: 'utf8' });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /unknown command/);
});

test('docs/configuration.md documents every setting of serve --help once, and no other', () => {
  // serve --help: "  --flag   STATUSRELAY_NAME" then an indented line ending "(default: X)"
  const help = serve(['--help']).stdout.split('\n');
  const given = new Map();
  help.forEach((l, i) => {
    const m = /^\s+(--[a-z0-9-]+)\s+(STATUSRELAY_[A-Z0-9_]+)\s*$/.exec(l);
    if (m) given.set(m[2], { flag: m[1], def: /\(default: ([^()]*)\)\s*$/.exec(help[i + 1])?.[1] });
  });
  assert.ok(given.size > 30, `settings in serve --help: ${given.size}`);
  // a setting's row: | `STATUSRELAY_NAME` | `--flag` | default | meaning |
  const row = /^\| `(STATUSRELAY_[A-Z0-9_]+)` \| `(--[a-z0-9-]+)` \| ([^|]*) \|/;
  const rows = (file) => fs.readFileSync(path.resolve('..', file), 'utf8').split('\n')
    .map((l) => row.exec(l)).filter(Boolean);
  const documented = new Map();
  for (const [, name, flag, def] of rows('docs/configuration.md')) {
    assert.ok(!documented.has(name), `${name} has two rows in docs/configuration.md`);
    documented.set(name, { flag, def: def.replace(/^derived \((.*)\)$/, '$1').replace(/`/g, '') });
  }
  for (const [name, h] of given) {
    assert.ok(documented.has(name), `docs/configuration.md lacks ${name}`);
    assert.equal(documented.get(name).flag, h.flag, `${name}: flag`);
    assert.equal(documented.get(name).def, h.def, `${name}: default`);
  }
  for (const name of documented.keys()) assert.ok(given.has(name), `${name} is documented but serve --help has no such setting`);
  // exactly one place: no other document has a row for a setting
  const others = ['README.md', ...fs.readdirSync(path.resolve('../docs')).filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`).filter((f) => f !== 'docs/configuration.md')];
  for (const f of others) assert.deepEqual(rows(f).map((m) => m[1]), [], `${f} documents settings: they belong in docs/configuration.md`);
});

test('metrics pass promtool, CLI works end to end, SIGTERM drains deliveries and exits 0', async () => {
  const recv = await startReceiver({ delayMs: 300, def: 204 });
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, env: { STATUSRELAY_REDIS_PREFIX: 'ops1', STATUSRELAY_SHUTDOWN_GRACE: '5s' } });
  const cli = (...args) => run(BIN, args, { env: { ...process.env, STATUSRELAY_ADMIN_URL: d.url } });
  try {
    // webhooks add via the CLI, JSON output for scripts
    const add = JSON.parse((await cli('webhooks', 'add', recv.url('/ops'), '--description', 'ops', '--json')).stdout);
    assert.match(add.id, /^wh_/);
    assert.match(add.secret, /^whsec_/);
    const list = (await cli('webhooks', 'list')).stdout;
    assert.match(list, new RegExp(add.id));
    // track + events through the signed ingest
    const id = rid('ops');
    assert.match((await cli('track', id)).stdout, /tracking 1/);
    const t0 = Date.now();
    for (const [i, st] of ['waiting', 'pending', 'submitted'].entries())
      assert.equal(await ingest(d, KEY, upstreamPayload({ rid: id, status: st, updatedAt: t0 + i })), 200);
    const status = JSON.parse((await cli('status', id, '--json')).stdout);
    assert.equal(status.status, 'submitted');
    assert.deepEqual(status.events.map((e) => e.status), ['waiting', 'pending', 'submitted']);
    const human = (await cli('status', id)).stdout;
    assert.match(human, /status\s+submitted/);
    // not found -> exit 3, one line on stderr
    const nf = await cli('status', rid('missing')).catch((e) => e);
    assert.equal(nf.code, 3);
    assert.equal(nf.stderr.trim().split('\n').length, 1);
    // replay dry run counts
    const dry = JSON.parse((await cli('replay', '--request', id, '--dry-run', '--json')).stdout);
    assert.ok(dry.count >= 0);
    // metrics: promtool must accept the exposition
    const m = await fetch(d.url + '/metrics');
    assert.equal(m.status, 200);
    const text = await m.text();
    for (const name of ['statusrelay_events_total', 'statusrelay_redis_up', 'statusrelay_upstream_http_total'])
      assert.match(text, new RegExp(`^# TYPE ${name} `, 'm'), `${name} present`);
    const prom = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    assert.equal(prom.status, 0, `promtool: ${prom.stdout}${prom.stderr}`);
    // SIGTERM with deliveries in flight (the receiver answers after 300 ms): the process
    // finishes them, records the outcome, leaves no lease behind and exits 0; the rest
    // stays queued and a restarted daemon delivers it, each event exactly once.
    assert.equal(await ingest(d, KEY, upstreamPayload({ rid: id, status: 'success', updatedAt: t0 + 10 })), 200);
    await until(async () => recv.records().length >= 1, { msg: 'first delivery', timeoutMs: 10000 });
    const ex = await d.stop('SIGTERM', 10000);
    assert.equal(ex.code, 0, `exit ${JSON.stringify(ex)}`);
    assert.match(d.proc.log(), /shutting down/);
    assert.equal(await redis.cmd('ZCARD', '{ops1}:inflight'), 0, 'no delivery left leased');
    const d2 = await startDaemon({ redisUrl: redis.url, apiKey: KEY, env: { STATUSRELAY_REDIS_PREFIX: 'ops1' } });
    try {
      await until(() => new Set(recv.records().map((r) => r.id)).size === 4, { msg: '4 events delivered', timeoutMs: 15000 });
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(recv.records().length, 4, 'no duplicate after a graceful restart');
    } finally {
      await d2.stop('SIGKILL');
    }
  } finally {
    await d.stop('SIGKILL');
    await recv.stop();
  }
});

test('the upstream websocket lease: one holder among three; kill -9 moves it within 5 s', async () => {
  const wsPort = await freePort();
  const wss = new WebSocketServer({ port: wsPort, host: '127.0.0.1' });
  const conns = new Set();
  let opened = 0;
  wss.on('connection', (ws) => {
    opened++;
    conns.add(ws);
    ws.on('close', () => conns.delete(ws));
    ws.send(JSON.stringify({ type: 'connection', status: 'ready', data: { id: 'x' } }));
  });
  const opts = { redisUrl: redis.url, wsUrl: `ws://127.0.0.1:${wsPort}/`, env: { STATUSRELAY_REDIS_PREFIX: 'ops2', STATUSRELAY_LEADER_LEASE: '2s' } };
  const ds = [await startDaemon(opts), await startDaemon(opts), await startDaemon(opts)];
  try {
    await until(() => conns.size === 1, { msg: 'one upstream connection', timeoutMs: 10000 });
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(conns.size, 1, 'still exactly one connection');
    const states = await Promise.all(ds.map(async (d) => (await d.get('/readyz')).body.lease));
    assert.deepEqual(states.filter((s) => s === 'held').length, 1, JSON.stringify(states));
    const holder = states.indexOf('held');
    const t0 = Date.now();
    const openedBefore = opened;
    await ds[holder].stop('SIGKILL');
    await until(() => conns.size === 0, { msg: 'the dead holder\'s connection closes' });
    await until(() => opened > openedBefore && conns.size === 1, { msg: 'takeover', timeoutMs: 8000 });
    const after = await Promise.all(ds.filter((_, i) => i !== holder).map(async (d) => (await d.get('/readyz')).body.lease));
    assert.deepEqual(after.sort(), ['held', 'standby'], 'exactly one new holder');
    const took = Date.now() - t0;
    console.log(`# lease takeover after kill -9: ${took} ms`);
    assert.ok(took < 5000, `takeover ${took} ms`);
  } finally {
    for (const d of ds) await d.stop('SIGKILL');
    wss.close();
  }
});

test('Docker files: multi-stage bookworm, non-root, healthcheck; compose services and env', () => {
  const df = fs.readFileSync(path.resolve('../docker/Dockerfile'), 'utf8');
  const stages = [...df.matchAll(/^FROM\s+(\S+)\s+AS\s+(\S+)/gim)].map((m) => [m[1], m[2]]);
  assert.ok(stages.length >= 2, 'multi-stage');
  for (const [img] of stages) assert.match(img, /bookworm/);
  assert.match(df, /^USER\s+(?!root)\S+/m);
  assert.match(df, /^HEALTHCHECK[\s\S]*?\/healthz/m);
  // every -dev library of `make deps` that the binary links is installed in the build stage
  const mk = fs.readFileSync(path.resolve('../Makefile'), 'utf8');
  const debs = /DEBS\s*:=([\s\S]*?)\n\S/.exec(mk)[1].replace(/\\\n/g, ' ').split(/\s+/).filter(Boolean);
  const libs = debs.filter((p) => /^lib.*-dev$/.test(p) && !/cmocka|clang/.test(p));
  assert.ok(libs.length >= 6);
  for (const p of libs) assert.ok(df.includes(p), `Dockerfile build stage lacks ${p}`);
  const compose = YAML.parse(fs.readFileSync(path.resolve('../docker/compose.yaml'), 'utf8'));
  const s = compose.services;
  assert.deepEqual(Object.keys(s).sort(), ['prometheus', 'redis', 'sim', 'statusrelay']);
  assert.deepEqual(s.prometheus.profiles, ['monitoring']);
  assert.ok(s.prometheus.volumes.some((v) => v.startsWith('./alerts.yml:')), 'prometheus loads the alert rules');
  assert.ok(s.redis.command.includes('--appendonly') && s.redis.command.includes('yes'));
  assert.ok(s.redis.volumes.some((v) => v.endsWith(':/data')));
  assert.ok(compose.volumes && 'redis-data' in compose.volumes);
  assert.deepEqual(s.sim.profiles, ['demo']);
  const env = s.statusrelay.environment;
  for (const k of ['STATUSRELAY_REDIS_URL', 'STATUSRELAY_HTTP_LISTEN', 'STATUSRELAY_WS_LISTEN', 'STATUSRELAY_ADMIN_TOKEN'])
    assert.ok(k in env, `compose sets ${k}`);
  assert.match(env.STATUSRELAY_REDIS_URL, /redis:\/\/redis:6379/);
  assert.ok(s.statusrelay.ports.some((p) => p.endsWith(':8080')));
  assert.ok(s.statusrelay.healthcheck.test.join(' ').includes('/healthz'));
  // every STATUSRELAY_ name used in compose is a real setting
  const known = serve(['--print-config']).stdout;
  for (const k of Object.keys(env)) assert.match(known, new RegExp(`^${k}=`, 'm'));
});

test('three daemons under load, kill -9 of the websocket holder: takeover < 5 s, every event delivered', async () => {
  const { startSim } = await import('./lib/sim.mjs');
  const sim = await startSim({ apiKey: KEY, seed: 5, rateLimit: 0 });
  const recv = await startReceiver({ def: 204 });
  const opts = {
    redisUrl: redis.url, apiUrl: sim.url, wsUrl: sim.wsUrl, apiKey: KEY,
    // short delivery leases: a delivery the killed process had claimed is sent again by
    // another within seconds (with the default 60 s lease the wait below would time out)
    env: { STATUSRELAY_REDIS_PREFIX: 'ops3', STATUSRELAY_LEADER_LEASE: '2s', STATUSRELAY_RETRY_SCHEDULE: '0s,200ms,500ms,1s,2s',
      STATUSRELAY_DELIVERY_TIMEOUT: '2s', STATUSRELAY_CONNECT_TIMEOUT: '1s', STATUSRELAY_DELIVERY_LEASE: '3s' },
  };
  const ds = [await startDaemon(opts), await startDaemon(opts), await startDaemon(opts)];
  try {
    const wh = await ds[0].post('/v1/webhooks', { url: recv.url('/all') });
    assert.equal(wh.status, 201, wh.text);
    await until(async () => (await Promise.all(ds.map(async (d) => (await d.get('/readyz')).body.upstreamWebsocket))).includes('ready'),
      { msg: 'one daemon holds the upstream websocket' });
    const states = await Promise.all(ds.map(async (d) => (await d.get('/readyz')).body.lease));
    const holder = states.indexOf('held');
    // load: observations through every daemon's ingest while the holder dies
    const ids = [];
    let sent = 0;
    const t0 = Date.now();
    const pump = (async () => {
      for (let i = 0; i < 60; i++) {
        const id = rid(`load${i}`);
        ids.push(id);
        for (const [k, st] of ['waiting', 'pending', 'success'].entries()) {
          // the killed daemon may not be reaped yet: a refused or cut connection means the
          // observation was not accepted there, so it goes to the next daemon
          for (let tries = 0; tries < ds.length; tries++) {
            const live = ds.filter((d) => d.proc.child.exitCode === null && d.proc.child.signalCode === null);
            const d = live[(i + k + tries) % live.length];
            const code = await ingest(d, KEY, upstreamPayload({ rid: id, status: st, updatedAt: t0 + i * 10 + k })).catch(() => 0);
            if (code === 200) { sent++; break; }
          }
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await new Promise((r) => setTimeout(r, 400));
    const killedAt = Date.now();
    await ds[holder].stop('SIGKILL');
    const others = ds.filter((_, i) => i !== holder);
    await until(async () => (await Promise.all(others.map(async (d) => (await d.get('/readyz')).body.upstreamWebsocket))).includes('ready'),
      { msg: 'takeover', timeoutMs: 8000 });
    const took = Date.now() - killedAt;
    await pump;
    const expected = new Set();
    for (const d of others) {
      for (const id of ids) {
        const r = await d.get(`/v1/events?requestId=${id}`);
        for (const e of r.body.events) expected.add(e.eventId);
      }
      break;
    }
    await until(() => {
      const got = new Set(recv.records().filter((r) => r.path === '/all').map((r) => r.id));
      return [...expected].every((e) => got.has(e));
    }, { msg: 'every event delivered', timeoutMs: 30000 });
    const all = recv.records().filter((r) => r.path === '/all').map((r) => r.id);
    const dups = all.length - new Set(all).size;
    console.log(`# 3 daemons: ${sent} observations, ${expected.size} events, takeover ${took} ms, duplicates ${dups}`);
    assert.ok(took < 5000, `takeover ${took} ms`);
    assert.equal(expected.size, ids.length * 3);
    // at-least-once window: only deliveries in flight in the killed process can repeat
    assert.ok(dups <= 64, `duplicates ${dups}`);
  } finally {
    for (const d of ds) await d.stop('SIGKILL');
    await recv.stop();
    await sim.stop();
  }
});
