// page_facts.test.mjs - the live page's search box and facts view (issue 24, last bullet) and
// the dashboard messages behind them (docs/dashboard.md): {"type":"find","q"} answers summary
// rows of the requests a q of GET /v1/requests finds (at most 20 for an anonymous client, a
// term the relay does not know looked up once upstream, anonymously within the address's miss
// rate - the table the REST API's anonymous lookups use); {"type":"facts","filters":{"id"}}
// answers a request's facts as GET /v1/requests/{id} serves them (explorer links from the chain
// list), not_found for an id the relay does not know; bad messages get their error frame on an
// open connection. In headless Chromium: search a tx hash, open the row, see the recipient and
// the explorer link of the fill. And (issue 25, last bullet) the page marks rows whose watch
// ended final / abandoned - live, and after a reload from the snapshot frames'
// statusrelay.watchEnded - takes the mark away when a later status event comes (a reversal
// read through GET /intents/status/v3), and lists the endpoint.disabled events of a 410
// receiver; the windows are 2-3 s (STATUSRELAY_SETTLED_WATCH, _WAITING_TTL).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { until } from './lib/proc.mjs';
import { haveChromium, openBrowser } from './lib/browser.mjs';
import { client, sub, subscribed } from './lib/dash_client.mjs';
import { rid, startReceiver } from './lib/hooks.mjs';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { startSim } from './lib/sim.mjs';

const KEY = 'page-facts-key';
const ROW_KEYS = ['createdAt', 'destinationChainId', 'originChainId', 'recipient', 'requestId', 'status', 'updatedAt', 'user'];
let prefixN = 0;

const hex = (n) => '0x' + crypto.randomBytes(n).toString('hex');
/** An integer amount in whole units: "1500000000000000000", 18 -> "1.5". */
const units = (a, dec) => {
  const p = a.padStart(dec + 1, '0'), f = p.slice(p.length - dec).replace(/0+$/, '');
  return `${BigInt(p.slice(0, p.length - dec))}${f ? `.${f}` : ''}`;
};

/** The explorer link of a tx hash, as the upstream's own clients build it. */
function explorerTx(c, hash) {
  return c.explorerUrl.replace(/\/+$/, '') + c.explorerPaths.transaction.replace('{TX_HASH}', hash);
}

async function stack(name, env = {}) {
  const sim = await startSim({ apiKey: KEY, seed: 31, rateLimit: 0 });
  const redis = await startRedis();
  const d = await startDaemon({
    redisUrl: redis.url, apiKey: KEY, apiUrl: sim.url, wsUrl: sim.wsUrlWithKey, name,
    env: { STATUSRELAY_REDIS_PREFIX: `pgf${prefixN++}`, ...env },
  });
  return {
    sim, redis, d,
    async stop() {
      const r = await d.stop();
      const log = d.proc.log();
      await sim.stop();
      await redis.stop();
      assert.doesNotMatch(log, /Sanitizer|runtime error/, `${d.proc.logPath}: ${log.slice(-3000)}`);
      assert.equal(r.code, 0, `${d.proc.logPath}: exit ${r.code ?? r.signal}`);
    },
  };
}

/** The settled facts of a request the relay tracks (GET /v1/requests/{id}). */
const settledFacts = (d, id) => until(async () => {
  const g = await d.get(`/v1/requests/${id}`);
  return g.body?.request?.outTxs?.length > 0 && g.body?.request?.fees?.actual && g.body;
}, { msg: `settled facts of ${id}`, timeoutMs: 30000 });

/** Send one message and wait for the answer of that type (success or error). */
async function ask(c, msg) {
  const before = c.frames.length;
  c.send(msg);
  const type = typeof msg === 'object' && msg.type;
  return c.wait((f) => c.frames.indexOf(f) >= before && (f.type === type || f.type === 'error') && f.status,
    `answer to ${JSON.stringify(msg).slice(0, 80)}`, 15000);
}

const lookups = (d) => (d.proc.log().match(/msg="search term looked up"/g) ?? []).length;

test('find and facts over the dashboard websocket: summary rows, 20 for anonymous clients, their miss rate shared with REST, not_found, bad input', { timeout: 180000 }, async () => {
  // no admin token: /v1 is open, so REST lookups are anonymous too (one table of misses)
  const s = await stack('page-find', { STATUSRELAY_ANON_MISS_RATE: '1', STATUSRELAY_UPSTREAM_BUDGET: '3000' });
  const { sim, d } = s;
  const trusted = client(d.wsUrl); // a tool on the loopback listener
  const anon = client(d.wsUrl, { headers: { Origin: 'http://elsewhere.example' } }); // a page of another origin
  try {
    await trusted.ready;
    await anon.ready;
    // 22 requests of one wallet, tracked; their facts (the user) come with the reads by id
    const user = '0x' + [...crypto.randomBytes(20).toString('hex')].map((c, i) => (i % 3 ? c : c.toUpperCase())).join('');
    const ids = [];
    for (let i = 0; i < 22; i++)
      ids.push((await sim.control('/requests', { lifecycle: 'success', stepMs: 150, user, originChainId: 8453, destinationChainId: 42161 })).id);
    assert.equal((await d.post('/v1/requests', { requestIds: ids })).status, 201);
    for (const id of ids)
      await until(async () => (await d.get(`/v1/requests/${id}`)).body?.request?.user, { msg: `facts of ${id}`, timeoutMs: 60000 });
    const rest = await d.get(`/v1/requests?user=${user}&limit=100`);
    assert.equal(rest.body.requests.length, 22, rest.text);
    const before = lookups(d);

    // a tool on loopback: every row (up to 100), the summary only
    let a = await ask(trusted, { type: 'find', q: user.toLowerCase() });
    assert.equal(a.type, 'find');
    assert.equal(a.status, 'success', JSON.stringify(a));
    assert.equal(a.data.q, user.toLowerCase());
    assert.equal(a.data.limit, 100);
    assert.equal(a.data.more, false);
    assert.deepEqual(a.data.requests.map((r) => r.requestId).sort(), [...ids].sort());
    assert.deepEqual(a.data.requests.map((r) => r.requestId), rest.body.requests.map((r) => r.requestId), 'oldest created first, as REST');
    for (const r of a.data.requests) {
      assert.deepEqual(Object.keys(r).sort(), ROW_KEYS);
      assert.equal(r.user.toLowerCase(), user.toLowerCase());
      assert.equal(typeof r.createdAt, 'number');
      assert.equal(r.originChainId, 8453);
      assert.equal(r.destinationChainId, 42161);
    }
    // an anonymous client (a page of another origin): at most 20 rows, "more" says there are more
    a = await ask(anon, { type: 'find', q: user });
    assert.equal(a.status, 'success', JSON.stringify(a));
    assert.equal(a.data.limit, 20);
    assert.equal(a.data.more, true);
    assert.equal(a.data.requests.length, 20);
    assert.deepEqual(a.data.requests.map((r) => r.requestId), rest.body.requests.slice(0, 20).map((r) => r.requestId));
    for (const r of a.data.requests) assert.deepEqual(Object.keys(r).sort(), ROW_KEYS);
    assert.equal(lookups(d), before, 'terms the relay knows ask nobody');

    // facts of a settled request: what GET /v1/requests/{id} serves, explorer links and all
    const g = await settledFacts(d, ids[0]);
    for (const c of [trusted, anon]) {
      const f = await ask(c, { type: 'facts', filters: { id: ids[0] } });
      assert.equal(f.type, 'facts');
      assert.equal(f.status, 'success', JSON.stringify(f));
      assert.deepEqual(f.data.filters, { id: ids[0] });
      assert.equal(f.data.requestId, ids[0]);
      assert.equal(f.data.status, g.status);
      assert.deepEqual(f.data.request, g.request);
      assert.match(f.data.request.outTxs[0].explorerUrl, /^https:\/\/arbiscan\.io\/tx\/0x/);
    }
    // an id the relay does not know: not_found, the connection stays open
    const nobody = rid('nobody');
    const nf = await ask(anon, { type: 'facts', filters: { id: nobody } });
    assert.deepEqual([nf.type, nf.status, nf.error.code], ['facts', 'error', 'not_found']);
    assert.deepEqual(nf.data.filters, { id: nobody });
    // bad input: an error frame of the message's type, the connection stays usable
    for (const [msg, type, code] of [
      [{ type: 'find' }, 'find', 'bad_request'],
      [{ type: 'find', q: 'two words' }, 'find', 'bad_request'],
      [{ type: 'find', q: 'x'.repeat(257) }, 'find', 'bad_request'],
      [{ type: 'facts', filters: { id: '<b>' } }, 'facts', 'invalid_request_id'],
      [{ type: 'facts' }, 'facts', 'bad_request'],
    ]) {
      const e = await ask(anon, msg);
      assert.deepEqual([e.type, e.status, e.error.code], [type, 'error', code], JSON.stringify(e));
    }
    assert.equal(anon.closed, null);

    // a term nobody here knows: one upstream lookup - for the anonymous client one token of
    // its address's miss rate (1 a minute), which REST's anonymous lookups share
    const l0 = lookups(d);
    a = await ask(anon, { type: 'find', q: hex(32) });
    assert.equal(a.status, 'success', JSON.stringify(a));
    assert.deepEqual(a.data.requests, []);
    await until(() => lookups(d) === l0 + 1, { msg: 'one lookup' });
    const r429 = await d.get(`/v1/requests?q=${hex(32)}`);
    assert.equal(r429.status, 429, 'the REST API sees the same spent rate');
    a = await ask(anon, { type: 'find', q: hex(32) });
    assert.deepEqual([a.type, a.status, a.error.code], ['find', 'error', 'rate_limited'], JSON.stringify(a));
    assert.ok(a.data.retryAfter >= 1, JSON.stringify(a));
    assert.equal(lookups(d), l0 + 1, 'no lookup over the rate');
    // the tool on loopback is not limited by it; a term the upstream knows tracks its request
    for (let i = 0; i < 2; i++) {
      a = await ask(trusted, { type: 'find', q: hex(32) });
      assert.equal(a.status, 'success', JSON.stringify(a));
    }
    const other = (await sim.control('/requests', { lifecycle: 'success', stepMs: 100 })).id;
    const v = await until(async () => { const r = await sim.control(`/requests/${other}`); return r.terminal && r.statusV3?.inTxHashes?.length ? r : null; },
      { timeoutMs: 15000, msg: 'simulated request settled' });
    assert.equal((await d.get(`/v1/requests/${other}`)).status, 404, 'the relay never saw it');
    a = await ask(trusted, { type: 'find', q: v.statusV3.inTxHashes[0] });
    assert.equal(a.status, 'success', JSON.stringify(a));
    assert.deepEqual(a.data.requests.map((r) => r.requestId), [other]);
    assert.equal(a.data.requests[0].status, 'success');
    assert.equal((await d.get(`/v1/requests/${other}`)).body.tracked, true, 'tracked');
    assert.equal(lookups(d), l0 + 4);
    assert.equal(trusted.closed, null);
    assert.equal(anon.closed, null);
  } finally {
    trusted.close();
    anon.close();
    await s.stop();
  }
});

test('the live page in headless Chromium: the search box finds a tx hash, the opened row shows its facts with explorer links', { timeout: 120000 }, async (t) => {
  if (!haveChromium()) { t.skip('chromium is not installed (make deps)'); return; }
  const s = await stack('page-facts');
  const { sim, d } = s;
  let browser;
  try {
    const r = await sim.control('/requests', { lifecycle: 'success', stepMs: 200, originChainId: 8453, destinationChainId: 42161 });
    assert.equal((await d.post('/v1/requests', { requestId: r.id })).status, 201);
    const g = await settledFacts(d, r.id);
    const chains = (await fetch(`${sim.url}/_sim/chains`).then((x) => x.json())).chains;
    const arb = chains.find((c) => c.id === 42161), base = chains.find((c) => c.id === 8453);
    const inTx = g.request.inTxs[0].txHash, outTx = g.request.outTxs[0].txHash;

    browser = await openBrowser();
    const { page, problems } = browser;
    await page.goto(`http://127.0.0.1:${d.wsPort}/`);
    await page.waitForSelector('#conn.pill-ok', { timeout: 10000 });
    // a tx hash typed in any case, then Enter
    await page.fill('#f-q', inTx.toUpperCase().replace(/^0X/, '0x'));
    await page.press('#f-q', 'Enter');
    const row = `#find-rows tr[data-id="${r.id}"]`;
    await page.waitForSelector(row, { timeout: 15000 });
    assert.equal(await page.$$eval('#find-rows tr', (trs) => trs.length), 1);
    assert.match(await page.textContent('#find-title'), /^1 request for/);
    assert.equal(await page.textContent(`${row} .badge`), 'success');

    // open it: wallets, amounts, fees, transactions with explorer links
    await page.click(row);
    const dd = (k) => `#tl-facts dd[data-k="${k}"]`;
    await page.waitForSelector(dd('recipient'), { timeout: 15000 });
    assert.equal(await page.textContent(dd('recipient')), g.request.recipient);
    assert.equal(await page.textContent(dd('user')), g.request.user);
    // amounts in whole units (the simulator's items give only the smallest unit and decimals)
    const ci = g.request.currencyIn, co = g.request.currencyOut;
    assert.equal(await page.textContent(dd('currencyIn')), `${ci.amountFormatted ?? units(ci.amount, ci.decimals)} ${ci.symbol} on Base`);
    assert.equal(await page.textContent(dd('currencyOut')), `${co.amountFormatted ?? units(co.amount, co.decimals)} ${co.symbol} on Arbitrum One`);
    assert.ok(await page.$(`${dd('fees')} table.fees tr[data-kind]`), 'fees table');
    const links = await page.$$eval('#tl-facts a.tx', (as) => as.map((a) => ({
      hash: a.dataset.hash, href: a.getAttribute('href'), target: a.target, rel: a.rel,
    })));
    assert.deepEqual(links, [
      { hash: inTx, href: explorerTx(base, inTx), target: '_blank', rel: 'noopener noreferrer' },
      { hash: outTx, href: explorerTx(arb, outTx), target: '_blank', rel: 'noopener noreferrer' },
    ]);
    assert.equal(await page.textContent('#tl-id'), r.id);
    fs.mkdirSync(path.resolve('out'), { recursive: true });
    await page.screenshot({ path: path.resolve('out', 'page-facts.png') });

    // a term nothing matches: said so
    await page.fill('#f-q', hex(32));
    await page.press('#f-q', 'Enter');
    await page.waitForFunction(() => /^0 requests for/.test(document.querySelector('#find-title').textContent), null, { timeout: 15000 });
    assert.match(await page.textContent('#find-empty'), /Nothing found/);
    assert.deepEqual(problems, []);
  } finally {
    if (browser) await browser.close();
    await s.stop();
  }
});

test('the live page marks final and abandoned rows (live, from the snapshot after a reload, gone after a later status) and lists disabled endpoints', { timeout: 150000 }, async (t) => {
  if (!haveChromium()) { t.skip('chromium is not installed (make deps)'); return; }
  const s = await stack('page-watch', {
    STATUSRELAY_SETTLED_WATCH: '2s', STATUSRELAY_WAITING_TTL: '3s', STATUSRELAY_RETRY_SCHEDULE: '0s,200ms,400ms',
  });
  const { sim, d } = s;
  const rx = await startReceiver({ def: 410 }); // answers 410: disabled on its first delivery
  let browser, ws;
  try {
    browser = await openBrowser();
    const { page, problems } = browser;
    await page.goto(`http://127.0.0.1:${d.wsPort}/`);
    await page.waitForSelector('#conn.pill-ok', { timeout: 10000 });
    assert.equal(await page.isHidden('#disabled'), true, 'no panel before any endpoint is disabled');

    const wh = await d.post('/v1/webhooks', { url: rx.url('/gone') });
    assert.equal(wh.status, 201, wh.text);
    const scripted = async (p) => {
      const id = (await sim.control('/requests', { path: p, stepMs: 0, autoHashes: true })).id;
      assert.equal((await d.post('/v1/requests', { requestId: id })).status, 201);
      return id;
    };
    const status = (id, st) => until(async () => (await d.get(`/v1/requests/${id}`)).body?.status === st,
      { msg: `${id.slice(0, 10)} reaches ${st}`, timeoutMs: 15000 });
    const rFinal = await scripted(['waiting', 'pending', 'success', 'failure']);
    const rAbandoned = await scripted(['waiting', 'pending']);
    const rLive = await scripted(['waiting', 'pending']); // advanced: never marked
    for (const id of [rFinal, rAbandoned, rLive]) await status(id, 'waiting');
    for (const st of ['pending', 'success']) {
      await sim.control(`/requests/${rFinal}/advance`, {});
      await status(rFinal, st);
    }
    await sim.control(`/requests/${rLive}/advance`, {});
    await status(rLive, 'pending');

    // live: the request.watch.ended frames mark the rows; the 410 endpoint's endpoint.disabled
    const row = (id) => `#rows tr[data-id="${id}"]`;
    await page.waitForSelector(`${row(rFinal)}[data-watch="final"] .mark-ended-final`, { timeout: 20000 });
    await page.waitForSelector(`${row(rAbandoned)}[data-watch="abandoned"] .mark-ended-abandoned`, { timeout: 20000 });
    assert.equal(await page.textContent(`${row(rFinal)} .mark-ended`), 'final');
    assert.equal(await page.textContent(`${row(rAbandoned)} .mark-ended`), 'abandoned');
    assert.equal(await page.$(`${row(rLive)} .mark-ended`), null, 'a watched row has no mark');
    const dis = `#disabled-rows tr[data-webhook-id="${wh.body.id}"]`;
    await page.waitForSelector(dis, { timeout: 20000 });
    assert.equal(await page.isVisible('#disabled'), true);
    assert.deepEqual(await page.$$eval(`${dis} td`, (tds) => tds.map((x) => x.textContent)).then((c) => [c[0], c[1], c[3]]),
      [rx.url('/gone'), 'gone', wh.body.id]);
    const at = Number(await page.getAttribute(`${dis} td[data-at]`, 'data-at'));
    const ev = (await d.get('/v1/events?limit=1000')).body.events.find((e) => e.event === 'endpoint.disabled');
    assert.equal(at, ev.data.at, 'the time of the disable');
    assert.equal(await page.$$eval('#disabled-rows tr', (trs) => trs.length), 1);
    // the opened row says why in its timeline
    await page.click(row(rFinal));
    await page.waitForSelector('#tl-meta .mark-ended-final', { timeout: 15000 });
    await page.waitForFunction(() => [...document.querySelectorAll('#tl-list .tag')].some((x) => x.textContent === 'request.watch.ended'),
      null, { timeout: 15000 });
    fs.mkdirSync(path.resolve('out'), { recursive: true });
    await page.screenshot({ path: path.resolve('out', 'page-watch.png') });

    // the snapshot frames say it (statusrelay.watchEnded): a reloaded page marks the same rows
    ws = client(d.wsUrl);
    await ws.ready;
    assert.equal((await subscribed(ws, sub(null, { snapshotLimit: 50 }))).status, 'success');
    const snap = (id) => ws.wait((f) => f.statusrelay?.snapshot && f.data?.requestId === id, `snapshot of ${id.slice(0, 10)}`);
    assert.equal((await snap(rFinal)).statusrelay.watchEnded, 'final');
    assert.equal((await snap(rAbandoned)).statusrelay.watchEnded, 'abandoned');
    assert.equal((await snap(rLive)).statusrelay.watchEnded, undefined);
    assert.equal((await snap(rFinal)).event, 'request.status.updated');
    await page.reload();
    await page.waitForSelector('#conn.pill-ok', { timeout: 10000 });
    await page.waitForSelector(`${row(rFinal)}[data-watch="final"] .mark-ended-final`, { timeout: 15000 });
    await page.waitForSelector(`${row(rAbandoned)}[data-watch="abandoned"] .mark-ended-abandoned`, { timeout: 15000 });
    assert.equal(await page.isHidden('#disabled'), true, 'the panel lives in the page: empty after a reload');

    // a later status event takes the mark away: the upstream reverses the success, a fresh
    // status read of the ended request reads it through
    await sim.control(`/requests/${rFinal}/advance`, {});
    await until(async () => (await fetch(`${d.url}/intents/status/v3?requestId=${rFinal}`).then((x) => x.json())).status === 'failure',
      { msg: 'reversal read through', timeoutMs: 15000 });
    await page.waitForSelector(`${row(rFinal)} .mark-rev`, { timeout: 15000 });
    assert.equal(await page.$(`${row(rFinal)} .mark-ended`), null, 'the final mark is gone');
    assert.equal(await page.getAttribute(row(rFinal), 'data-watch'), null);
    assert.equal(await page.textContent(`${row(rFinal)} .badge`), 'failure');
    assert.deepEqual(problems, []);
  } finally {
    ws?.close();
    if (browser) await browser.close();
    await rx.stop();
    await s.stop();
  }
});
