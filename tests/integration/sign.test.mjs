// sign.test.mjs - our webhook signatures against independent implementations: the official
// Standard Webhooks npm package (`standardwebhooks`) for v1, Node's crypto (OpenSSL, but not
// our code) for v1a Ed25519 and the upstream X-Signature-SHA256 scheme. Our side is
// helpers/sign_tool, a thin CLI over protocol/sign.c. No daemon, no Redis.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import standardwebhooks from 'standardwebhooks';
import { HELPERS } from './lib/proc.mjs';

const { Webhook } = standardwebhooks;
const TOOL = path.join(HELPERS, 'sign_tool');
const TMP = fs.mkdtempSync(path.join(os.tmpdir(), 'sr-sign-'));
process.on('exit', () => fs.rmSync(TMP, { recursive: true, force: true }));

let nfile = 0;
/** Write a body (string as UTF-8, or Buffer) to a fresh file; returns its path. */
function bodyFile(body) {
  const p = path.join(TMP, `body-${nfile++}`);
  fs.writeFileSync(p, typeof body === 'string' ? Buffer.from(body, 'utf8') : body);
  return p;
}

/** Run sign_tool; returns { code, out, err }. */
function tool(...args) {
  const r = spawnSync(TOOL, args.map(String), { encoding: 'utf8' });
  if (r.error) throw new Error(`cannot run ${TOOL} (build it: make helpers): ${r.error.message}`);
  return { code: r.status, out: r.stdout.trim(), err: r.stderr.trim() };
}

function mustSign(...args) {
  const r = tool(...args);
  assert.equal(r.code, 0, `sign_tool ${args[0]} failed: ${r.err}`);
  return r.out;
}

const nowS = () => Math.floor(Date.now() / 1000);
const newSecret = (n = 32) => 'whsec_' + crypto.randomBytes(n).toString('base64');
const msgId = () => 'evt_' + crypto.randomBytes(12).toString('base64url');

// Random text: ASCII, JSON-hostile characters, accents, CJK, RTL, emoji (astral plane),
// combining marks, ZWJ sequences. No lone surrogates (they are not representable in UTF-8).
const PIECES = ['a', 'Z', '0', ' ', '"', '\\', '\n', '\r\n', '\t', '{', '}', '\u0000', '\u001f',
  'é', 'ß', 'Ω', 'ж', '中文', '日本語', 'עברית', 'العربية', '€', '😀', '👩‍👩‍👧', '🇩🇪',
  'e\u0301', '\u200b', '\ufeff', '\uffff', '𝄞', '\u{10ffff}'];
function randomText(n) {
  let s = '';
  while (s.length < n) s += PIECES[crypto.randomInt(PIECES.length)];
  return s;
}
function randomEvent(textLen = 40) {
  return JSON.stringify({
    event: 'request.status.updated',
    timestamp: Date.now(),
    data: { status: 'success', requestId: '0x' + crypto.randomBytes(32).toString('hex'),
      details: randomText(textLen), txHashes: ['0x' + crypto.randomBytes(32).toString('hex')] },
    statusrelay: { eventId: msgId(), seq: crypto.randomInt(1000) },
  });
}

test('sign_tool is built', () => {
  assert.ok(fs.existsSync(TOOL), `${TOOL} missing; build it with make helpers`);
});

test('v1 signed by sign_tool verifies with the official standardwebhooks package', () => {
  const bodies = [
    '{}', '', randomEvent(0), randomEvent(2000),
    randomText(1), randomText(500), // not JSON: verified with jsonParse: false
    randomEvent(100 * 1024), // ~100 KB of unicode
    'x'.repeat(100 * 1024),
  ];
  for (let i = 0; i < 30; i++) bodies.push(randomEvent(crypto.randomInt(1, 3000)));
  for (const [i, body] of bodies.entries()) {
    const secret = newSecret([24, 32, 48, 64][i % 4]);
    const id = msgId();
    const ts = nowS();
    const sig = mustSign('sw-sign', secret, id, ts, bodyFile(body));
    assert.match(sig, /^v1,[A-Za-z0-9+/]{43}=$/);
    const headers = { 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': sig };
    let isJson = true;
    try { JSON.parse(body); } catch { isJson = false; }
    const wh = new Webhook(secret);
    const got = wh.verify(body, headers, { jsonParse: isJson });
    if (isJson && body !== '') assert.deepEqual(got, JSON.parse(body));
    // Same signature as the package computes itself, and with the prefix-less secret.
    assert.equal(wh.sign(id, new Date(ts * 1000), body), sig);
    new Webhook(secret.slice('whsec_'.length)).verify(body, headers, { jsonParse: false });
    // A Buffer payload (how a raw-body HTTP handler sees it) verifies too.
    wh.verify(Buffer.from(body, 'utf8'), headers, { jsonParse: false });
    // Tampering is caught by the package.
    const noMatch = /No matching signature/, raw = { jsonParse: false };
    assert.throws(() => wh.verify(body + ' ', headers, raw), noMatch);
    assert.throws(() => wh.verify(body, { ...headers, 'webhook-id': id + 'x' }, raw), noMatch);
    assert.throws(() => new Webhook(newSecret()).verify(body, headers, raw), noMatch);
  }
});

test('v1 signed by the standardwebhooks package verifies with sign_tool', () => {
  for (let i = 0; i < 25; i++) {
    const secret = newSecret(i % 2 ? 24 : 32);
    const wh = new Webhook(secret);
    const id = msgId();
    const ts = nowS() - crypto.randomInt(0, 250);
    const body = i === 0 ? randomEvent(100 * 1024) : randomEvent(crypto.randomInt(0, 4000));
    const sig = wh.sign(id, new Date(ts * 1000), body);
    const f = bodyFile(body);
    assert.equal(tool('sw-verify', secret, id, ts, sig, f).code, 0, `body ${i}`);
    assert.equal(tool('sw-verify', secret.slice(6), id, ts, sig, f).code, 0, 'prefix optional');
    // Tampered body, id, timestamp, signature; other secret.
    assert.equal(tool('sw-verify', secret, id, ts, sig, bodyFile(body + '\n')).code, 1);
    assert.equal(tool('sw-verify', secret, id + '1', ts, sig, f).code, 1);
    assert.equal(tool('sw-verify', secret, id, ts + 1, sig, f).code, 1);
    const flipped = sig.slice(0, 10) + (sig[10] === 'A' ? 'B' : 'A') + sig.slice(11);
    assert.equal(tool('sw-verify', secret, id, ts, flipped, f).code, 1);
    assert.equal(tool('sw-verify', newSecret(), id, ts, sig, f).code, 1);
  }
});

test('secret rotation: several signatures in one header, both sides', () => {
  const oldSecret = newSecret(), newSec = newSecret();
  const id = msgId(), ts = nowS(), body = randomEvent(300), f = bodyFile(body);
  const ours = mustSign('sw-sign', newSec, id, ts, f);
  const theirs = new Webhook(oldSecret).sign(id, new Date(ts * 1000), body);
  const header = `${ours} ${theirs}`;
  const headers = { 'webhook-id': id, 'webhook-timestamp': String(ts),
    'webhook-signature': header };
  new Webhook(oldSecret).verify(body, headers);
  new Webhook(newSec).verify(body, headers);
  assert.throws(() => new Webhook(newSecret()).verify(body, headers), /No matching signature/);
  assert.equal(tool('sw-verify', oldSecret, id, ts, header, f).code, 0);
  assert.equal(tool('sw-verify', newSec, id, ts, header, f).code, 0);
  assert.equal(tool('sw-verify', newSecret(), id, ts, header, f).code, 1);
  // Unknown versions are skipped by both.
  const mixed = `v2,${crypto.randomBytes(32).toString('base64')} ${ours}`;
  new Webhook(newSec).verify(body, { ...headers, 'webhook-signature': mixed });
  assert.equal(tool('sw-verify', newSec, id, ts, mixed, f).code, 0);
});

test('timestamp tolerance agrees with the package (5 minutes)', () => {
  const secret = newSecret(), wh = new Webhook(secret), id = msgId(), body = '{"a":1}';
  const f = bodyFile(body);
  for (const [offset, ok] of [[-200, true], [200, true], [-400, false], [400, false]]) {
    const ts = nowS() + offset;
    const sig = mustSign('sw-sign', secret, id, ts, f);
    const headers = { 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': sig };
    if (ok) wh.verify(body, headers);
    else assert.throws(() => wh.verify(body, headers), /too (old|new)/);
    const r = tool('sw-verify', secret, id, ts, sig, f);
    assert.equal(r.code, ok ? 0 : 1, `offset ${offset}: ${r.err}`);
    if (!ok) assert.match(r.err, /stale/);
  }
  // Edges, with an explicit clock: exactly 300 s passes, 301 s does not.
  const ts = 1787055532, sig = mustSign('sw-sign', secret, id, ts, f);
  assert.equal(tool('sw-verify', secret, id, ts, sig, f, ts + 300).code, 0);
  assert.equal(tool('sw-verify', secret, id, ts, sig, f, ts - 300).code, 0);
  assert.equal(tool('sw-verify', secret, id, ts, sig, f, ts + 301).code, 1);
  assert.equal(tool('sw-verify', secret, id, ts, sig, f, ts - 301).code, 1);
});

// Ed25519 helpers with Node's crypto: raw 32-byte keys <-> KeyObjects.
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const pubKeyFromWhpk = (whpk) => crypto.createPublicKey({
  key: Buffer.concat([SPKI_PREFIX, Buffer.from(whpk.slice('whpk_'.length), 'base64')]),
  format: 'der', type: 'spki' });

test('v1a (Ed25519): sign_tool and Node crypto agree both ways', () => {
  for (let i = 0; i < 10; i++) {
    const seed = crypto.randomBytes(32);
    const priv = crypto.createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der',
      type: 'pkcs8' });
    const whpk = mustSign('ed-public', seed.toString('hex'));
    const nodePub = crypto.createPublicKey(priv).export({ format: 'der', type: 'spki' });
    assert.equal(whpk, 'whpk_' + nodePub.subarray(12).toString('base64'));

    const id = msgId(), ts = nowS();
    const body = i === 0 ? randomEvent(100 * 1024) : randomEvent(crypto.randomInt(0, 2000));
    const f = bodyFile(body);
    const content = Buffer.from(`${id}.${ts}.${body}`, 'utf8');
    const ours = mustSign('sw-sign-ed', seed.toString('hex'), id, ts, f);
    assert.match(ours, /^v1a,[A-Za-z0-9+/]{86}==$/);
    const sigBytes = Buffer.from(ours.slice(4), 'base64');
    assert.ok(crypto.verify(null, content, pubKeyFromWhpk(whpk), sigBytes), 'node verifies ours');
    assert.ok(!crypto.verify(null, Buffer.concat([content, Buffer.from(' ')]),
      pubKeyFromWhpk(whpk), sigBytes), 'node rejects a tampered body');
    // Ed25519 is deterministic: Node's signature is byte-identical and verifies with ours.
    const theirs = 'v1a,' + crypto.sign(null, content, priv).toString('base64');
    assert.equal(theirs, ours);
    assert.equal(tool('sw-verify', whpk, id, ts, theirs, f).code, 0);
    assert.equal(tool('sw-verify', whpk, id, ts, `v1,AAAA ${theirs}`, f).code, 0);
    assert.equal(tool('sw-verify', whpk, id + 'x', ts, theirs, f).code, 1);
    assert.equal(tool('sw-verify', whpk, id, ts + 1, theirs, f).code, 1);
    assert.equal(tool('sw-verify', whpk, id, ts, theirs, bodyFile(body + 'x')).code, 1);
    const other = crypto.generateKeyPairSync('ed25519').publicKey
      .export({ format: 'der', type: 'spki' });
    const otherPk = 'whpk_' + other.subarray(12).toString('base64');
    assert.equal(tool('sw-verify', otherPk, id, ts, theirs, f).code, 1);
  }
});

test('upstream X-Signature-SHA256: sign_tool and Node crypto agree both ways', () => {
  const url = new URL('../fixtures/upstream/webhook_delivery_signed.json', import.meta.url);
  const fixture = JSON.parse(fs.readFileSync(url, 'utf8'));
  const fts = fixture.headers['X-Signature-Timestamp'];
  const fsig = fixture.headers['X-Signature-SHA256'];
  const fbody = bodyFile(fixture.body);
  assert.equal(mustSign('upstream-sign', fixture.signingKey, fts, fbody), fsig);
  assert.equal(tool('upstream-verify', fixture.signingKey, fts, fsig, fbody, fts).code, 0);

  for (let i = 0; i < 10; i++) {
    const key = crypto.randomBytes(18).toString('base64url');
    const ts = i % 2 ? String(Date.now()) : String(nowS());  // ms or s
    const body = randomEvent(crypto.randomInt(0, 3000));
    const f = bodyFile(body);
    const theirs = crypto.createHmac('sha256', key).update(`${ts}.${body}`).digest('hex');
    assert.equal(mustSign('upstream-sign', key, ts, f), theirs);
    assert.equal(tool('upstream-verify', key, ts, theirs, f).code, 0);
    assert.equal(tool('upstream-verify', key, ts, theirs.toUpperCase(), f).code, 0);
    assert.equal(tool('upstream-verify', key, ts, theirs, bodyFile(body + ' ')).code, 1);
    assert.equal(tool('upstream-verify', key + 'x', ts, theirs, f).code, 1);
    const old = String(Number(ts) - (i % 2 ? 301000 : 301));
    const oldSig = crypto.createHmac('sha256', key).update(`${old}.${body}`).digest('hex');
    const r = tool('upstream-verify', key, old, oldSig, f);
    assert.equal(r.code, 1);
    assert.match(r.err, /stale/);
  }
});
