#!/usr/bin/env bash
# check_layout.sh - `make check-layout`: the include rules that keep the architecture one-way
# (docs/internals.md "Layout"). Prints every violation as file:line: include, and exits 1 if any.
#   protocol/       includes nothing of ours but protocol/ (pure: no daemon, no store)
#   store/          includes no relay/ header other than relay/common/ (knows no daemon)
#   relay/common/   includes no relay/ header outside relay/common/ (knows no daemon)
#   relay/edge/     includes nothing of store/ (the lws thread only moves frames)
#   relay/          includes neither store/command.h nor hiredis (typed store modules only)
#   relay/<a>/      includes no private header (*internal.h, *_priv.h) of relay/<b>/
#   relay/<sub>/    no circle among its modules, for the folders in CIRCLE_FREE (see below)
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
check "relay/*.[ch] relay/*/*.[ch]" "store/command\\.h" \
    "relay/ speaks the store's typed modules: store/command.h (commands, replies) is store/'s"
hits=$(grep -nE '^#include <hiredis' relay/*.[ch] relay/*/*.[ch] 2>/dev/null || true)
if [ -n "$hits" ]; then
    echo "check-layout: relay/ includes no hiredis header (the store's typed modules carry Redis)"
    echo "$hits" | sed 's/^/  /'
    bad=1
fi
for dir in relay/*/; do
    sub=$(basename "$dir")
    for other in relay/*/; do
        o=$(basename "$other")
        [ "$o" = "$sub" ] && continue
        check "$dir*.[ch]" "relay/$o/[^\"]*(internal|_priv)\\.h" \
            "relay/$sub/ must not include a private header of relay/$o/"
    done
done

# ---- no circle inside one relay/ subfolder ----------------------------------------------------
# A module is x.c with x.h (one node). Its edges, from its .c and its .h:
#   - #include "relay/<sub>/y.h" where y.c exists: x -> y;
#   - a shared private header (a header with no .c of its own, such as internal.h: the floor
#     every file of the folder includes) is not a node: including it says nothing about which
#     module is used, and as a node it would hide every circle (all arrows would point into
#     it). Instead each function or table it declares stands for the module that defines it
#     (non-static, in y.c): x -> y when x names it outside comments. Its own includes of
#     relay/<sub>/ headers count as its includer's.
# So "A's functions call B's and B's call A's through declarations in a shared header" is a
# circle too. tsort finds circles; each is printed with its modules.
# CIRCLE_FREE: the folders checked. CIRCLE_PENDING: folders being untangled, reported only
# (move a folder to CIRCLE_FREE once its circle is gone).
CIRCLE_FREE="api dash"
CIRCLE_PENDING=""
CC=${CC:-cc}

strip_comments() { # the code of $1 without comments (directives kept)
    "$CC" -fpreprocessed -dD -E -P "$1" 2>/dev/null || cat "$1"
}

# The non-static functions and variables y.c defines, one per line.
definitions() {
    strip_comments "$1" | awk '
        /^(static|typedef|extern|#)/ || !/^[A-Za-z_]/ { next }
        { gsub(/__attribute__\(\(.*\)\)/, "") }
        match($0, /^[^(]*[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])? =/) { # a variable: "T name[] = ..."
            s = substr($0, 1, RLENGTH); sub(/(\[[^]]*\])? =$/, "", s); sub(/.*[^A-Za-z0-9_]/, "", s)
            print s; next }
        /;[ \t]*$/ { next }                                     # a declaration
        match($0, /[A-Za-z_][A-Za-z0-9_]*\(/) {                  # a function: "T name(...)"
            print substr($0, RSTART, RLENGTH - 1) }'
}

circles() { # $1 = subfolder; prints its circles, returns 1 if any
    local sub=$1 dir=relay/$1 tmp f h n y defs
    tmp=$(mktemp -d)
    : >"$tmp/defs"
    for f in "$dir"/*.c; do
        [ -e "$f" ] || continue
        definitions "$f" | sed "s|\$| $(basename "$f" .c)|" >>"$tmp/defs"
    done
    : >"$tmp/shared"
    for h in "$dir"/*.h; do
        [ -e "${h%.h}.c" ] && continue
        strip_comments "$h" | grep -oE '[A-Za-z_][A-Za-z0-9_]*' >>"$tmp/shared"
    done
    sort -u "$tmp/shared" -o "$tmp/shared"
    awk 'NR == FNR { s[$1] = 1; next } ($1 in s)' "$tmp/shared" "$tmp/defs" >"$tmp/names"
    : >"$tmp/edges"
    for f in "$dir"/*.[ch]; do
        n=$(basename "$f"); n=${n%.*}
        [ -e "$dir/$n.c" ] || continue # a shared header: its includers carry its edges
        echo "$n $n" >>"$tmp/edges"
        for y in $(sed -n "s|^#include \"relay/$sub/\([^\"]*\)\.h\".*|\1|p" "$f"); do
            if [ -e "$dir/$y.c" ]; then
                echo "$n $y" >>"$tmp/edges"
            else
                sed -n "s|^#include \"relay/$sub/\([^\"]*\)\.h\".*|$n \1|p" "$dir/$y.h" \
                    >>"$tmp/edges"
            fi
        done
        strip_comments "$f" | grep -oE '[A-Za-z_][A-Za-z0-9_]*' | sort -u |
            awk -v n="$n" 'NR == FNR { d[$1] = $2; next } ($1 in d) { print n, d[$1] }' \
                "$tmp/names" - >>"$tmp/edges"
    done
    local out
    # the first loop tsort reports: the module names after its first "input contains a loop:"
    out=$(tsort "$tmp/edges" 2>&1 >/dev/null |
        awk '/input contains a loop/ { if (seen++) exit; next } seen { sub(/^tsort: /, ""); print }')
    [ -n "${CHECK_LAYOUT_EDGES-}" ] && sort -u "$tmp/edges" | awk '$1 != $2' >&2
    rm -rf "$tmp"
    [ -z "$out" ] && return 0
    echo "$out" | tr '\n' ' '
    return 1
}

for sub in $CIRCLE_FREE; do
    if ! loop=$(circles "$sub"); then
        echo "check-layout: relay/$sub/ must have no circle among its modules; one passes through:"
        echo "  $loop"
        bad=1
    fi
done
for sub in $CIRCLE_PENDING; do
    if ! loop=$(circles "$sub"); then
        echo "check-layout: note: relay/$sub/ still has a circle (not yet enforced): $loop"
    fi
done
[ $bad -eq 0 ] && echo "check-layout: ok"
exit $bad
