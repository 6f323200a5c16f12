// statusrelay live page: one websocket to this port (the dashboard stream), no framework.
// Subscribes to every event (with the stream token from ?token= or the form) and to the
// per-second stats frames; keeps the newest state per request; resumes from the last
// statusrelay.streamId after a disconnect. Everything from the wire goes in as text only.
// Chain names, icons, explorer links and the disabled / lagging marks come from the upstream's
// chain list, which this port serves at GET /chains.json (refreshed by the daemon).
// The search box sends {"type":"find","q"} (the q of GET /v1/requests) and lists the rows found;
// opening a row sends {"type":"facts"} and shows the request's facts (wallets, amounts, fees,
// transactions with explorer links), also those a frame carries in statusrelay.request.
// The broad subscription also names the relay's own event types: a request.watch.ended marks
// its row (final / abandoned / watch ended; a snapshot says it in statusrelay.watchEnded)
// until a later status event of the request, request.stuck marks it stuck, and the recent
// endpoint.disabled events fill the "Endpoints disabled" panel (kept in the page only).
'use strict';

const EVENT = 'request.status.updated';
const ENDED = 'request.watch.ended', STUCK = 'request.stuck', DISABLED = 'endpoint.disabled';
const EVENTS = [EVENT, ENDED, STUCK, DISABLED];
const MAX_DISABLED = 20;
// the marks of a row whose watch ended, by reason (failure_tail, untracked: "watch ended")
const ENDED_MARK = {
  final: ['final', 'settled and past its reversal window: safe'],
  abandoned: ['abandoned', 'still waiting at the waiting TTL: the quote was never deposited'],
};
const MAX_ROWS = 500;
const STATUSES = ['waiting', 'depositing', 'pending', 'submitted', 'delayed', 'success',
  'failure', 'refund'];
const CHAINS_REFRESH_MS = 10 * 60 * 1000, CHAINS_RETRY_MS = 5000;

const $ = (id) => document.getElementById(id);
const state = {
  reqs: new Map(),        // requestId -> { data, relay, firstAt, changedAt, events: [] }
  selected: null,
  lastStreamId: null,
  token: new URLSearchParams(location.search).get('token') || sessionStorage.getItem('sr-token') || '',
  ws: null, retry: 0, authFailed: false, watch: new Set(),
  statusOn: new Set(), idFilter: '', dirty: true, rates: [],
  stuckAfterMs: 30 * 60 * 1000, // from the stats frames (STATUSRELAY_STUCK_AFTER)
  chains: new Map(),      // chain id -> the upstream's chain object (GET /chains.json)
  facts: new Map(),       // requestId -> the data of its last facts answer (+ frame facts)
  find: null,             // the last search: { q, rows, more, error }
  factsAt: 0,             // when the selected request's facts were last asked (ms)
  disabled: [],           // the recent endpoint.disabled frames' data + eventId, newest first
};
// not stuck whatever their age: not deposited yet, or settled
const NEVER_STUCK = new Set(['waiting', 'success', 'refund']);

// ---- helpers -------------------------------------------------------------------------------
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function short(id) { return id.length > 20 ? `${id.slice(0, 10)}…${id.slice(-6)}` : id; }
function ago(ms) {
  if (!ms) return '–';
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d`;
}
function clock(ms) { return ms ? new Date(ms).toLocaleTimeString([], { hour12: false }) : '–'; }
function fmt(n) { return typeof n === 'number' ? n.toLocaleString() : '–'; }
function badge(status) {
  const s = String(status || 'unknown');
  return el('span', `badge s-${STATUSES.includes(s) || s === 'fallback' || s === 'received' ? s : 'other'}`, s);
}
// ---- chains (the upstream's list) ----------------------------------------------------------
async function loadChains() {
  let wait = CHAINS_REFRESH_MS;
  try {
    const r = await fetch('chains.json', { cache: 'no-store' });
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
    const list = (await r.json()).chains;
    if (!Array.isArray(list)) throw new Error('no chains array');
    state.chains = new Map(list.filter((c) => c && typeof c === 'object').map((c) => [Number(c.id), c]));
    state.dirty = true;
    if (state.selected) renderTimeline();
  } catch {
    wait = CHAINS_RETRY_MS; // not fetched from the upstream yet: try again soon
  }
  setTimeout(loadChains, wait);
}
function chainOf(id) { return state.chains.get(Number(id)); }
function chainName(c, id) { return (c && (c.displayName || c.name)) || String(id ?? '?'); }
function chainMarks(c) {
  return c ? [c.disabled === true && 'disabled', c.blockProductionLagging === true && 'lagging'].filter(Boolean) : [];
}
// only web URLs become links, and only https: or data: images become icons (the CSP), whatever
// the list holds
function webUrl(u, icon) {
  if (typeof u !== 'string') return null;
  if (icon && /^data:image\//i.test(u)) return u;
  try {
    const x = new URL(u);
    return x.protocol === 'https:' || (!icon && x.protocol === 'http:') ? x.href : null;
  } catch { return null; }
}
// explorerUrl + explorerPaths.transaction with {TX_HASH} replaced (the upstream's own rule;
// "/tx/{TX_HASH}" when the chain names no path), plus explorerQueryParams
function explorerTxUrl(c, hash) {
  const base = c && webUrl(c.explorerUrl) ? c.explorerUrl.replace(/\/+$/, '') : null;
  if (!base || !hash) return null;
  const h = encodeURIComponent(hash);
  const p = c.explorerPaths?.transaction;
  let url = typeof p === 'string' && p.includes('{TX_HASH}') ? base + p.split('{TX_HASH}').join(h)
    : typeof p === 'string' && p ? `${base}/${p.replace(/^\/+|\/+$/g, '')}/${h}` : `${base}/tx/${h}`;
  const q = c.explorerQueryParams;
  if (q && typeof q === 'object') {
    const qs = new URLSearchParams(q).toString();
    if (qs) url += (url.includes('?') ? '&' : '?') + qs;
  }
  return webUrl(url);
}
function chain(id) {
  const c = chainOf(id);
  const w = el('span', 'chain');
  w.dataset.chainId = String(id ?? '');
  const icon = c && webUrl(c.iconUrl || c.logoUrl, true);
  if (icon) {
    const img = el('img', 'chain-icon');
    img.alt = '';
    img.referrerPolicy = 'no-referrer';
    img.src = icon;
    img.onerror = () => img.replaceWith(el('i'));
    w.append(img);
  } else {
    w.append(el('i'));
  }
  w.append(el('span', 'chain-name', chainName(c, id)));
  const marks = chainMarks(c);
  for (const m of marks) w.append(el('span', `mark mark-chain mark-chain-${m}`, m));
  w.title = `chain ${id}${marks.length ? ` (${marks.join(', ')})` : ''}`;
  return w;
}
function route(d) {
  const r = el('span', 'route');
  r.append(chain(d.originChainId), el('span', 'arrow', '→'), chain(d.destinationChainId));
  return r;
}
// a request touching a disabled or lagging chain
function chainWarn(d) { return chainMarks(chainOf(d.originChainId)).length + chainMarks(chainOf(d.destinationChainId)).length > 0; }
// one tx hash as an explorer link on its chain (text when the chain has no explorer)
function txLink(hash, chainId) {
  const c = chainOf(chainId), href = explorerTxUrl(c, hash);
  const a = el(href ? 'a' : 'span', 'tx mono', short(String(hash)));
  a.dataset.hash = String(hash);
  a.dataset.chainId = String(chainId ?? '');
  a.title = `${hash}${c ? ` on ${chainName(c, chainId)}` : ''}`;
  if (href) { a.href = href; a.target = '_blank'; a.rel = 'noopener noreferrer'; }
  return a;
}
// in hashes are on the origin chain; out hashes on the destination, except a refund's (origin)
function txList(d) {
  const box = el('span', 'txs');
  const outChain = d.status === 'refund' ? d.originChainId : d.destinationChainId;
  const items = [...(d.inTxHashes || []).map((h) => ['in', h, d.originChainId]),
    ...(d.txHashes || []).map((h) => ['out', h, outChain])];
  items.forEach(([dir, h, cid], i) => {
    if (i) box.append(document.createTextNode(' · '));
    box.append(document.createTextNode(`${dir} `), txLink(h, cid));
  });
  return items.length ? box : null;
}
function notice(text, ms = 5000) {
  const n = $('notice');
  n.textContent = text;
  n.hidden = false;
  clearTimeout(notice.t);
  notice.t = setTimeout(() => { n.hidden = true; }, ms);
}
function cmpSid(a, b) {
  if (a.includes(',') || b.includes(',')) { // partitions: one stream id per partition
    const av = a.split(','), bv = b.split(',');
    if (av.length !== bv.length) return -1; // not a cursor of this deployment: keep ours
    let c = 0; // a later frame's vector is >= in every component
    for (let i = 0; i < av.length; i++) {
      const x = cmpSid(av[i], bv[i]);
      if (x < 0) return -1;
      if (x > 0) c = 1;
    }
    return c;
  }
  const [am, as] = a.split('-').map(Number), [bm, bs] = b.split('-').map(Number);
  return am !== bm ? am - bm : (as || 0) - (bs || 0);
}

// ---- the stream ----------------------------------------------------------------------------
function send(obj) { if (state.ws && state.ws.readyState === 1) state.ws.send(JSON.stringify(obj)); }

function connect() {
  const url = new URL(location.href);
  url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  url.pathname = '/';
  url.search = state.token ? `?token=${encodeURIComponent(state.token)}` : '';
  url.hash = '';
  setConn('connecting…', 'pill-warn');
  const ws = new WebSocket(url.href);
  state.ws = ws;
  ws.onmessage = (e) => { try { onFrame(JSON.parse(e.data)); } catch (err) { console.error(err); } };
  ws.onclose = (e) => {
    if (state.ws !== ws) return;
    state.ws = null;
    if (e.code === 4401) { // subscription refused: the stream token is needed; wait for it
      state.authFailed = true;
      $('auth').hidden = false;
      setConn('token needed', 'pill-warn');
      return;
    }
    const wait = Math.min(10000, 500 * 2 ** state.retry++) * (0.5 + Math.random() / 2);
    setConn(`reconnecting (${e.code})`, 'pill-bad');
    setTimeout(connect, wait);
  };
}

function subscribeAll() {
  const sub = { type: 'subscribe', event: EVENT, filters: { events: EVENTS }, snapshotLimit: 200 };
  if (state.token) sub.token = state.token;
  if (state.lastStreamId) sub.lastEventId = state.lastStreamId;
  send(sub);
  send({ type: 'subscribe', event: 'statusrelay.stats', ...(state.token ? { token: state.token } : {}) });
  for (const id of state.watch) send({ type: 'subscribe', event: EVENT, filters: { id } });
}

function onFrame(f) {
  if ((f.event === EVENT || f.event === ENDED || f.event === STUCK) && f.data?.requestId) return onEvent(f);
  if (f.event === DISABLED && f.data) return onDisabled(f);
  switch (f.type) {
    case 'connection':
      state.retry = 0;
      setConn('live', 'pill-ok');
      subscribeAll();
      break;
    case 'subscribe':
      if (!f.data?.filters?.id && f.data?.event === EVENT) $('auth').hidden = true;
      break;
    case 'stats': onStats(f.data); break;
    case 'history': onHistory(f); break;
    case 'find': onFind(f); break;
    case 'facts': onFacts(f); break;
    case 'gap': notice('Some events were too old to replay: showing a fresh snapshot.'); break;
    case 'conflated': notice(`The page fell behind: ${f.data?.dropped} intermediate states were skipped.`); break;
    case 'resumed': break;
    case 'error': // a refused subscribe ("request": "subscribe") is followed by a close
      if (f.request === 'subscribe' && f.error?.code !== 'unauthorized') {
        notice(`subscribe refused: ${f.error?.message || f.error?.code}`);
      } else if (f.request !== 'subscribe') {
        console.warn('stream error', f.error);
      }
      break;
    default: break;
  }
}

// hist: an event of a history answer (its streamId is its partition's: not a resume cursor)
function onEvent(f, hist) {
  const d = f.data, r = f.statusrelay || {};
  if (!hist && r.streamId && (!state.lastStreamId || cmpSid(r.streamId, state.lastStreamId) > 0)) state.lastStreamId = r.streamId;
  let q = state.reqs.get(d.requestId);
  if (!q) {
    q = { data: d, relay: r, firstAt: d.updatedAt, changedAt: d.updatedAt, events: [], seen: 0 };
    state.reqs.set(d.requestId, q);
  }
  marks(q, f);
  if ((r.seq ?? 0) >= (q.relay.seq ?? 0)) { // never regress: a snapshot may trail an event
    if (d.status !== q.data.status || !q.changedAt) q.changedAt = d.updatedAt;
    q.data = d;
    q.relay = r;
    // a reversal (success/refund taken back by the upstream) stays marked on the row
    if ((r.flags || []).includes('reversal')) q.reversedFrom = r.previousStatus || 'settled';
  }
  if (r.seq === 1) q.firstAt = d.updatedAt;
  else q.firstAt = Math.min(q.firstAt || d.updatedAt, d.updatedAt);
  if (!r.snapshot && !q.events.some((e) => e.statusrelay?.eventId === r.eventId)) {
    q.events.push(f);
    q.events.sort((a, b) => (a.statusrelay?.seq ?? 0) - (b.statusrelay?.seq ?? 0));
  }
  q.seen = Date.now();
  q.flash = true;
  if (state.reqs.size > MAX_ROWS * 2) prune();
  state.dirty = true;
  // facts a frame carries (statusrelay.request) count like a facts answer's
  if (r.request && typeof r.request === 'object') frameFacts(d.requestId, r.request);
  if (state.selected === d.requestId) {
    if (!r.snapshot && !hist) askFacts(d.requestId, 1000); // a change may bring facts: ask again
    renderTimeline();
  }
}

// The watch-ended and stuck marks of row q after frame f (in any order: by seq). A
// request.watch.ended (or a snapshot saying statusrelay.watchEnded) marks the row unless a
// later status event is known; a status event (or a snapshot of a later state) takes the
// marks of older typed events away.
function marks(q, f) {
  const r = f.statusrelay || {}, seq = r.seq ?? 0;
  if (f.event === ENDED || (r.snapshot && typeof r.watchEnded === 'string')) {
    if (seq > (q.statusSeq ?? 0) && (!q.ended || seq >= q.ended.seq))
      q.ended = { reason: String(f.event === ENDED ? f.data.reason : r.watchEnded), seq };
  } else if (f.event === STUCK) {
    if (seq > (q.statusSeq ?? 0) && seq > (q.stuckSeq ?? 0)) q.stuckSeq = seq;
  } else {
    if (!r.snapshot) q.statusSeq = Math.max(q.statusSeq ?? 0, seq);
    if (q.ended && seq > q.ended.seq) q.ended = null;
    if (q.stuckSeq && seq > q.stuckSeq) q.stuckSeq = null;
  }
}

function endedMark(q) {
  const [text, title] = ENDED_MARK[q.ended.reason] || ['watch ended', `the relay stopped watching it (${q.ended.reason})`];
  const m = el('span', `mark mark-ended mark-ended-${ENDED_MARK[q.ended.reason] ? q.ended.reason : 'other'}`, text);
  m.title = title;
  return m;
}

// ---- endpoints disabled --------------------------------------------------------------------
function onDisabled(f) {
  const d = f.data, r = f.statusrelay || {};
  if (r.streamId && (!state.lastStreamId || cmpSid(r.streamId, state.lastStreamId) > 0)) state.lastStreamId = r.streamId;
  const key = r.eventId || `${d.webhookId}/${r.seq}`;
  if (state.disabled.some((x) => x.key === key)) return;
  state.disabled.push({ key, webhookId: String(d.webhookId ?? ''), url: String(d.url ?? ''),
    reason: String(d.reason ?? ''), at: typeof d.at === 'number' ? d.at : 0 });
  state.disabled.sort((a, b) => b.at - a.at);
  state.disabled.length = Math.min(state.disabled.length, MAX_DISABLED);
  renderDisabled();
}

function renderDisabled() {
  const list = state.disabled;
  $('disabled').hidden = list.length === 0;
  $('disabled-title').textContent = `${list.length} recent`;
  const body = $('disabled-rows');
  body.textContent = '';
  for (const x of list) {
    const tr = el('tr');
    tr.dataset.webhookId = x.webhookId;
    const url = el('td', 'mono wrap url', x.url);
    url.title = x.url;
    const why = el('td');
    why.append(el('span', `mark mark-dis mark-dis-${x.reason === 'gone' ? 'gone' : 'failing'}`, x.reason));
    why.title = x.reason === 'gone' ? 'it answered 410 Gone' : x.reason === 'failing' ? 'it failed continuously (STATUSRELAY_DISABLE_AFTER)' : '';
    const at = el('td', 'age', x.at ? `${clock(x.at)} (${ago(x.at)} ago)` : '–');
    at.dataset.at = String(x.at);
    if (x.at) at.title = new Date(x.at).toLocaleString();
    tr.append(url, why, at, el('td', 'mono small muted', x.webhookId));
    body.append(tr);
  }
}

function prune() {
  const all = [...state.reqs.values()].sort((a, b) => b.seen - a.seen);
  for (const q of all.slice(MAX_ROWS)) if (q.data.requestId !== state.selected) state.reqs.delete(q.data.requestId);
}

// ---- counters ------------------------------------------------------------------------------
function onStats(s) {
  if (!s) return;
  $('c-rate').textContent = (s.events?.perSecond ?? 0).toFixed(s.events?.perSecond >= 10 ? 0 : 1);
  $('c-events').textContent = fmt(s.events?.total);
  counter('c-ok', s.deliveries?.ok);
  counter('c-failed', s.deliveries?.failed);
  $('c-retries').textContent = `retries ${fmt(s.deliveries?.retries)}`;
  counter('c-dead', s.deliveries?.dead);
  const up = s.upstream?.state ?? '–';
  $('c-up').textContent = up;
  $('c-up').style.color = up === 'ready' ? 'var(--ok)' : up === 'standby' ? 'var(--muted)'
    : up === 'connecting' ? 'var(--warn)' : 'var(--bad)';
  $('c-up-sub').textContent = `${fmt(s.upstream?.subscriptions)} subs · ${fmt(s.upstream?.reconnects)} reconnects`;
  const p = $('upstream');
  p.textContent = `upstream: ${up}`;
  p.className = `pill ${up === 'ready' ? 'pill-ok' : up === 'standby' ? '' : up === 'connecting' ? 'pill-warn' : 'pill-bad'}`;
  $('c-tracked').textContent = fmt(s.requests?.tracked);
  if (s.watch?.stuckAfterMs > 0) state.stuckAfterMs = s.watch.stuckAfterMs;
  // rows become stuck with time alone: redraw only when one did (a redraw under the pointer loses a click)
  for (const q of visible()) if (stuck(q) !== !!q.stuckShown) { state.dirty = true; break; }
  $('c-dash').textContent = `${fmt(s.dashboard?.sessions)} dashboard clients`;
  $('instance').textContent = s.instance ? `instance ${s.instance.slice(0, 8)}` : '';
  state.rates.push(s.events?.perSecond ?? 0);
  if (state.rates.length > 60) state.rates.shift();
  spark();
}

// a coloured counter only once it is non-zero: zeros stay calm
function counter(id, v) {
  const e = $(id);
  e.textContent = fmt(v);
  e.closest('.card').classList.toggle('zero', !v);
}

function spark() {
  const c = $('spark'), g = c.getContext('2d');
  const w = c.width, h = c.height, v = state.rates, max = Math.max(1, ...v);
  g.clearRect(0, 0, w, h);
  if (v.length < 2) return;
  g.beginPath();
  v.forEach((x, i) => {
    const px = (i / (60 - 1)) * w, py = h - 2 - (x / max) * (h - 4);
    i ? g.lineTo(px, py) : g.moveTo(px, py);
  });
  g.strokeStyle = '#1f6feb';
  g.lineWidth = 1.5;
  g.stroke();
}

// ---- table ---------------------------------------------------------------------------------
function visible() {
  const idf = state.idFilter.toLowerCase();
  return [...state.reqs.values()]
    .filter((q) => (!idf || q.data.requestId.toLowerCase().includes(idf)) &&
      (state.statusOn.size === 0 || state.statusOn.has(q.data.status)))
    .sort((a, b) => (b.data.updatedAt || 0) - (a.data.updatedAt || 0))
    .slice(0, MAX_ROWS);
}

// stuck by the clock, or by a request.stuck event no status event followed; never once ended
function stuck(q) {
  if (q.ended) return false;
  return !!q.stuckSeq || (!NEVER_STUCK.has(q.data.status) && !!q.changedAt && Date.now() - q.changedAt >= state.stuckAfterMs);
}

// the chips are made once and updated in place: one replaced between mousedown and mouseup loses the click
function renderChips() {
  const counts = {};
  for (const q of state.reqs.values()) counts[q.data.status] = (counts[q.data.status] || 0) + 1;
  const box = $('f-status');
  if (!box.children.length) {
    for (const s of STATUSES) {
      const c = el('span', 'chip', s);
      c.dataset.status = s;
      c.append(el('span', 'n', 0));
      c.onclick = () => {
        state.statusOn.has(s) ? state.statusOn.delete(s) : state.statusOn.add(s);
        state.dirty = true;
        render();
      };
      box.append(c);
    }
  }
  for (const c of box.children) {
    const s = c.dataset.status;
    c.classList.toggle('on', state.statusOn.has(s));
    c.querySelector('.n').textContent = counts[s] || 0;
  }
}

function render() {
  state.dirty = false;
  const rows = visible();
  const body = $('rows');
  body.textContent = '';
  for (const q of rows) {
    const d = q.data, tr = el('tr');
    tr.dataset.id = d.requestId;
    if (d.requestId === state.selected) tr.classList.add('sel');
    if (q.flash) { tr.classList.add('flash'); q.flash = false; setTimeout(() => tr.classList.remove('flash'), 50); }
    const idc = el('td', 'mono', short(d.requestId));
    idc.title = d.requestId;
    const rt = el('td');
    rt.append(route(d));
    if (chainWarn(d)) tr.classList.add('chain-warn');
    const st = el('td');
    st.append(badge(d.status));
    if (q.reversedFrom) {
      tr.classList.add('reversal');
      st.append(el('span', 'mark mark-rev', `reversed from ${q.reversedFrom}`));
    }
    if (q.ended) {
      tr.dataset.watch = q.ended.reason;
      tr.classList.add(`ended-${ENDED_MARK[q.ended.reason] ? q.ended.reason : 'other'}`);
      st.append(endedMark(q));
    }
    q.stuckShown = stuck(q);
    if (q.stuckShown) {
      tr.classList.add('stuck');
      st.append(el('span', 'mark mark-stuck', 'stuck'));
    }
    tr.append(idc, rt, st, el('td', 'age', ago(q.firstAt)), el('td', 'changed', ago(q.changedAt)),
      el('td', 'num', q.relay.seq ?? '–'));
    tr.onclick = () => select(d.requestId);
    body.append(tr);
  }
  $('empty').hidden = rows.length > 0;
  $('empty').textContent = state.reqs.size ? 'No request matches the filter.' : 'Waiting for events…';
  $('shown').textContent = `${rows.length} of ${state.reqs.size} requests`;
  renderChips();
}

// ---- timeline ------------------------------------------------------------------------------
function select(id) {
  state.selected = id;
  $('timeline').hidden = false;
  send({ type: 'history', event: EVENT, filters: { id } });
  askFacts(id, 0);
  renderTimeline();
  state.dirty = true;
}

// ask for the facts of id (at most once per `gap` ms)
function askFacts(id, gap) {
  const now = Date.now();
  if (gap && now - state.factsAt < gap) return;
  state.factsAt = now;
  send({ type: 'facts', filters: { id } });
}

function onHistory(f) {
  if (f.status !== 'success') return;
  const id = f.data?.filters?.id, q = state.reqs.get(id);
  if (!q) { // a row opened from a search that the table does not hold
    if (id === state.selected) for (const ev of f.data.events || []) if (ev?.data?.requestId === id) onEvent(ev, true);
    return;
  }
  for (const ev of f.data.events || []) {
    if (!ev?.data) continue;
    if (!q.events.some((e) => e.statusrelay?.eventId === ev.statusrelay?.eventId)) q.events.push(ev);
    marks(q, ev);
  }
  state.dirty = true;
  q.events.sort((a, b) => (a.statusrelay?.seq ?? 0) - (b.statusrelay?.seq ?? 0));
  const first = q.events[0];
  if (first?.statusrelay?.seq === 1) q.firstAt = first.data.updatedAt;
  if (state.selected === id) renderTimeline();
}

function meta(dl, k, v) {
  dl.append(el('dt', null, k));
  const dd = el('dd');
  typeof v === 'object' && v instanceof Node ? dd.append(v) : (dd.textContent = v);
  dl.append(dd);
}

function renderTimeline() {
  const id = state.selected;
  if (!id) return;
  const q = state.reqs.get(id), fa = state.facts.get(id);
  $('tl-id').textContent = id;
  renderFacts(id);
  const m = $('tl-meta');
  m.textContent = '';
  // a row opened from a search: its summary until its events arrive
  const d = q ? q.data : fa?.requestId && { requestId: id, status: fa.status, originChainId: fa.originChainId,
    destinationChainId: fa.destinationChainId, updatedAt: fa.updatedAt };
  if (!d) {
    m.append(el('div', 'muted small', 'Loading…'));
    $('tl-list').textContent = '';
    return;
  }
  const dl = el('dl', 'tl-meta');
  meta(dl, 'status', badge(d.status));
  meta(dl, 'route', route(d));
  meta(dl, 'updated', `${clock(d.updatedAt)} (${ago(d.updatedAt)} ago)`);
  const txs = txList(d);
  if (txs) meta(dl, 'transactions', txs);
  if (d.failReason && d.failReason !== 'N/A') meta(dl, 'fail reason', d.failReason);
  if (d.refundFailReason && d.refundFailReason !== 'N/A') meta(dl, 'refund fail', d.refundFailReason);
  if (q?.ended) meta(dl, 'watch', endedMark(q));
  m.append(...dl.childNodes);
  const list = $('tl-list');
  list.textContent = '';
  const evs = q ? [...q.events].reverse() : [];
  evs.forEach((f, i) => {
    const r = f.statusrelay || {}, e = f.data;
    const li = el('li', `tl-item${i === 0 ? ' latest' : ''}`);
    const head = el('div', 'tl-head');
    const typed = f.event === ENDED || f.event === STUCK;
    // a typed event is about the state it carries: its badge, no time of its own in the frame
    head.append(badge(e.status), el('span', 'tl-time', typed ? '' : clock(e.updatedAt)),
      el('span', 'tag', typed ? f.event : r.source || '?'), el('span', 'tag', `seq ${r.seq ?? '?'}`));
    const body = el('div', 'tl-body');
    if (f.event === ENDED) body.append(document.createTextNode(`watch ended: ${e.reason}`));
    else if (f.event === STUCK) body.append(document.createTextNode(`stuck since ${clock(e.stuckSince)}`));
    else if (r.previousStatus) body.append(document.createTextNode(`from ${r.previousStatus}`));
    const tx = txList(e);
    if (tx) { body.append(el('br')); body.append(tx); }
    if (e.failReason && e.failReason !== 'N/A') { body.append(el('br')); body.append(document.createTextNode(`reason ${e.failReason}`)); }
    li.append(head, body);
    list.append(li);
  });
  if (!evs.length) list.append(el('li', 'muted small', 'No events yet.'));
}

// ---- facts of the opened row ---------------------------------------------------------------
function onFacts(f) {
  const id = f.data?.filters?.id;
  if (!id) return;
  if (f.status !== 'success') {
    if (id === state.selected) {
      state.facts.set(id, { ...(state.facts.get(id) || {}), error: f.error?.code === 'not_found'
        ? 'The relay does not know this request.' : (f.error?.message || f.error?.code || 'error') });
      renderTimeline();
    }
    return;
  }
  const old = state.facts.get(id);
  const fa = { ...f.data };
  // frame facts newer than the answer (by the facts' updatedAt) stay
  if (old?.request && newer(old.request, fa.request)) fa.request = old.request;
  state.facts.set(id, fa);
  if (state.facts.size > MAX_ROWS) state.facts.delete(state.facts.keys().next().value);
  if (id === state.selected) renderTimeline();
}

function newer(a, b) {
  return !!a && typeof a === 'object' && (!b || typeof b !== 'object' || (a.updatedAt ?? 0) > (b.updatedAt ?? 0));
}

function frameFacts(id, request) {
  const fa = state.facts.get(id);
  if (!fa) { if (id === state.selected) state.facts.set(id, { request }); return; }
  if (newer(request, fa.request) || !fa.request) fa.request = request;
}

function usd(v) {
  const n = Number(v);
  if (v === null || v === undefined || v === '' || !Number.isFinite(n)) return '';
  const a = Math.abs(n);
  return `${n < 0 ? '−' : ''}$${a.toFixed(a !== 0 && a < 0.01 ? 4 : 2)}`;
}

// an integer amount in the smallest unit as a decimal number of whole units ("1500000", 6 ->
// "1.5"); anything else as given
function units(a, dec) {
  if (typeof a !== 'string' || !/^\d+$/.test(a) || !Number.isInteger(dec) || dec < 0 || dec > 255) return a;
  const p = a.padStart(dec + 1, '0'), i = p.slice(0, p.length - dec).replace(/^0+(?=\d)/, '');
  const f = p.slice(p.length - dec).replace(/0+$/, '');
  return f ? `${i}.${f}` : i;
}

// a flattened amount: "1.5 USDC ($1.50) on Base"
function amount(c) {
  if (!c || typeof c !== 'object') return null;
  const box = el('span', 'amount');
  const text = [c.amountFormatted ?? units(c.amount, c.decimals), c.symbol].filter((x) => x !== null && x !== undefined).join(' ');
  box.append(el('b', null, text || '?'));
  const u = usd(c.amountUsd);
  if (u) box.append(el('span', 'muted', ` (${u})`));
  if (c.chainId !== null && c.chainId !== undefined) box.append(document.createTextNode(' on '), chain(c.chainId));
  if (c.basis === 'quoted') box.append(el('span', 'tag', 'quoted'));
  return box;
}

// fees (the upstream's data.fees): one line per kind, quoted and actual
function feesTable(fees) {
  if (!fees || typeof fees !== 'object') return null;
  const q = fees.quoted && typeof fees.quoted === 'object' ? fees.quoted : {};
  const a = fees.actual && typeof fees.actual === 'object' ? fees.actual : {};
  const kinds = [...new Set([...Object.keys(q), ...Object.keys(a)])];
  if (!kinds.length) return null;
  const sym = typeof fees.currency?.symbol === 'string' ? fees.currency.symbol : '';
  // the amount, its USD value under it
  const cell = (v) => {
    if (!v || typeof v !== 'object') return el('td', 'num muted', '–');
    const td = el('td', 'num');
    const amt = v.amountFormatted ?? units(v.amount, fees.currency?.decimals);
    if (amt !== undefined && amt !== null) td.append(el('div', null, amt));
    const u = usd(v.usd);
    if (u) td.append(el('div', 'muted', u));
    if (!td.childNodes.length) td.textContent = '–';
    return td;
  };
  const t = el('table', 'fees');
  const head = el('tr');
  const unit = sym ? ` (${sym})` : '';
  head.append(el('th', null, 'fee'), el('th', 'num', `quoted${unit}`), el('th', 'num', `actual${unit}`));
  t.append(head);
  for (const k of kinds) {
    const tr = el('tr');
    tr.dataset.kind = k;
    tr.append(el('td', null, k), cell(q[k]), cell(a[k]));
    t.append(tr);
  }
  return t;
}

// the transactions of the facts: links from their explorerUrl (built by the relay from the
// current chain list; only http/https), else from the page's own list
function factsTxs(list) {
  if (!Array.isArray(list) || !list.length) return null;
  const box = el('div', 'ftxs');
  for (const tx of list) {
    if (!tx || typeof tx !== 'object' || typeof tx.txHash !== 'string') continue;
    const line = el('div', 'ftx');
    const href = webUrl(tx.explorerUrl) || explorerTxUrl(chainOf(tx.chainId), tx.txHash);
    const a = el(href ? 'a' : 'span', 'tx mono', short(tx.txHash));
    a.dataset.hash = tx.txHash;
    a.dataset.chainId = String(tx.chainId ?? '');
    a.title = tx.txHash;
    if (href) { a.href = href; a.target = '_blank'; a.rel = 'noopener noreferrer'; }
    line.append(a, document.createTextNode(' on '), chain(tx.chainId));
    if (tx.status && tx.status !== 'success') line.append(el('span', 'mark mark-rev', String(tx.status)));
    if (typeof tx.timestamp === 'number') {
      line.append(el('span', 'muted small', ` ${clock(tx.timestamp)}`));
      line.title = new Date(tx.timestamp).toLocaleString();
    }
    box.append(line);
  }
  return box.childNodes.length ? box : null;
}

function renderFacts(id) {
  const box = $('tl-facts');
  box.textContent = '';
  const fa = state.facts.get(id), fx = fa?.request;
  box.append(el('div', 'label', 'Facts'));
  if (!fx || typeof fx !== 'object') {
    box.append(el('div', 'muted small', fa?.error || (fa ? 'Not known yet: the relay reads them from the upstream (API key needed).' : 'Loading…')));
    return;
  }
  const dl = el('dl', 'tl-meta');
  const put = (k, label, v) => {
    if (v === null || v === undefined || v === '') return;
    dl.append(el('dt', null, label));
    const dd = el('dd');
    dd.dataset.k = k;
    v instanceof Node ? dd.append(v) : (dd.textContent = String(v));
    dl.append(dd);
  };
  const wallet = (w) => (typeof w === 'string' && w ? Object.assign(el('span', 'mono wrap', w), { title: w }) : null);
  put('createdAt', 'created', typeof fx.createdAt === 'number' ? new Date(fx.createdAt).toLocaleString() : null);
  put('requestType', 'type', fx.requestType);
  put('user', 'user', wallet(fx.user));
  if (fx.sender !== fx.user) put('sender', 'sender', wallet(fx.sender));
  put('recipient', 'recipient', wallet(fx.recipient));
  put('refundTo', 'refund to', wallet(fx.refundTo));
  put('depositAddress', 'deposit address', wallet(fx.depositAddress?.address));
  put('currencyIn', 'sent', amount(fx.currencyIn));
  put('currencyOut', 'received', amount(fx.currencyOut));
  put('refundCurrency', 'refunded', amount(fx.refundCurrency));
  put('fees', 'fees', feesTable(fx.fees));
  put('inTxs', 'in txs', factsTxs(fx.inTxs));
  put('outTxs', 'out txs', factsTxs(fx.outTxs));
  put('referrer', 'referrer', fx.referrer);
  box.append(dl);
}

// ---- search --------------------------------------------------------------------------------
function onFind(f) {
  const q = f.data?.q ?? state.find?.q ?? '';
  if (state.find && f.data?.q !== undefined && state.find.q !== q) return; // an older search's answer
  state.find = f.status === 'success'
    ? { q, rows: Array.isArray(f.data.requests) ? f.data.requests : [], more: !!f.data.more }
    : { q, rows: [], error: f.error?.code === 'rate_limited' ? f.error.message : (f.error?.message || f.error?.code || 'error') };
  renderFind();
}

function renderFind() {
  const r = state.find;
  $('find').hidden = !r;
  if (!r) return;
  $('find-title').textContent = r.pending ? `searching “${r.q}”…`
    : `${r.rows.length}${r.more ? '+' : ''} request${r.rows.length === 1 ? '' : 's'} for “${r.q}”`;
  const body = $('find-rows');
  body.textContent = '';
  for (const d of r.rows) {
    if (!d || typeof d.requestId !== 'string') continue;
    const tr = el('tr');
    tr.dataset.id = d.requestId;
    if (d.requestId === state.selected) tr.classList.add('sel');
    const idc = el('td', 'mono', short(d.requestId));
    idc.title = d.requestId;
    const rt = el('td');
    rt.append(route(d));
    const st = el('td');
    st.append(badge(d.status));
    const w = el('td', 'mono small');
    w.textContent = [d.user, d.recipient].map((x) => (typeof x === 'string' ? short(x) : '?')).join(' → ');
    w.title = `${d.user ?? '?'} → ${d.recipient ?? '?'}`;
    tr.append(idc, rt, st, el('td', 'age', d.createdAt ? `${ago(d.createdAt)} ago` : '–'), w);
    tr.onclick = () => { select(d.requestId); renderFind(); };
    body.append(tr);
  }
  const empty = $('find-empty');
  empty.hidden = r.pending || r.rows.length > 0;
  empty.textContent = r.error ? r.error : `Nothing found for “${r.q}”.`;
}

// ---- wiring --------------------------------------------------------------------------------
function setConn(text, cls) {
  const c = $('conn');
  c.textContent = text;
  c.className = `pill ${cls}`;
}

document.addEventListener('DOMContentLoaded', () => {
  $('f-id').addEventListener('input', (e) => { state.idFilter = e.target.value.trim(); state.dirty = true; });
  $('id-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const id = $('f-id').value.trim();
    if (!/^[A-Za-z0-9_:.-]{1,128}$/.test(id)) { notice('That is not a request id.'); return; }
    state.watch.add(id);
    send({ type: 'subscribe', event: EVENT, filters: { id } });
    notice(`Watching ${short(id)}`, 2500);
  });
  $('find-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const q = $('f-q').value.trim();
    if (!/^[\x21-\x7e]{1,256}$/.test(q)) { notice('Search for one tx hash, wallet, deposit address or request id.'); return; }
    if (!state.ws || state.ws.readyState !== 1) { notice('Not connected: try again in a moment.'); return; }
    state.find = { q, rows: [], pending: true };
    renderFind();
    send({ type: 'find', q });
  });
  $('find-close').addEventListener('click', () => { state.find = null; renderFind(); });
  $('auth-form').addEventListener('submit', (e) => {
    e.preventDefault();
    state.token = $('auth-token').value.trim();
    sessionStorage.setItem('sr-token', state.token);
    $('auth').hidden = true;
    if (state.ws) state.ws.close(1000, 'new token');
    else connect(); // closed after a refusal (4401): connect again with the token
  });
  $('tl-close').addEventListener('click', () => { state.selected = null; $('timeline').hidden = true; state.dirty = true; });
  renderChips();
  loadChains();
  connect();
  setInterval(() => { state.dirty = true; }, 1000);
  let last = 0; // at most ~5 table renders a second, whatever the event rate
  (function loop(t) {
    if (state.dirty && t - last >= 200) { last = t; render(); }
    requestAnimationFrame(loop);
  })(0);
});
