#!/usr/bin/env bash
# bench/run.sh [SCENARIO] - `make bench`: builds the helpers, then runs bench/run.mjs.
# SCENARIO: webhooks | dashboards | recovery | state | cluster | all (default) | scale | cost.
# `cost` (bench/cost.mjs: daemon and Redis CPU per event and per delivery; COST_BEFORE_BIN=<an
# older binary> adds a before column, COST_ROUNDS=2) is opt-in too. `scale`
# (bench/scale.mjs: K daemons x M Redis masters x N partitions, one endpoint) is opt-in, not in
# `all`; its layouts come from the environment, which `make bench VAR=...` passes through:
# SCALE_LAYOUTS=KxMxN,... (default 1x1x1,2x1x2,2x2x2) or SCALE_DAEMONS / SCALE_MASTERS /
# SCALE_PARTITIONS (one layout, 2 each by default), SCALE_EVENTS per daemon (30000),
# SCALE_SECONDS (30). The Makefile passes
# B (build dir) and BIN (daemon binary) through the environment; the defaults match `make`.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
BIN=${BIN:-bin/statusrelay}
missing=""
for t in node redis-server redis-cli wrk nginx; do command -v "$t" >/dev/null 2>&1 || missing="$missing $t"; done
[ -f /usr/lib/nginx/modules/ngx_nchan_module.so ] || missing="$missing libnginx-mod-nchan"
if [ -n "$missing" ]; then
    echo "bench: missing:$missing - run 'make deps' first" >&2
    exit 1
fi
make --no-print-directory B="$B" BIN="$BIN" "$BIN" helpers >/dev/null
# 10k websocket clients need 10k descriptors in ws_load, the daemon and nginx each.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec env BIN="$(realpath "$BIN")" HELPERS="$(realpath "$B/helpers")" node bench/run.mjs "${1:-all}"
