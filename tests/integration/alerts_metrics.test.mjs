// alerts_metrics.test.mjs - the alert rules (docker/alerts.yml) name what the daemon really
// exports: every statusrelay_* name in a rule expression is a family on GET /metrics, every
// label value a rule selects with = is a value some sample of it has, and what a rule takes
// rate()/increase() of is a counter; docker/prometheus.yml's scrape job is the one
// StatusrelayDown expects. A rename on either side breaks this test. Also the two gauges added
// for the rules: statusrelay_redis_refusing_writes follows a Redis refusing writes
// (maxmemory), statusrelay_upstream_budget_per_minute is the setting. Real redis-server and
// daemon on loopback.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { startRedis, startDaemon } from './lib/stack.mjs';
import { until } from './lib/proc.mjs';

const DOCKER = path.resolve('..', 'docker');
const cleanup = [];
after(async () => { for (const f of cleanup.reverse()) { try { await f(); } catch {} } });

/** Families of a Prometheus text page: name -> { type, samples: [labels object] }. */
function parseMetrics(text) {
  const fams = new Map();
  const fam = (n) => { if (!fams.has(n)) fams.set(n, { type: null, samples: [] }); return fams.get(n); };
  for (const line of text.split('\n')) {
    let m = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (m) { fam(m[1]).type = m[2]; continue; }
    if (!line || line.startsWith('#')) continue;
    m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? \S+$/.exec(line);
    assert.ok(m, `unparsable /metrics line: ${line}`);
    const labels = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)) labels[l[1]] = l[2];
    fam(m[1]).samples.push(labels);
  }
  return fams;
}

function rules() {
  const doc = YAML.parse(fs.readFileSync(path.join(DOCKER, 'alerts.yml'), 'utf8'));
  return doc.groups.flatMap((g) => g.rules);
}

async function metrics(d) {
  const r = await fetch(d.url + '/metrics');
  assert.equal(r.status, 200);
  return r.text();
}

test('every metric, label value and counter the alert rules use is on GET /metrics', async () => {
  const redis = await startRedis();
  const d = await startDaemon({ redisUrl: redis.url, env: { STATUSRELAY_UPSTREAM_BUDGET: '150' } });
  cleanup.push(() => redis.stop(), () => d.stop());
  // the Redis-read gauges are -1 until their first read; wait for it (values do not matter)
  await until(async () => /^statusrelay_requests_stuck\{status="pending"\} 0$/m.test(await metrics(d)),
    { msg: 'the stuck gauges read once' });
  const fams = parseMetrics(await metrics(d));
  const rs = rules();
  assert.ok(rs.length >= 10, `${rs.length} rules`);
  const used = new Set();
  for (const r of rs) {
    assert.match(r.alert, /^Statusrelay[A-Za-z]+$/);
    assert.ok(['critical', 'warning'].includes(r.labels?.severity), `${r.alert} has a severity`);
    assert.ok(r.annotations?.summary && r.annotations?.runbook_url, `${r.alert} has a summary and a runbook`);
    const expr = r.expr;
    for (const m of expr.matchAll(/\b(statusrelay_[a-z0-9_]+)(?:\{([^}]*)\})?/g)) {
      const [, name, sel] = m;
      used.add(name);
      const f = fams.get(name);
      assert.ok(f && f.samples.length > 0, `${r.alert}: ${name} is not on /metrics`);
      for (const l of (sel ?? '').matchAll(/(\w+)\s*(=~|!=|!~|=)\s*"([^"]*)"/g)) {
        const [, label, op, value] = l;
        if (op !== '=') continue;
        assert.ok(f.samples.some((s) => s[label] === value),
          `${r.alert}: no ${name} sample has ${label}="${value}" (has ${JSON.stringify(f.samples.map((s) => s[label]))})`);
      }
    }
    for (const m of expr.matchAll(/\b(?:rate|increase)\(\s*(statusrelay_[a-z0-9_]+)/g))
      assert.equal(fams.get(m[1])?.type, 'counter', `${r.alert}: ${m[1]} is taken rate()/increase() of`);
  }
  // the signals the issue asks for are all covered
  for (const n of ['statusrelay_requests_stuck', 'statusrelay_refund_failures_total',
    'statusrelay_webhook_dead_total', 'statusrelay_webhook_endpoints_disabled_total',
    'statusrelay_upstream_ws_state', 'statusrelay_upstream_ws_lagging_total',
    'statusrelay_upstream_budget_denied_total', 'statusrelay_redis_refusing_writes',
    'statusrelay_events_total', 'statusrelay_watched_requests',
    'statusrelay_upstream_auth_failures_total'])
    assert.ok(used.has(n), `a rule uses ${n}`);
  assert.ok(/^statusrelay_upstream_budget_per_minute 150$/m.test(await metrics(d)), 'the budget gauge is the setting');
  // StatusrelayDown selects the scrape job of docker/prometheus.yml
  const prom = YAML.parse(fs.readFileSync(path.join(DOCKER, 'prometheus.yml'), 'utf8'));
  const down = rs.find((r) => r.alert === 'StatusrelayDown');
  const job = /up\{job="([^"]+)"\}/.exec(down.expr)[1];
  assert.ok(prom.scrape_configs.some((s) => s.job_name === job), `prometheus.yml scrapes job ${job}`);
  assert.ok(prom.rule_files.some((f) => path.basename(f) === 'alerts.yml'), 'prometheus.yml loads alerts.yml');
});

test('statusrelay_redis_refusing_writes is 1 while Redis refuses writes, 0 again after', async () => {
  const redis = await startRedis();
  const d = await startDaemon({ redisUrl: redis.url });
  cleanup.push(() => redis.stop(), () => d.stop());
  const gauge = async () => Number(/^statusrelay_redis_refusing_writes (\d+)$/m.exec(await metrics(d))?.[1]);
  assert.equal(await gauge(), 0);
  assert.equal(await redis.cmd('CONFIG', 'SET', 'maxmemory-policy', 'noeviction'), 'OK');
  assert.equal(await redis.cmd('CONFIG', 'SET', 'maxmemory', '1'), 'OK');
  try {
    await until(async () => (await gauge()) === 1, { timeoutMs: 10000, msg: 'refusing_writes 1 at maxmemory' });
    assert.match(await metrics(d), /^statusrelay_redis_up 1$/m, 'Redis still answers: up, refusing writes');
    assert.equal((await d.get('/readyz')).body.redis, 'refusing_writes', 'the same signal as /readyz');
  } finally {
    await redis.cmd('CONFIG', 'SET', 'maxmemory', '0');
  }
  await until(async () => (await gauge()) === 0, { timeoutMs: 15000, msg: 'refusing_writes 0 again' });
});
