// rest_limits.test.mjs - the REST port against anonymous and slow clients (issue 15, medium 4
// and the REST lows): a request is judged on its headers before its body is read (401 / 413
// without buffering), every oversized body gets the JSON 413, a trickling client is cut by the
// total request deadline, after=2^64-1 does not wrap, loopback names are refused as webhook
// targets, and a listen name that merely starts like a loopback address needs the token.
// Real redis-server and daemon on loopback; raw sockets where the body must NOT be sent.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { spawnSync } from 'node:child_process';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { BIN } from './lib/proc.mjs';
import { ingest, upstreamPayload, rid } from './lib/hooks.mjs';

const TOKEN = 'rest-limits-token-0123456789';
const API_KEY = 'rest-limits-upstream-key';
const auth = { authorization: `Bearer ${TOKEN}` };
let redis, d, open;
const cleanup = [];

before(async () => {
  redis = await startRedis();
  d = await startDaemon({
    redisUrl: redis.url, apiKey: API_KEY,
    env: { STATUSRELAY_ADMIN_TOKEN: TOKEN, STATUSRELAY_HTTP_REQUEST_TIMEOUT: '2s' },
  });
  // no token, private targets refused: the registration rules
  open = await startDaemon({ redisUrl: redis.url, env: { STATUSRELAY_ALLOW_PRIVATE_TARGETS: 'false', STATUSRELAY_REDIS_PREFIX: 'sr-open' } });
});
after(async () => {
  for (const f of cleanup.reverse()) { try { await f(); } catch {} }
  await open?.stop(); await d?.stop(); await redis?.stop();
});

/** A raw connection: writes head (and optional first body bytes). closed resolves when the
 * server closes it, answer when one whole answer (head + Content-Length bytes) arrived. */
function raw(port, head, firstBody = '') {
  const sock = net.connect(port, '127.0.0.1');
  cleanup.push(() => sock.destroy());
  const started = Date.now();
  let text = '';
  let done;
  const answer = new Promise((resolve) => { done = resolve; });
  sock.on('data', (c) => {
    text += c.toString('latin1');
    const i = text.indexOf('\r\n\r\n');
    const m = /content-length: *(\d+)/i.exec(text.slice(0, i));
    if (i > 0 && m && text.length >= i + 4 + Number(m[1])) done(text);
  });
  sock.on('error', () => {});
  const closed = new Promise((resolve) => sock.on('close', () => resolve({ text, ms: Date.now() - started })));
  sock.write(head + firstBody);
  return { sock, closed, answer };
}

function parse(text) {
  const i = text.indexOf('\r\n\r\n');
  const status = Number(text.slice(9, 12));
  const headers = text.slice(0, i).toLowerCase();
  let body = null;
  try { body = JSON.parse(text.slice(i + 4)); } catch {}
  return { status, headers, body };
}

function rssKb(pid) {
  const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m[1]);
}

const within = (p, ms, what) => Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`${what}: not within ${ms} ms`)), ms))]);

test('40 unauthenticated uploads are answered on their headers (8 MiB: 413, 1 MiB: 401), never buffered, cut by the deadline', async () => {
  const before = rssKb(d.proc.child.pid);
  const head = (n) => `POST /v1/webhooks HTTP/1.1\r\nHost: 127.0.0.1:${d.httpPort}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${n}\r\n\r\n`;
  const conns = [];
  for (let i = 0; i < 20; i++) {
    conns.push({ want: 413, code: 'body_too_large', c: raw(d.httpPort, head(8 * 1024 * 1024), 'x'.repeat(64 * 1024)) });
    conns.push({ want: 401, code: 'unauthorized', c: raw(d.httpPort, head(1024 * 1024), 'x'.repeat(64 * 1024)) });
  }
  // answered although the rest of each body never comes
  const res = await within(Promise.all(conns.map((x) => x.c.answer)), 15000, 'answers to 40 unauthenticated uploads');
  res.forEach((text, i) => {
    const a = parse(text);
    assert.equal(a.status, conns[i].want, text.slice(0, 200));
    assert.equal(a.body.error.code, conns[i].code);
    assert.match(a.headers, /content-type: application\/json/);
  });
  const grown = rssKb(d.proc.child.pid) - before;
  assert.ok(grown < 16 * 1024, `RSS grew ${grown} KiB for 40 refused uploads`);
  // the bodies they never finish do not hold the connections: the deadline (2s) cuts them
  const closed = await within(Promise.all(conns.map((x) => x.c.closed)), 10000, 'connections cut');
  for (const c of closed) assert.ok(c.ms < 8000, `closed after ${c.ms} ms`);
  assert.equal((await fetch(`${d.url}/healthz`)).status, 200);
});

test('every oversized body gets the JSON 413: declared 9 MiB (before the body), 1 MiB + 1, chunked, anonymous 64 KiB + 1', async () => {
  const h = `Host: 127.0.0.1:${d.httpPort}\r\nContent-Type: application/json\r\nAuthorization: Bearer ${TOKEN}\r\n`;
  const big = raw(d.httpPort, `POST /v1/webhooks HTTP/1.1\r\n${h}Content-Length: ${9 * 1024 * 1024}\r\n\r\n`);
  const a = parse(await within(big.answer, 10000, '413 for a declared 9 MiB body'));
  assert.equal(a.status, 413);
  assert.equal(a.body.error.code, 'body_too_large');
  assert.match(a.body.message, /limited to 1048576 bytes/);

  const justOver = raw(d.httpPort, `POST /v1/replay HTTP/1.1\r\n${h}Content-Length: ${1024 * 1024 + 1}\r\n\r\n`);
  assert.equal(parse(await within(justOver.answer, 10000, '413 at 1 MiB + 1')).status, 413);

  // chunked, 2 MiB in 64 KiB pieces, with the token: cut at the limit, JSON answer
  const chunked = await new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: d.httpPort, path: '/v1/webhooks', method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', 'transfer-encoding': 'chunked' }, agent: false }, (res) => {
      let t = ''; res.on('data', (c) => { t += c; }); res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(t) }));
    });
    req.on('error', reject);
    const piece = Buffer.alloc(64 * 1024, 0x20);
    let n = 0;
    const pump = () => { while (n < 32) { n++; if (!req.write(piece)) { req.once('drain', pump); return; } } req.end(); };
    pump();
  });
  assert.equal(chunked.status, 413);
  assert.equal(chunked.body.error.code, 'body_too_large');

  // a small chunked body still works (decoded by the gate, handed on with its length)
  const ok = await new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: d.httpPort, path: '/v1/webhooks', method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', 'transfer-encoding': 'chunked' }, agent: false }, (res) => {
      let t = ''; res.on('data', (c) => { t += c; }); res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(t) }));
    });
    req.on('error', reject);
    req.write('{"url":"http://127.0.0.1:9/');
    req.end('chunked"}');
  });
  assert.equal(ok.status, 201, JSON.stringify(ok.body));
  assert.equal(ok.body.url, 'http://127.0.0.1:9/chunked');

  // the signed ingest path has no token: 64 KiB is its cap, decided on the headers
  const ing = raw(d.httpPort, `POST /v1/ingest/upstream HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
    `X-Signature-Timestamp: 1\r\nX-Signature-SHA256: 00\r\nContent-Length: ${64 * 1024 + 1}\r\n\r\n`);
  const ia = parse(await within(ing.answer, 10000, '413 on the ingest path'));
  assert.equal(ia.status, 413);
  assert.match(ia.body.message, /65536 without the admin token/);
});

test('a client trickling its request is cut by the total deadline (2s), however steady the trickle', async () => {
  const h = `Host: 127.0.0.1:${d.httpPort}\r\nContent-Type: application/json\r\nAuthorization: Bearer ${TOKEN}\r\n`;
  for (const [what, head] of [
    ['body', `POST /v1/webhooks HTTP/1.1\r\n${h}Content-Length: 1000\r\n\r\n`],
    ['head', 'GET /v1/webhooks HTTP/1.1\r\n'],
  ]) {
    const c = raw(d.httpPort, head);
    const iv = setInterval(() => { if (!c.sock.destroyed) c.sock.write(what === 'body' ? 'x' : 'X-A: b\r\n'); }, 250);
    const r = await within(c.closed, 10000, `trickled ${what} cut`);
    clearInterval(iv);
    assert.ok(r.ms >= 1500 && r.ms < 8000, `${what}: closed after ${r.ms} ms`);
    assert.equal(r.text, '', 'no answer for a request that never arrived');
  }
  // an idle keep-alive connection is closed after the same time
  const idle = raw(d.httpPort, `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  assert.equal(parse(await within(idle.answer, 5000, 'healthz answer')).status, 200);
  const ir = await within(idle.closed, 10000, 'idle keep-alive closed');
  assert.ok(ir.ms >= 1500 && ir.ms < 8000, `idle connection closed after ${ir.ms} ms`);
  // a forged gate header from a client changes nothing
  const r = await fetch(`${d.url}/v1/webhooks`, { headers: { ...auth, 'x-statusrelay-gate': 'too-large' } });
  assert.equal(r.status, 200);
  await r.text();
});

test('GET /v1/events?after=2^64-1 is "nothing after", not the start; one more is a 400', async () => {
  assert.equal(await ingest(d, API_KEY, upstreamPayload({ rid: rid('rl') })), 200);
  const get = async (q) => { const r = await fetch(`${d.url}/v1/events${q}`, { headers: auth }); return { status: r.status, body: await r.json() }; };
  const all = await get('?after=0');
  assert.equal(all.status, 200);
  assert.ok(all.body.events.length >= 1, 'an event exists');
  const max = await get('?after=18446744073709551615');
  assert.equal(max.status, 200);
  assert.deepEqual(max.body.events, []);
  assert.equal(max.body.cursor, '18446744073709551615-18446744073709551615');
  const maxSeq = await get('?after=18446744073709551615-18446744073709551615');
  assert.deepEqual(maxSeq.body.events, []);
  const over = await get('?after=18446744073709551616');
  assert.equal(over.status, 400);
  assert.equal(over.body.error.field, 'after');
});

test('webhook targets named localhost in any spelling are refused at registration (forbidden_target)', async () => {
  for (const url of ['http://a.localhost/', 'http://localhost./', 'http://LOCALHOST:9/x', 'http://x.y.LocalHost./h']) {
    const r = await fetch(`${open.url}/v1/webhooks`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ url }) });
    const b = await r.json();
    assert.equal(r.status, 400, `${url}: ${JSON.stringify(b)}`);
    assert.equal(b.error.code, 'forbidden_target', url);
  }
  const list = await (await fetch(`${open.url}/v1/webhooks`)).json();
  assert.equal(list.webhooks.length, 0);
});

test('listening on 127.0.0.1.example.com is not loopback: start-up needs the admin token', () => {
  const r = spawnSync(BIN, ['serve'], {
    env: { ...process.env, STATUSRELAY_HTTP_LISTEN: '127.0.0.1.example.com:8080', STATUSRELAY_REDIS_URL: redis.url },
    timeout: 10000, encoding: 'utf8',
  });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /invalid setting STATUSRELAY_ADMIN_TOKEN: required when listening beyond loopback/);
});

test('STATUSRELAY_HTTP_REQUEST_TIMEOUT is validated with one line naming it', () => {
  const r = spawnSync(BIN, ['serve'], { env: { ...process.env, STATUSRELAY_HTTP_REQUEST_TIMEOUT: '5x', STATUSRELAY_REDIS_URL: redis.url }, timeout: 10000, encoding: 'utf8' });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /STATUSRELAY_HTTP_REQUEST_TIMEOUT/);
});
