#!/usr/bin/env bash
# make demo: a private Redis, the simulator in mixed-lifecycle mode, the daemon (discovering
# the simulator's requests), a receiver that verifies and prints each webhook, and `tail`.
# Ctrl-C stops everything this script started. Ports can be changed with DEMO_BASE_PORT.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/statusrelay}
BASE=${DEMO_BASE_PORT:-18000}
REDIS_PORT=$((BASE + 1)) SIM_PORT=$((BASE + 2)) HTTP_PORT=$((BASE + 3)) WS_PORT=$((BASE + 4))
HOOK_PORT=$((BASE + 5))
DIR=$(mktemp -d /tmp/statusrelay-demo.XXXXXX)
KEY=demo-api-key
pids=()
cleanup() {
    trap - INT TERM EXIT
    echo; echo "demo: stopping"
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup INT TERM EXIT

redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$DIR" --appendonly yes \
    --save "" --daemonize no >"$DIR/redis.log" 2>&1 &
pids+=($!)
# the usual mix plus the upstream's reversals (reorg, double spend), late refunds and
# requests that are never deposited
MIX=success:50,depositing:7,delayed:5,refund:8,failure:4,deposit-address:8,solana:6
MIX=$MIX,reorg:4,double-spend:3,late-refund:2,never-deposited:3
"$BIN" sim --listen "127.0.0.1:$SIM_PORT" --rate 1 --seed 7 --api-key "$KEY" --mix "$MIX" \
    >"$DIR/sim.log" 2>&1 &
pids+=($!)
sleep 0.5
STATUSRELAY_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0" \
STATUSRELAY_HTTP_LISTEN="127.0.0.1:$HTTP_PORT" STATUSRELAY_WS_LISTEN="127.0.0.1:$WS_PORT" \
STATUSRELAY_UPSTREAM_API_URL="http://127.0.0.1:$SIM_PORT" \
STATUSRELAY_UPSTREAM_WS_URL="ws://127.0.0.1:$SIM_PORT/" \
STATUSRELAY_UPSTREAM_API_KEY="$KEY" STATUSRELAY_DISCOVER=true STATUSRELAY_DISCOVER_INTERVAL=2s \
STATUSRELAY_ALLOW_PRIVATE_TARGETS=true STATUSRELAY_RETRY_SCHEDULE=0s,1s,5s,30s \
    "$BIN" serve >"$DIR/daemon.log" 2>&1 &
pids+=($!)
export STATUSRELAY_ADMIN_URL="http://127.0.0.1:$HTTP_PORT"
for _ in $(seq 1 100); do
    curl -fs "$STATUSRELAY_ADMIN_URL/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fs "$STATUSRELAY_ADMIN_URL/readyz" >/dev/null || { echo "demo: daemon not ready"; tail -20 "$DIR/daemon.log"; exit 1; }
secret=$(curl -fs -X POST "$STATUSRELAY_ADMIN_URL/v1/webhooks" -H 'content-type: application/json' \
    -d "{\"url\":\"http://127.0.0.1:$HOOK_PORT/hook\",\"description\":\"demo receiver\"}" |
    sed -n 's/.*"secret":"\([^"]*\)".*/\1/p')
(cd tests && node demo/receiver.mjs "$HOOK_PORT" "$secret") &
pids+=($!)
cat <<MSG

  statusrelay demo is running (logs in $DIR)
    dashboard   http://127.0.0.1:$WS_PORT/
    REST API    $STATUSRELAY_ADMIN_URL   (try: $BIN webhooks list)
    simulator   http://127.0.0.1:$SIM_PORT   (upstream, 1 new request/s)
  Following events with '$BIN tail'; Ctrl-C stops everything.

MSG
"$BIN" tail &
pids+=($!)
wait "${pids[-1]}"
