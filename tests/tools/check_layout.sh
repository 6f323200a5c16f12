#!/usr/bin/env bash
# check_layout.sh - `make check-layout`: the include rules that keep the architecture one-way
# (docs/internals.md "Layout"). Prints every violation as file:line: include, and exits 1 if any.
#   protocol/       includes nothing of ours but protocol/ (pure: no daemon, no store)
#   store/          includes no relay/ header other than relay/common/ (knows no daemon)
#   relay/common/   includes no relay/ header outside relay/common/ (knows no daemon)
#   relay/edge/     includes nothing of store/ (the lws thread only moves frames)
#   relay/<a>/      includes no private header (*internal.h, *_priv.h) of relay/<b>/
set -u
cd "$(dirname "$0")/../.."
bad=0
check() { # $1 = files glob description, $2 = grep -E pattern of forbidden includes, $3 = rule
    local files=$1 pat=$2 rule=$3 hits
    # shellcheck disable=SC2086
    hits=$(grep -nE "^#include \"($pat)" $files 2>/dev/null || true)
    if [ -n "$hits" ]; then
        echo "check-layout: $rule"
        echo "$hits" | sed 's/^/  /'
        bad=1
    fi
}
check "protocol/*.[ch]" "relay/|store/|tests/" "protocol/ must include only protocol/"
check "store/*.[ch]" "relay/[^c]|relay/c[^o]|relay/core|relay/config|relay/commands" \
    "store/ may include relay/common/ only"
check "relay/common/*.[ch]" "relay/[^c]|relay/c[^o]|relay/core|relay/config|relay/commands|store/" \
    "relay/common/ knows no daemon (no other relay/ header, no store/)"
check "relay/edge/*.[ch]" "store/" "relay/edge/ must not include store/"
for dir in relay/*/; do
    sub=$(basename "$dir")
    for other in relay/*/; do
        o=$(basename "$other")
        [ "$o" = "$sub" ] && continue
        check "$dir*.[ch]" "relay/$o/[^\"]*(internal|_priv)\\.h" \
            "relay/$sub/ must not include a private header of relay/$o/"
    done
done
[ $bad -eq 0 ] && echo "check-layout: ok"
exit $bad
