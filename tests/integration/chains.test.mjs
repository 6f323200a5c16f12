// chains.test.mjs - the upstream chain list (issue 13): GET /chains read from the shared
// upstream budget, cached in Redis, refreshed by one process at a time, served verbatim at
// GET /v1/chains and, slimmed, at GET /chains.json on the dashboard port; the live page shows
// chain names and icons from it, links every tx hash to the chain's explorer and marks requests
// on disabled or lagging chains.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { until } from './lib/proc.mjs';
import { haveChromium, openBrowser } from './lib/browser.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';

const KEY = 'chains-key';
const TOKEN = 'chains-admin-token';
let prefixN = 0;

async function stopDaemon(d) {
  const r = await d.stop();
  const log = d.proc.log();
  assert.doesNotMatch(log, /Sanitizer|runtime error/, `${d.proc.logPath}: ${log.slice(-3000)}`);
  assert.equal(r.code, 0, `${d.proc.logPath}: exit ${r.code ?? r.signal}`);
}

async function get(url, headers = {}) {
  const r = await fetch(url, { headers });
  const text = await r.text();
  let body = null;
  try { body = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, headers: r.headers, text, body };
}

const chainCalls = (st) => Object.values(st.http.byPath['/chains'] ?? {}).reduce((a, b) => a + b, 0);

/** The explorer link of a tx hash, as the upstream's own clients build it. */
function explorerTx(c, hash) {
  return c.explorerUrl.replace(/\/+$/, '') + c.explorerPaths.transaction.replace('{TX_HASH}', hash);
}

test('GET /v1/chains: the upstream list verbatim, drawn from the budget, 503 before the first fetch', async () => {
  const sim = await startSim({ apiKey: KEY, seed: 5 });
  const redis = await startRedis();
  const prefix = `chn${prefixN++}`;
  // the shared budget is spent: 60/min refills 0.9 calls/s, so the bucket holds a call again
  // only ~4.4 s from now - no /chains call may be made before that
  await redis.cmd('HSET', `{${prefix}}:budget`, 't', '-3', 'ts', String(Date.now()));
  const t0 = Date.now();
  const d = await startDaemon({
    redisUrl: redis.url, apiKey: KEY, apiUrl: sim.url, wsUrl: sim.wsUrl, name: 'chains-budget',
    env: { STATUSRELAY_REDIS_PREFIX: prefix, STATUSRELAY_UPSTREAM_BUDGET: '60', STATUSRELAY_ADMIN_TOKEN: TOKEN },
  });
  const auth = { authorization: `Bearer ${TOKEN}` };
  try {
    let r = await get(`${d.url}/v1/chains`, auth);
    assert.equal(r.status, 503, r.text);
    assert.equal(r.body.error.code, 'chains_unavailable');
    assert.equal(r.headers.get('retry-after'), '5');
    r = await get(`http://127.0.0.1:${d.wsPort}/chains.json`);
    assert.equal(r.status, 503, r.text);
    assert.equal(r.body.error.code, 'chains_unavailable');
    assert.equal(chainCalls(await sim.stats()), 0, 'no call while the budget is spent');

    // admin token rules as every /v1 path
    assert.equal((await get(`${d.url}/v1/chains`)).status, 401);

    r = await until(async () => { const x = await get(`${d.url}/v1/chains`, auth); return x.status === 200 && x; },
      { timeoutMs: 20000, msg: '/v1/chains 200' });
    const waited = Date.now() - t0;
    console.log(`# first /chains fetch ${waited} ms after start (budget spent for ~4.4 s)`);
    assert.ok(waited >= 3500, `fetched after ${waited} ms: the budget was not honoured`);
    // byte for byte what the upstream answers (the sim's control copy is not an upstream call)
    const upstream = await fetch(`${sim.url}/_sim/chains`).then((x) => x.text());
    assert.equal(r.text, upstream);
    assert.match(r.headers.get('content-type'), /application\/json/);
    assert.ok(r.headers.get('last-modified'), 'Last-Modified: when it was fetched');
    const st = await sim.stats();
    assert.deepEqual(st.http.byPath['/chains'], { 200: 1 });
    const m = await get(`${d.url}/metrics`, auth);
    assert.match(m.text, /^statusrelay_upstream_http_total\{path="other",class="2xx"\} 1$/m);
    assert.match(m.text, /^statusrelay_upstream_budget_used_total [1-9]/m);
    // cached in Redis under the prefix (store/keys.h)
    assert.equal(await redis.cmd('HGET', `{${prefix}}:chains`, 'body'), upstream);

    // the dashboard port: the same chains, only the fields the page reads
    const page = await until(async () => { const x = await get(`http://127.0.0.1:${d.wsPort}/chains.json`); return x.status === 200 && x; },
      { timeoutMs: 10000, msg: '/chains.json 200' });
    const full = JSON.parse(upstream).chains;
    assert.deepEqual(page.body.chains.map((c) => c.id), full.map((c) => c.id));
    for (const c of page.body.chains) {
      const u = full.find((x) => x.id === c.id);
      for (const k of ['name', 'displayName', 'iconUrl', 'explorerUrl', 'explorerPaths', 'disabled', 'blockProductionLagging'])
        assert.deepEqual(c[k], u[k], `${c.id} ${k}`);
      assert.equal(c.currency, undefined, 'no token lists on the dashboard port');
    }
    // the simulator marks one chain disabled and one lagging
    assert.equal(full.find((c) => c.id === 137).disabled, true);
    assert.equal(full.find((c) => c.id === 10).blockProductionLagging, true);
    assert.equal(full.find((c) => c.id === 1).explorerPaths.transaction, '/tx/{TX_HASH}');
  } finally {
    await stopDaemon(d);
    await redis.stop();
    await sim.stop();
  }
});

test('refresh: a changed upstream list is picked up every STATUSRELAY_CHAINS_REFRESH, by one process at a time', { timeout: 60000 }, async () => {
  const sim = await startSim({ apiKey: KEY, seed: 6 });
  const redis = await startRedis();
  const env = { STATUSRELAY_REDIS_PREFIX: `chn${prefixN++}`, STATUSRELAY_CHAINS_REFRESH: '2s' };
  const a = await startDaemon({ redisUrl: redis.url, apiKey: KEY, apiUrl: sim.url, wsUrl: sim.wsUrl, env, name: 'chains-a' });
  const b = await startDaemon({ redisUrl: redis.url, apiKey: KEY, apiUrl: sim.url, wsUrl: sim.wsUrl, env, name: 'chains-b' });
  try {
    for (const d of [a, b])
      await until(async () => (await d.get('/v1/chains')).status === 200, { timeoutMs: 10000, msg: 'first fetch' });
    const eth = (body) => body.chains.find((c) => c.id === 1);
    assert.equal(eth((await a.get('/v1/chains')).body).disabled, false);

    await sim.control('/chains', { id: 1, disabled: true });
    for (const d of [a, b]) {
      await until(async () => eth((await d.get('/v1/chains')).body).disabled === true,
        { timeoutMs: 8000, msg: 'the change in /v1/chains' });
      // every process hands the new list to its dashboard port, whichever one fetched it
      await until(async () => eth((await get(`http://127.0.0.1:${d.wsPort}/chains.json`)).body ?? { chains: [{ id: 1 }] }).disabled === true,
        { timeoutMs: 8000, msg: 'the change in /chains.json' });
    }

    // two processes, one refresh each period between them
    await sim.control('/stats/reset', {});
    const ms = 8000;
    await sleep(ms);
    const calls = chainCalls(await sim.stats());
    console.log(`# ${calls} GET /chains in ${ms} ms from 2 processes with a 2 s refresh`);
    assert.ok(calls >= 2 && calls <= ms / 2000 + 1, `${calls} calls`);
    assert.match(a.proc.log() + b.proc.log(), /upstream chain list fetched/);
  } finally {
    await stopDaemon(a);
    await stopDaemon(b);
    await redis.stop();
    await sim.stop();
  }
});

test('an upstream that refuses /chains: 503 stays, retried after a full period, not every tick', async () => {
  const sim = await startSim({ apiKey: KEY, seed: 7 });
  const redis = await startRedis();
  await sim.control('/faults', { httpErrorRate: 1, httpErrorPath: '/chains', httpErrorStatus: 503 });
  const d = await startDaemon({
    redisUrl: redis.url, apiKey: KEY, apiUrl: sim.url, wsUrl: sim.wsUrl, name: 'chains-503',
    env: { STATUSRELAY_REDIS_PREFIX: `chn${prefixN++}`, STATUSRELAY_CHAINS_REFRESH: '1s' },
  });
  try {
    await until(async () => chainCalls(await sim.stats()) >= 1, { timeoutMs: 10000, msg: 'a first try' });
    await sleep(3000);
    // a 5xx keeps the refresh lease 30 s: one try, not one per 250 ms tick
    assert.equal(chainCalls(await sim.stats()), 1);
    const r = await d.get('/v1/chains');
    assert.equal(r.status, 503);
    assert.equal(r.body.error.code, 'chains_unavailable');
    assert.match(d.proc.log(), /upstream chain list read failed.*status=503/);
  } finally {
    await stopDaemon(d);
    await redis.stop();
    await sim.stop();
  }
});

test('the live page in headless Chromium: chain names and icons from the list, explorer links, disabled and lagging marks', { timeout: 120000 }, async (t) => {
  if (!haveChromium()) { t.skip('chromium is not installed (make deps)'); return; }
  const sim = await startSim({ apiKey: KEY, seed: 8 });
  const redis = await startRedis();
  const d = await startDaemon({
    redisUrl: redis.url, apiKey: KEY, apiUrl: sim.url, wsUrl: sim.wsUrl, name: 'chains-page',
    env: { STATUSRELAY_REDIS_PREFIX: `chn${prefixN++}`, STATUSRELAY_CHAINS_REFRESH: '1s' },
  });
  let browser;
  try {
    const plan = { plain: ['success', 1, 42161], disabled: ['success', 137, 8453], lagging: ['delayed', 10, 42161] };
    const ids = {};
    for (const [k, [lifecycle, o, de]] of Object.entries(plan))
      ids[k] = (await sim.control('/requests', { lifecycle, stepMs: 300, originChainId: o, destinationChainId: de })).id;
    const tr = await d.post('/v1/requests', { requestIds: Object.values(ids) });
    assert.ok([200, 201].includes(tr.status), JSON.stringify(tr));
    const list = (await until(async () => { const x = await d.get('/v1/chains'); return x.status === 200 && x.body; },
      { timeoutMs: 10000, msg: '/v1/chains' })).chains;
    const byId = new Map(list.map((c) => [c.id, c]));

    browser = await openBrowser();
    const { page, problems } = browser;
    await page.goto(`http://127.0.0.1:${d.wsPort}/`);
    await page.waitForSelector('#conn.pill-ok', { timeout: 10000 });
    for (const id of Object.values(ids)) await page.waitForSelector(`#rows tr[data-id="${id}"]`, { timeout: 20000 });

    // names and icons from the list ("Arbitrum One": the upstream's displayName)
    const row = (k) => `#rows tr[data-id="${ids[k]}"]`;
    await page.waitForFunction((sel) => document.querySelector(`${sel} .chain[data-chain-id="42161"] .chain-name`)?.textContent === 'Arbitrum One', row('plain'), { timeout: 10000 });
    const shown = await page.$$eval(`${row('plain')} .chain`, (els) => els.map((e) => ({
      id: Number(e.dataset.chainId), name: e.querySelector('.chain-name').textContent, icon: e.querySelector('img.chain-icon')?.getAttribute('src'),
    })));
    assert.deepEqual(shown, [1, 42161].map((id) => ({ id, name: byId.get(id).displayName, icon: byId.get(id).iconUrl })));
    const loaded = await page.$$eval(`${row('plain')} img.chain-icon`, (imgs) => imgs.every((i) => i.complete && i.naturalWidth > 0));
    assert.ok(loaded, 'icons render');

    // the marks: Polygon is disabled, Optimism lags, Ethereum -> Arbitrum neither
    assert.equal(await page.textContent(`${row('disabled')} .chain[data-chain-id="137"] .mark-chain-disabled`), 'disabled');
    assert.equal(await page.textContent(`${row('lagging')} .chain[data-chain-id="10"] .mark-chain-lagging`), 'lagging');
    assert.equal(await page.$(`${row('plain')} .mark-chain`), null);
    assert.ok(await page.$eval(row('disabled'), (e) => e.classList.contains('chain-warn')));
    assert.ok(await page.$eval(row('lagging'), (e) => e.classList.contains('chain-warn')));

    // every in/out hash of the selected request is a link built from the list
    await until(async () => (await sim.control(`/requests/${ids.plain}`)).status === 'success', { timeoutMs: 20000, msg: 'success' });
    await page.click(row('plain'));
    await page.waitForFunction(() => document.querySelectorAll('#tl-meta a.tx').length >= 2, null, { timeout: 15000 });
    const v3 = (await sim.control(`/requests/${ids.plain}`)).statusV3;
    const links = await page.$$eval('#tl-meta a.tx', (as) => as.map((a) => ({ hash: a.dataset.hash, chain: Number(a.dataset.chainId), href: a.getAttribute('href'), target: a.target, rel: a.rel })));
    assert.deepEqual(links.map((l) => l.hash), [...v3.inTxHashes, ...v3.txHashes]);
    for (const l of links) {
      assert.equal(l.href, explorerTx(byId.get(l.chain), l.hash));
      assert.equal(l.target, '_blank');
      assert.match(l.rel, /noopener/);
    }
    assert.equal(links[0].chain, 1);
    assert.match(links[0].href, /^https:\/\/etherscan\.io\/tx\/0x[0-9a-f]{64}$/);
    assert.equal(links.at(-1).chain, 42161);
    assert.match(links.at(-1).href, /^https:\/\/arbiscan\.io\/tx\//);
    // the timeline's events link their hashes too (the list may fill after the summary)
    await page.waitForFunction(() => document.querySelectorAll('#tl-list a.tx').length >= 2, null, { timeout: 15000 }).catch(() => {});
    const tlLinks = await page.$$eval('#tl-list a.tx', (as) => as.map((a) => a.getAttribute('href')));
    assert.ok(tlLinks.length >= 2 && tlLinks.every((h) => links.some((l) => l.href === h)), JSON.stringify(tlLinks));

    fs.mkdirSync(path.resolve('out'), { recursive: true });
    await page.screenshot({ path: path.resolve('out', 'chains-page.png') });

    // the list changes upstream: a reload of the page shows the new mark
    await sim.control('/chains', { id: 1, blockProductionLagging: true });
    await until(async () => (await get(`http://127.0.0.1:${d.wsPort}/chains.json`)).body?.chains?.find((c) => c.id === 1)?.blockProductionLagging === true,
      { timeoutMs: 10000, msg: 'new list on the dashboard port' });
    await page.reload();
    await page.waitForSelector(`${row('plain')} .chain[data-chain-id="1"] .mark-chain-lagging`, { timeout: 20000 });
    assert.deepEqual(problems, []);
  } finally {
    if (browser) await browser.close();
    await stopDaemon(d);
    await redis.stop();
    await sim.stop();
  }
});
