// read_token.test.mjs - STATUSRELAY_READ_TOKEN (issue 25 item 6): a second bearer token that
// may GET (and HEAD) every /v1 path and /metrics and nothing else. Every GET route of
// relay/api/routes.c is read with it (the same answer as the admin token's, secrets left out:
// no webhook secret, custom header values "****"); every state-changing route is tried with it
// and refused with 403 read_only_token, and the state read back with the admin token is
// unchanged; a wrong token is 401; the pass-through never forwards it; the CLI lists with it
// and says clearly why `webhooks add` needs the admin token; its settings are validated with
// one line naming it. The route list is read from routes.c, so a route added later without a
// probe here fails this test.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import { spawnSync } from 'node:child_process';
import { BIN, until } from './lib/proc.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startReceiver, ingest, upstreamPayload, rid } from './lib/hooks.mjs';

const KEY = 'read-token-test-key';
const ADMIN = 'admin-token-0123456789abcdef';
const READ = 'read-token-fedcba9876543210';
const RECEIVER_SECRET = 'receiver-credential-42';
let redis, recv, d, wh, id, bf;

const call = async (method, p, { token, body, ctype = body !== undefined } = {}) => {
  const headers = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (ctype) headers['content-type'] = 'application/json';
  const r = await fetch(d.url + p, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* /metrics: text */ }
  return { status: r.status, json, text, headers: r.headers };
};
const admin = (method, p, body) => call(method, p, { token: ADMIN, body });
const reader = (method, p, body) => call(method, p, { token: READ, body });

before(async () => {
  redis = await startRedis();
  recv = await startReceiver();
  d = await startDaemon({
    redisUrl: redis.url, apiKey: KEY, name: 'read-token',
    env: { STATUSRELAY_ADMIN_TOKEN: ADMIN, STATUSRELAY_READ_TOKEN: READ, STATUSRELAY_REDIS_PREFIX: 'rt' },
  });
  // state to read: an endpoint with a custom header (a receiver credential), a tracked request
  // with one event delivered to it, a backfill
  const c = await admin('POST', '/v1/webhooks', { url: recv.url('/hook'), headers: { 'X-Receiver-Key': RECEIVER_SECRET }, description: 'rt' });
  assert.equal(c.status, 201, c.text);
  wh = c.json;
  id = rid('read-token');
  assert.equal((await admin('POST', '/v1/requests', { requestIds: [id], metadata: { order: 'A-1' } })).status, 201);
  assert.equal(await ingest(d, KEY, upstreamPayload({ rid: id, status: 'pending', updatedAt: Date.now() })), 200);
  await until(async () => (await admin('GET', `/v1/webhooks/${wh.id}/deliveries?state=delivered`)).json?.deliveries?.length === 1,
    { msg: 'the event delivered' });
  const b = await admin('POST', '/v1/backfill', { since: Date.now() - 3600000 });
  assert.equal(b.status, 202, b.text);
  bf = b.json.backfillId;
});

after(async () => {
  await d?.stop();
  await recv?.stop();
  await redis?.stop();
});

/** The routes that need a token, from relay/api/routes.c: "METHOD /pattern". */
function tokenRoutes() {
  const src = fs.readFileSync(new URL('../../relay/api/routes.c', import.meta.url), 'utf8');
  const out = [];
  for (const m of src.matchAll(/\{EVHTTP_REQ_(\w+), "([^"]+)", \w+, AUTH_TOKEN\b/g)) out.push(`${m[1]} ${m[2]}`);
  assert.ok(out.length >= 20, `routes.c parsed: ${out}`);
  return out;
}

// A probe per GET route: the paths read (several for the list: plain, stuck, a search).
const reads = () => ({
  'GET /metrics': ['/metrics'],
  'GET /v1/requests': ['/v1/requests', '/v1/requests?stuck=true', `/v1/requests?q=${id}`],
  'GET /v1/requests/{}': [`/v1/requests/${id}`],
  'GET /v1/events': ['/v1/events', `/v1/events?requestId=${id}`],
  'GET /v1/chains': ['/v1/chains'],
  'GET /v1/partitions': ['/v1/partitions'],
  'GET /v1/backfill/{}': [`/v1/backfill/${bf}`],
  'GET /v1/webhooks': ['/v1/webhooks'],
  'GET /v1/webhooks/{}': [`/v1/webhooks/${wh.id}`],
  'GET /v1/webhooks/{}/deliveries': [`/v1/webhooks/${wh.id}/deliveries`, `/v1/webhooks/${wh.id}/deliveries?state=delivered`],
});

// A probe per state-changing route: [method, path, body].
const writes = () => ({
  'POST /v1/requests': [['POST', '/v1/requests', { requestIds: [rid('rt-new')] }]],
  'DELETE /v1/requests/{}': [['DELETE', `/v1/requests/${id}`]],
  'POST /v1/backfill': [['POST', '/v1/backfill', { since: Date.now() - 60000 }]],
  'POST /v1/webhooks': [['POST', '/v1/webhooks', { url: recv.url('/other') }]],
  'PATCH /v1/webhooks/{}': [['PATCH', `/v1/webhooks/${wh.id}`, { enabled: false, url: recv.url('/moved') }]],
  'DELETE /v1/webhooks/{}': [['DELETE', `/v1/webhooks/${wh.id}`]],
  'POST /v1/webhooks/{}/rotate-secret': [['POST', `/v1/webhooks/${wh.id}/rotate-secret`, {}]],
  'POST /v1/webhooks/{}/reveal-secret': [['POST', `/v1/webhooks/${wh.id}/reveal-secret`, {}]],
  'POST /v1/webhooks/{}/test': [['POST', `/v1/webhooks/${wh.id}/test`, {}]],
  'POST /v1/replay': [['POST', '/v1/replay', { dead: true }], ['POST', '/v1/replay', { since: 0, webhookId: wh.id }]],
});

test('every token route of routes.c has a probe here (reads or writes)', () => {
  const r = reads(), w = writes();
  for (const route of tokenRoutes())
    assert.ok(route.startsWith('GET ') ? r[route] : w[route], `no probe for ${route}: add one to read_token.test.mjs`);
});

test('the read token GETs and HEADs every GET route: the admin token\'s answer, without secrets', async () => {
  for (const [route, paths] of Object.entries(reads())) {
    for (const p of paths) {
      const a = await admin('GET', p), r = await reader('GET', p);
      assert.ok(r.status !== 401 && r.status !== 403, `${route} ${p}: ${r.status} ${r.text}`);
      assert.equal(r.status, a.status, `${route} ${p}: same status as the admin token`);
      assert.ok(!r.text.includes(RECEIVER_SECRET), `${p}: a custom header value leaked`);
      assert.ok(!r.text.includes(wh.secret), `${p}: the webhook secret leaked`);
      assert.ok(!/"secret"/.test(r.text), `${p}: no "secret" member`);
      const h = await call('HEAD', p, { token: READ });
      assert.equal(h.status, r.status, `HEAD ${p}`);
    }
  }
  // answers that do not move between two reads are equal
  for (const p of [`/v1/requests/${id}`, '/v1/events', `/v1/webhooks/${wh.id}/deliveries`, '/v1/partitions'])
    assert.deepEqual((await reader('GET', p)).json, (await admin('GET', p)).json, p);
  assert.match((await reader('GET', '/metrics')).text, /^statusrelay_/m);
  // the endpoint objects: the admin token sees the header value, the read token its name only
  const one = (await reader('GET', `/v1/webhooks/${wh.id}`)).json;
  assert.deepEqual(one.headers, { 'X-Receiver-Key': '****' });
  const full = (await admin('GET', `/v1/webhooks/${wh.id}`)).json;
  assert.deepEqual(full.headers, { 'X-Receiver-Key': RECEIVER_SECRET });
  delete one.headers; delete full.headers;
  assert.deepEqual(one, full, 'everything else the same');
  const list = (await reader('GET', '/v1/webhooks')).json.webhooks;
  assert.deepEqual(list.map((w) => w.headers), [{ 'X-Receiver-Key': '****' }]);
  // the status reads take it too (a proven caller), though they need no token
  const s = await reader('GET', `/intents/status/v3?requestId=${id}`);
  assert.equal(s.status, 200, s.text);
  assert.equal(s.json.status, 'pending');
});

/** What the admin token reads of the state the writes would change. */
async function snapshot() {
  const out = {};
  for (const p of ['/v1/webhooks', `/v1/webhooks/${wh.id}`, `/v1/webhooks/${wh.id}/deliveries`, '/v1/requests',
    `/v1/requests/${id}`, '/v1/events']) {
    const r = await admin('GET', p);
    assert.equal(r.status, 200, `${p}: ${r.text}`);
    out[p] = r.json;
  }
  out.secret = (await admin('POST', `/v1/webhooks/${wh.id}/reveal-secret`, {})).json;
  return out;
}

test('every state-changing route is refused to the read token (403 read_only_token) and nothing changes', async () => {
  const before = await snapshot();
  assert.equal(before.secret.secret, wh.secret);
  const deliveredBefore = recv.records().length;
  const tried = [];
  for (const [route, probes] of Object.entries(writes())) {
    for (const [method, p, body] of probes) {
      for (const ctype of [true, false]) { // without a JSON body type too: 403, not 415
        const r = await call(method, p, { token: READ, body, ctype: ctype && body !== undefined });
        assert.equal(r.status, 403, `${route} (${method} ${p}): ${r.status} ${r.text}`);
        assert.equal(r.json?.error?.code, 'read_only_token', `${route}: ${r.text}`);
        assert.match(r.json.message, /read token .* may only GET; this request needs the admin token/);
        assert.ok(!r.text.includes(wh.secret), `${route}: the secret leaked`);
        tried.push(route);
      }
    }
  }
  // a method no route has, on a /v1 path: refused the same way (the token reads, whatever else)
  const put = await call('PUT', `/v1/webhooks/${wh.id}`, { token: READ, body: {} });
  assert.equal(put.status, 403);
  assert.equal(put.json.error.code, 'read_only_token');
  assert.equal((await call('POST', '/v1/nope', { token: READ, body: {} })).status, 403);
  assert.equal((await reader('GET', '/v1/nope')).status, 404, 'a read of an unknown path: 404');
  // the signed ingest is not a token route: the read token gives it nothing
  const ing = await call('POST', '/v1/ingest/upstream', { token: READ, body: upstreamPayload({ rid: id, status: 'failure' }) });
  assert.equal(ing.status, 401, ing.text);
  assert.deepEqual(await snapshot(), before, 'the state read back with the admin token is unchanged');
  assert.equal(recv.records().length, deliveredBefore, 'no test event, no replay delivered');
  assert.equal(tried.length, 2 * Object.values(writes()).flat().length);
});

test('a wrong token is 401; the admin token still does everything', async () => {
  for (const tok of [undefined, 'read-token-fedcba987654321', `${READ}x`, ADMIN.slice(0, -1)]) {
    for (const [m, p, body] of [['GET', '/v1/webhooks'], ['GET', '/metrics'], ['POST', '/v1/webhooks', { url: recv.url('/x') }]]) {
      const r = await call(m, p, { token: tok, body });
      assert.equal(r.status, 401, `${m} ${p} with ${tok}: ${r.text}`);
      assert.equal(r.json?.error?.code, 'unauthorized');
    }
  }
  // the read token in another scheme is no token
  const basic = await fetch(d.url + '/v1/webhooks', { headers: { authorization: `Basic ${READ}` } });
  assert.equal(basic.status, 401);
  // the admin token writes (and this endpoint goes again)
  const c = await admin('POST', '/v1/webhooks', { url: recv.url('/tmp') });
  assert.equal(c.status, 201);
  assert.equal((await admin('DELETE', `/v1/webhooks/${c.json.id}`)).status, 204);
});

test('the CLI reads with the read token and says why `webhooks add` needs the admin token', () => {
  const env = { ...process.env, STATUSRELAY_ADMIN_URL: d.url };
  delete env.STATUSRELAY_ADMIN_TOKEN;
  const sh = (args, extra) => spawnSync(BIN, args, { encoding: 'utf8', env: { ...env, ...extra }, timeout: 20000 });
  // STATUSRELAY_READ_TOKEN alone
  const list = sh(['webhooks', 'list'], { STATUSRELAY_READ_TOKEN: READ });
  assert.equal(list.status, 0, list.stderr);
  assert.match(list.stdout, new RegExp(wh.id));
  const js = JSON.parse(sh(['webhooks', 'show', wh.id, '--json'], { STATUSRELAY_READ_TOKEN: READ }).stdout);
  assert.equal(js.headers['X-Receiver-Key'], '****');
  const add = sh(['webhooks', 'add', recv.url('/cli')], { STATUSRELAY_READ_TOKEN: READ });
  assert.equal(add.status, 2, add.stdout + add.stderr);
  assert.match(add.stderr, /POST \/v1\/webhooks: HTTP 403 read_only_token: /);
  assert.match(add.stderr, /this command changes state: it needs the admin token \(STATUSRELAY_ADMIN_TOKEN or --admin-token\); the read token only reads/);
  // --read-token, and the admin token first when both are given
  assert.equal(sh(['requests', '--read-token', READ]).status, 0);
  assert.equal(sh(['webhooks', 'list']).status, 2, 'no token: 401');
  const both = sh(['webhooks', 'add', recv.url('/cli'), '--json'], { STATUSRELAY_READ_TOKEN: READ, STATUSRELAY_ADMIN_TOKEN: ADMIN });
  assert.equal(both.status, 0, both.stderr);
  const made = JSON.parse(both.stdout);
  const rm = sh(['webhooks', 'rm', made.id, '--read-token', READ], { STATUSRELAY_ADMIN_TOKEN: ADMIN });
  assert.equal(rm.status, 2, 'a --read-token flag wins over the environment');
  assert.equal(sh(['webhooks', 'rm', made.id, '--admin-token', ADMIN]).status, 0);
  assert.match(sh(['--help']).stdout + sh(['webhooks', 'list', '--help']).stdout, /--read-token TOKEN/);
});

/** An upstream that records the Authorization header of each forwarded request. */
async function recorder() {
  const seen = [];
  const srv = http.createServer((req, res) => {
    seen.push({ url: req.url, auth: req.headers.authorization, ua: req.headers['user-agent'] ?? '' });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${srv.address().port}`, seen, close: () => new Promise((r) => { srv.closeAllConnections?.(); srv.close(r); }) };
}

test('the pass-through never forwards the read token (the client\'s own Authorization goes through)', async () => {
  const up = await recorder();
  const p = await startDaemon({
    redisUrl: redis.url, apiUrl: up.url, name: 'read-token-pt',
    env: { STATUSRELAY_ADMIN_TOKEN: ADMIN, STATUSRELAY_READ_TOKEN: READ, STATUSRELAY_PASSTHROUGH: 'true', STATUSRELAY_REDIS_PREFIX: 'rtpt' },
  });
  try {
    for (const auth of [`Bearer ${READ}`, `bearer  ${READ} `, READ, `Bearer ${ADMIN}`, 'Bearer client-own-key']) {
      const r = await fetch(`${p.url}/quote/x?k=${encodeURIComponent(auth)}`, { headers: { authorization: auth } });
      assert.equal(r.status, 200, await r.text());
    }
    const fwd = up.seen.filter((s) => s.url.startsWith('/quote/x'));
    assert.equal(fwd.length, 5);
    assert.deepEqual(fwd.map((s) => s.auth), [undefined, undefined, undefined, undefined, 'Bearer client-own-key']);
  } finally {
    const r = await p.stop();
    await up.close();
    assert.deepEqual(r, { code: 0, signal: null }, 'a clean exit (sanitizers: no report)');
  }
});

test('STATUSRELAY_READ_TOKEN is validated at start-up with one line naming it', () => {
  const serve = (extra) => spawnSync(BIN, ['serve'], {
    encoding: 'utf8', timeout: 10000,
    env: { ...process.env, STATUSRELAY_REDIS_URL: redis.url, STATUSRELAY_HTTP_LISTEN: '127.0.0.1:0', STATUSRELAY_ADMIN_TOKEN: '', ...extra },
  });
  const cases = [
    [{ STATUSRELAY_READ_TOKEN: READ }, /needs STATUSRELAY_ADMIN_TOKEN/],
    [{ STATUSRELAY_ADMIN_TOKEN: ADMIN, STATUSRELAY_READ_TOKEN: 'short-token' }, /at least 16 characters/],
    [{ STATUSRELAY_ADMIN_TOKEN: ADMIN, STATUSRELAY_READ_TOKEN: 'read token with spaces' }, /visible ASCII/],
    [{ STATUSRELAY_ADMIN_TOKEN: ADMIN, STATUSRELAY_READ_TOKEN: ADMIN }, /must differ from STATUSRELAY_ADMIN_TOKEN/],
  ];
  for (const [env, why] of cases) {
    const r = serve(env);
    assert.equal(r.status, 2, `${JSON.stringify(env)}: ${r.stderr}`);
    assert.match(r.stderr, /^statusrelay: invalid setting STATUSRELAY_READ_TOKEN: .+\n$/);
    assert.match(r.stderr, why);
  }
  // the flag form, and `serve --help` lists it
  const flag = spawnSync(BIN, ['serve', '--read-token', 'x'], { encoding: 'utf8', timeout: 10000, env: { ...process.env, STATUSRELAY_ADMIN_TOKEN: ADMIN } });
  assert.equal(flag.status, 2);
  assert.match(flag.stderr, /STATUSRELAY_READ_TOKEN: must be at least 16 characters/);
  assert.match(spawnSync(BIN, ['serve', '--help'], { encoding: 'utf8' }).stdout, /--read-token/);
});

test('the daemon exits cleanly after all of it (under the sanitizers: no report, no leak)', async () => {
  const r = await d.stop();
  assert.deepEqual(r, { code: 0, signal: null }, d.proc.log().slice(-2000));
});
