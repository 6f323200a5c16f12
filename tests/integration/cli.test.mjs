// cli.test.mjs - the operator CLI as an operator sees it: every command's own --help (its
// flags, an example, different from every other page), unknown flags refused by name, the
// commands untrack / requests / events / webhooks update end to end against a daemon, status
// with tx hashes, explorer links (from GET /v1/chains when the daemon serves it), the deposit
// address and the watch phase; and the settings rule (an unset dependent setting follows the
// one given; two given values that conflict stop start-up with one line).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import http from 'node:http';
import { promisify } from 'node:util';
import { BIN, until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startReceiver, ingest, upstreamPayload, rid } from './lib/hooks.mjs';

const run = promisify(execFile);
const KEY = 'cli-test-key';
let redis;

before(async () => { redis = await startRedis(); });
after(async () => { await redis?.stop(); });

// Every operator command and the options its help page must list.
const COMMANDS = {
  track: ['--metadata'],
  untrack: [],
  status: [],
  find: [],
  requests: ['--status', '--stuck', '--limit', '--cursor', '--all'],
  events: ['--request', '--since', '--after', '--limit'],
  tail: ['--request', '--status'],
  webhooks: ['list', 'add', 'update', 'show', 'rm', 'rotate-secret', 'reveal-secret', 'test', 'enable', 'disable'],
  'webhooks list': [],
  'webhooks add': ['--status', '--request-ids', '--origin-chains', '--destination-chains', '--events', '--users', '--referrers', '--fail-reasons', '--refund-fail-reasons', '--flags', '--metadata', '--header', '--scheme', '--ed25519', '--latest', '--description'],
  'webhooks update': ['--url', '--enable', '--disable', '--status', '--request-ids', '--origin-chains', '--destination-chains', '--events', '--users', '--referrers', '--fail-reasons', '--refund-fail-reasons', '--flags', '--metadata', '--no-filters', '--header', '--no-headers', '--scheme', '--mode', '--description'],
  'webhooks show': [],
  'webhooks rm': [],
  'webhooks rotate-secret': [],
  'webhooks reveal-secret': [],
  'webhooks test': [],
  'webhooks enable': [],
  'webhooks disable': [],
  deliveries: ['--state', '--limit', '--cursor'],
  replay: ['--since', '--until', '--request', '--webhook', '--dead', '--dry-run'],
};

const sh = (args, env = {}) => spawnSync(BIN, args, { encoding: 'utf8', env: { ...process.env, ...env } });

test('every command has its own --help: its flags, an example, and no two pages alike', () => {
  const pages = new Map();
  for (const [cmd, flags] of Object.entries(COMMANDS)) {
    const words = cmd.split(' ');
    const r = sh([...words, '--help']);
    assert.equal(r.status, 0, `${cmd} --help: ${r.stderr}`);
    assert.equal(r.stderr, '', `${cmd} --help writes nothing on stderr`);
    assert.match(r.stdout, new RegExp(`^usage: statusrelay ${cmd}\\b`), `${cmd}: usage line`);
    assert.match(r.stdout, /\nexample:\n  statusrelay /, `${cmd}: an example`);
    assert.match(r.stdout, /--admin-url URL/, `${cmd}: the global options`);
    for (const f of flags)
      assert.match(r.stdout, new RegExp(`^  ${f.replace(/-/g, '\\-')}\\b`, 'm'), `${cmd} --help lists ${f}`);
    // -h and `statusrelay help CMD` print the same page
    assert.equal(sh([...words, '-h']).stdout, r.stdout, `${cmd} -h`);
    assert.equal(sh(['help', ...words]).stdout, r.stdout, `statusrelay help ${cmd}`);
    pages.set(cmd, r.stdout);
  }
  const distinct = new Set(pages.values());
  assert.equal(distinct.size, pages.size, 'every command prints its own page');
  // the flags of `webhooks add` show without misuse, and not on the other pages
  assert.doesNotMatch(pages.get('webhooks list'), /--origin-chains/);
  assert.doesNotMatch(pages.get('status'), /--origin-chains/);
  // the top-level page names the new commands
  const top = sh(['--help']).stdout;
  for (const c of ['untrack', 'requests', 'events']) assert.match(top, new RegExp(`^  ${c} `, 'm'));
});

test('an unknown flag is refused by name, pointing at the command\'s --help, exit 2', () => {
  for (const cmd of Object.keys(COMMANDS)) {
    const words = cmd.split(' ');
    const r = sh([...words, 'x', '--frobnicate'], { STATUSRELAY_ADMIN_URL: 'http://127.0.0.1:9' });
    assert.equal(r.status, 2, `${cmd}: ${r.stderr}`);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    const name = cmd === 'webhooks' ? 'webhooks' : cmd;
    if (cmd === 'webhooks') // "x" is taken as the subcommand
      assert.match(lines[0], /unknown subcommand "x" \(see statusrelay webhooks --help\)/);
    else
      assert.match(lines[0], new RegExp(`^statusrelay ${name}: unknown option --frobnicate \\(see statusrelay ${name} --help\\)$`));
  }
  // another command's flag is not accepted either
  const r = sh(['requests', '--dead']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /unknown option --dead/);
  // a value that is not a number, a missing argument
  assert.match(sh(['requests', '--limit', 'many']).stderr, /--limit must be an integer from 1 to 500/);
  const miss = sh(['status']);
  assert.equal(miss.status, 2);
  assert.match(miss.stderr, /missing ID; usage: statusrelay status ID/);
});

/** A front for the daemon that answers GET /v1/chains with `chains` and passes the rest. */
async function chainsFront(daemonUrl, chains) {
  const srv = http.createServer(async (req, res) => {
    if (req.url === '/v1/chains') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ chains }));
      return;
    }
    const body = await new Promise((r) => { const b = []; req.on('data', (d) => b.push(d)); req.on('end', () => r(Buffer.concat(b))); });
    const up = await fetch(daemonUrl + req.url, { method: req.method, headers: { 'content-type': 'application/json' }, body: body.length ? body : undefined });
    res.writeHead(up.status, { 'content-type': 'application/json' });
    res.end(Buffer.from(await up.arrayBuffer()));
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${srv.address().port}`, stop: () => new Promise((r) => srv.close(r)) };
}

test('status shows tx hashes (with explorer links from /v1/chains), deposit address, watch phase', async () => {
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, env: { STATUSRELAY_REDIS_PREFIX: 'cli1' } });
  const cli = (url, ...args) => run(BIN, args, { env: { ...process.env, STATUSRELAY_ADMIN_URL: url } });
  const front = await chainsFront(d.url, [
    { id: 792703809, name: 'solana', displayName: 'Solana', explorerUrl: 'https://solscan.io', explorerPaths: { transaction: '/tx/{TX_HASH}?cluster=mainnet' }, disabled: false, blockProductionLagging: true },
    { id: 8453, name: 'base', displayName: 'Base', explorerUrl: 'https://basescan.org/', disabled: false, blockProductionLagging: false },
  ]);
  try {
    const id = rid('cli-status');
    const tracked = await cli(d.url, 'track', id, '--metadata', '{"order":"A-1042"}');
    assert.match(tracked.stdout, /tracking 1 request/);
    const inTx = '5VfydnLu4XwV2H2dLHPv22JxhLbYJruaM9YTaGY30TZjd4re';
    const outTx = '0x' + 'ab'.repeat(32);
    const t0 = Date.now();
    const p1 = upstreamPayload({ rid: id, status: 'pending', updatedAt: t0, origin: 792703809, dest: 8453, inTx: [inTx] });
    const dep = { address: '0xdeposit00000000000000000000000000000000', depositAddressType: 'strict', depositor: '0xfeed000000000000000000000000000000000000', depositTxHash: '3ZdepositSigXYZ' };
    p1.data.depositAddress = dep;
    assert.equal(await ingest(d, KEY, p1), 200);
    const p2 = upstreamPayload({ rid: id, status: 'success', updatedAt: t0 + 1, origin: 792703809, dest: 8453, inTx: [inTx], outTx: [outTx] });
    p2.data.depositAddress = dep;
    assert.equal(await ingest(d, KEY, p2), 200);

    // without a chain list (the daemon's own /v1/chains absent or without these chains):
    // hashes, no links, and the command still succeeds
    const plain = (await cli(d.url, 'status', id)).stdout;
    assert.match(plain, new RegExp(`^in tx\\s+${inTx}$`, 'm'));
    assert.match(plain, new RegExp(`^out tx\\s+${outTx}$`, 'm'));
    assert.match(plain, /^deposit\s+0xdeposit0{32} \(strict\)$/m);
    assert.match(plain, /^depositor\s+0xfeed0{36}$/m);
    assert.match(plain, /^deposit tx 3ZdepositSigXYZ$/m);
    assert.match(plain, /^watch\s+settled until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(in 2[34]h\d+m\): still subscribed, polled slowly for reversals$/m);
    assert.match(plain, /^metadata\s+\{"order":"A-1042"\}$/m);
    assert.match(plain, /^2\s+success\s+pending\s+/m, 'the timeline');

    // with the chain list: links from explorerUrl + explorerPaths.transaction (or /tx/), names
    const linked = (await cli(front.url, 'status', id)).stdout;
    assert.match(linked, new RegExp(`^in tx\\s+${inTx}  https://solscan\\.io/tx/${inTx}\\?cluster=mainnet$`, 'm'));
    assert.match(linked, new RegExp(`^out tx\\s+${outTx}  https://basescan\\.org/tx/${outTx}$`, 'm'));
    assert.match(linked, /^deposit tx 3ZdepositSigXYZ  https:\/\/solscan\.io\/tx\/3ZdepositSigXYZ\?cluster=mainnet$/m);
    assert.match(linked, /^chains\s+Solana \(792703809\) \[block production lagging\] -> Base \(8453\)$/m);

    // --json keeps the API's shape (watch, watchUntil, hashes) plus the timeline
    const j = JSON.parse((await cli(d.url, 'status', id, '--json')).stdout);
    assert.equal(j.watch, 'settled');
    assert.ok(j.watchUntil > Date.now());
    assert.deepEqual(j.txHashes, [outTx]);
    assert.equal(j.events.length, 2);

    // an active request: watch active
    const id2 = rid('cli-active');
    await cli(d.url, 'track', id2);
    assert.equal(await ingest(d, KEY, upstreamPayload({ rid: id2, status: 'submitted', updatedAt: Date.now() })), 200);
    const act = (await cli(d.url, 'status', id2)).stdout;
    assert.match(act, /^watch\s+active \(no end\): subscribed upstream and polled$/m);
    assert.match(act, /^in tx\s+-$/m);
    assert.match(act, /^deposit\s+-$/m);
  } finally {
    await front.stop();
    await d.stop('SIGKILL');
  }
});

test('untrack, requests (status, stuck, paging) and events end to end', async () => {
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, env: { STATUSRELAY_REDIS_PREFIX: 'cli2', STATUSRELAY_STUCK_AFTER: '1s' } });
  const env = { ...process.env, STATUSRELAY_ADMIN_URL: d.url };
  const cli = (...args) => run(BIN, args, { env });
  try {
    const ids = [rid('r1'), rid('r2'), rid('r3')];
    assert.match((await cli('track', ...ids)).stdout, /tracking 3 request\(s\) \(3 newly\)/);
    const t0 = Date.now();
    assert.equal(await ingest(d, KEY, upstreamPayload({ rid: ids[0], status: 'pending', updatedAt: t0 })), 200);
    assert.equal(await ingest(d, KEY, upstreamPayload({ rid: ids[1], status: 'success', updatedAt: t0 + 1 })), 200);
    assert.equal(await ingest(d, KEY, upstreamPayload({ rid: ids[2], status: 'waiting', updatedAt: t0 + 2 })), 200);

    // requests: the table, a status filter, paging by cursor, --all
    const table = (await cli('requests')).stdout;
    for (const id of ids) assert.match(table, new RegExp(`^${id}\\s`, 'm'));
    assert.match(table, /^REQUEST\s+STATUS\s+UPDATED/);
    const pend = JSON.parse((await cli('requests', '--status', 'pending', '--json')).stdout);
    assert.deepEqual(pend.requests.map((r) => r.requestId), [ids[0]]);
    const page1 = (await cli('requests', '--limit', '2')).stdout;
    const m = /^next page: statusrelay requests --cursor (\S+)$/m.exec(page1);
    assert.ok(m, page1);
    const page2 = JSON.parse((await cli('requests', '--limit', '2', '--cursor', m[1], '--json')).stdout);
    const seen = [...page1.matchAll(/^(0x[0-9a-f]{64})\s/gm)].map((x) => x[1]).concat(page2.requests.map((r) => r.requestId));
    assert.deepEqual(new Set(seen), new Set(ids));
    const all = JSON.parse((await cli('requests', '--limit', '1', '--all', '--json')).stdout);
    assert.deepEqual(new Set(all.requests.map((r) => r.requestId)), new Set(ids));
    assert.equal(all.cursor, null);
    // stuck: active, not waiting, unchanged for STUCK_AFTER (1 s here): only the pending one
    await until(async () => {
      const s = JSON.parse((await cli('requests', '--stuck', '--json')).stdout);
      return s.requests.length === 1 && s.requests[0].requestId === ids[0];
    }, { msg: 'requests --stuck lists the pending request', timeoutMs: 8000, stepMs: 300 });

    // events: one request's timeline, --since, paging with --after
    const ev = JSON.parse((await cli('events', '--request', ids[1], '--json')).stdout);
    assert.deepEqual(ev.events.map((e) => e.status), ['success']);
    const since = (await cli('events', '--since', '10m')).stdout;
    for (const id of ids) assert.match(since, new RegExp(id));
    assert.match(since, /^3 event\(s\); continue with --after \S+$/m);
    assert.match((await cli('events', '--since', String(Date.now() + 60000))).stdout, /^0 event\(s\)/);
    const first = (await cli('events', '--limit', '1', '--since', String(t0 - 1000))).stdout;
    const after = /continue with --after (\S+)/.exec(first)[1];
    const next = JSON.parse((await cli('events', '--after', after, '--limit', '1', '--json')).stdout);
    assert.equal(next.events.length, 1);
    assert.notEqual(next.events[0].streamId, after);
    assert.equal((await cli('events', '--since', 'yesterday').catch((e) => e)).code, 2);

    // untrack: the watch ends, the state stays readable; an unknown id is exit 3
    assert.match((await cli('untrack', ids[0])).stdout, new RegExp(`^untracked ${ids[0]}$`, 'm'));
    const after1 = await d.get(`/v1/requests/${ids[0]}`);
    assert.equal(after1.body.tracked, false);
    assert.equal(after1.body.watch, 'ended');
    assert.match((await cli('status', ids[0])).stdout, /^watch\s+ended: not followed any more/m);
    const unknown = await cli('untrack', rid('nobody')).catch((e) => e);
    assert.equal(unknown.code, 3);
    assert.match(unknown.stderr, /HTTP 404/);
  } finally {
    await d.stop('SIGKILL');
  }
});

test('webhooks update changes url, filters, headers, mode, description and state', async () => {
  const r1 = await startReceiver({ def: 204 });
  const r2 = await startReceiver({ def: 204 });
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, env: { STATUSRELAY_REDIS_PREFIX: 'cli3' } });
  const cli = (...args) => run(BIN, args, { env: { ...process.env, STATUSRELAY_ADMIN_URL: d.url } });
  try {
    const add = JSON.parse((await cli('webhooks', 'add', r1.url('/one'), '--header', 'X-Team: payments', '--json')).stdout);
    const upd = (await cli('webhooks', 'update', add.id, '--url', r2.url('/two'), '--status', 'success',
      '--header', 'X-Team: ops', '--mode', 'latest', '--description', 'moved')).stdout;
    assert.match(upd, new RegExp(`^url\\s+${r2.url('/two').replace(/[.?]/g, '\\$&')}$`, 'm'));
    const w = (await d.get(`/v1/webhooks/${add.id}`)).body;
    assert.equal(w.url, r2.url('/two'));
    assert.deepEqual(w.filters.status, ['success']);
    assert.deepEqual(w.headers, { 'X-Team': 'ops' });
    assert.equal(w.mode, 'latest');
    assert.equal(w.description, 'moved');
    // the change takes effect: a success goes to the new URL, a pending is filtered out
    const id = rid('cli-wh');
    await cli('track', id);
    assert.equal(await ingest(d, KEY, upstreamPayload({ rid: id, status: 'pending', updatedAt: Date.now() })), 200);
    assert.equal(await ingest(d, KEY, upstreamPayload({ rid: id, status: 'success', updatedAt: Date.now() + 1 })), 200);
    await until(() => r2.records().length >= 1, { msg: 'delivery to the new URL' });
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(r2.records().length, 1);
    assert.equal(r2.records()[0].path, '/two');
    assert.equal(r1.records().length, 0);
    // --disable / --enable, --no-filters, --no-headers
    await cli('webhooks', 'update', add.id, '--disable');
    assert.equal((await d.get(`/v1/webhooks/${add.id}`)).body.enabled, false);
    const back = JSON.parse((await cli('webhooks', 'update', add.id, '--enable', '--no-filters', '--no-headers', '--json')).stdout);
    assert.equal(back.enabled, true);
    assert.deepEqual(back.filters, {});
    assert.deepEqual(back.headers ?? {}, {});
    // refused input: nothing to change (2), contradicting flags (2), unknown endpoint (3)
    assert.equal((await cli('webhooks', 'update', add.id).catch((e) => e)).code, 2);
    assert.equal((await cli('webhooks', 'update', add.id, '--enable', '--disable').catch((e) => e)).code, 2);
    assert.equal((await cli('webhooks', 'update', 'wh_nope', '--disable').catch((e) => e)).code, 3);
    const bad = await cli('webhooks', 'update', add.id, '--mode', 'sometimes').catch((e) => e);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /mode is all or latest/);
  } finally {
    await d.stop('SIGKILL');
    await r1.stop();
    await r2.stop();
  }
});

test('settings rule: an unset dependent follows the one given; given conflicts stop start-up', async () => {
  const cfg = (env) => sh(['serve', '--print-config'], env);
  const value = (out, name) => new RegExp(`^${name}=(.*)$`, 'm').exec(out)[1];
  // only the delivery timeout: the connect timeout follows it, the lease keeps its slack
  let r = cfg({ STATUSRELAY_DELIVERY_TIMEOUT: '3s' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(value(r.stdout, 'STATUSRELAY_CONNECT_TIMEOUT'), '3s');
  r = cfg({ STATUSRELAY_DELIVERY_TIMEOUT: '90s' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(value(r.stdout, 'STATUSRELAY_DELIVERY_LEASE'), '140s');
  assert.equal(value(r.stdout, 'STATUSRELAY_CONNECT_TIMEOUT'), '5s');
  // only the connect timeout or only the lease: the delivery timeout follows
  r = cfg({ STATUSRELAY_CONNECT_TIMEOUT: '15s' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(value(r.stdout, 'STATUSRELAY_DELIVERY_TIMEOUT'), '15s');
  r = cfg({ STATUSRELAY_DELIVERY_LEASE: '5s' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(value(r.stdout, 'STATUSRELAY_DELIVERY_TIMEOUT'), '2500ms');
  // ping pairs, both directions
  r = cfg({ STATUSRELAY_UPSTREAM_PING_INTERVAL: '45s', STATUSRELAY_WS_PING_TIMEOUT: '1s' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(value(r.stdout, 'STATUSRELAY_UPSTREAM_PING_TIMEOUT'), '90s');
  assert.equal(value(r.stdout, 'STATUSRELAY_WS_PING_INTERVAL'), '333ms');

  // two given values that conflict: one line naming both, exit 2
  const conflicts = [
    [{ STATUSRELAY_DELIVERY_TIMEOUT: '3s', STATUSRELAY_CONNECT_TIMEOUT: '5s' }, /STATUSRELAY_CONNECT_TIMEOUT \(5s\): must not exceed STATUSRELAY_DELIVERY_TIMEOUT \(3s\)/],
    [{ STATUSRELAY_DELIVERY_TIMEOUT: '10s', STATUSRELAY_DELIVERY_LEASE: '5s' }, /STATUSRELAY_DELIVERY_LEASE \(5s\): must exceed STATUSRELAY_DELIVERY_TIMEOUT \(10s\)/],
    [{ STATUSRELAY_CONNECT_TIMEOUT: '5s', STATUSRELAY_DELIVERY_LEASE: '5s' }, /STATUSRELAY_DELIVERY_LEASE \(5s\): must exceed STATUSRELAY_CONNECT_TIMEOUT \(5s\)/],
    [{ STATUSRELAY_UPSTREAM_PING_INTERVAL: '45s', STATUSRELAY_UPSTREAM_PING_TIMEOUT: '30s' }, /STATUSRELAY_UPSTREAM_PING_TIMEOUT \(30s\): must exceed STATUSRELAY_UPSTREAM_PING_INTERVAL \(45s\)/],
    [{ STATUSRELAY_WS_PING_INTERVAL: '90s', STATUSRELAY_WS_PING_TIMEOUT: '60s' }, /STATUSRELAY_WS_PING_TIMEOUT \(1m\): must exceed STATUSRELAY_WS_PING_INTERVAL \(90s\)/],
  ];
  for (const [env, re] of conflicts) {
    const c = sh(['serve', '--check-config'], env);
    assert.equal(c.status, 2, `${JSON.stringify(env)}: ${c.stdout}${c.stderr}`);
    const lines = c.stderr.trim().split('\n');
    assert.equal(lines.length, 1, c.stderr);
    assert.match(lines[0], re);
  }

  // the daemon itself starts with only STATUSRELAY_DELIVERY_TIMEOUT=3s and delivers
  const recv = await startReceiver({ def: 204 });
  const d = await startDaemon({ redisUrl: redis.url, apiKey: KEY, env: { STATUSRELAY_REDIS_PREFIX: 'cli4', STATUSRELAY_DELIVERY_TIMEOUT: '3s' } });
  try {
    assert.equal((await d.get('/readyz')).status, 200);
    const wh = await d.post('/v1/webhooks', { url: recv.url('/t') });
    assert.equal(wh.status, 201);
    const id = rid('cli-dt');
    await d.post('/v1/requests', { requestId: id });
    assert.equal(await ingest(d, KEY, upstreamPayload({ rid: id, status: 'success' })), 200);
    await until(() => recv.records().length >= 1, { msg: 'delivered with a 3 s delivery timeout' });
  } finally {
    await d.stop('SIGKILL');
    await recv.stop();
  }
  // explicit conflicting pair at start-up: the daemon exits 2 with the one line
  const bad = sh(['serve'], { STATUSRELAY_REDIS_URL: redis.url, STATUSRELAY_DELIVERY_TIMEOUT: '3s', STATUSRELAY_CONNECT_TIMEOUT: '4s', STATUSRELAY_HTTP_LISTEN: '127.0.0.1:0' });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /^statusrelay: invalid setting STATUSRELAY_CONNECT_TIMEOUT \(4s\): must not exceed STATUSRELAY_DELIVERY_TIMEOUT \(3s\)\n$/);
});
