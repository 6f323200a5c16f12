# statusrelay - one GNU Makefile. `make deps`, `make`, `make test`, `make asan`, `make fuzz`,
# `make demo`, `make bench`, `make clean`. Objects go to $(B)/, the binary to $(BIN).

SHELL   := /bin/bash
PKGS    := libevent libevent_pthreads libwebsockets jansson hiredis libcurl openssl zlib
DEBS    := build-essential pkg-config libevent-dev libwebsockets-dev libjansson-dev \
           libhiredis-dev libssl-dev libcurl4-openssl-dev libcmocka-dev redis-server zlib1g-dev \
           clang libclang-rt-14-dev openssl curl ca-certificates procps prometheus \
           wrk nginx libnginx-mod-nchan linux-perf chromium
WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wwrite-strings -Wformat=2 -Wno-unused-parameter -Wno-format-zero-length
SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
B       ?= build
BIN     ?= bin/statusrelay
OPT     ?= -O2 -g
CC      ?= cc
FUZZ_SECONDS ?= 60

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
ALL_CFLAGS  = -std=gnu11 -pthread -I. -I$(B)/gen $(WARN) $(OPT) $(CFLAGS) $(PKG_CFLAGS)
ALL_LDFLAGS = -pthread $(LDFLAGS)

PROTO_SRC := $(wildcard protocol/*.c)
STORE_SRC := $(wildcard store/*.c)
RELAY_SRC := $(filter-out relay/main.c,$(wildcard relay/*.c relay/*/*.c))
# Files compiled into the binary as byte arrays (Lua scripts, the dashboard page).
EMBED_SRC := $(sort $(wildcard store/*.lua relay/www/*))
EMBED_C   := $(B)/gen/embedded.c

LIB_OBJ  := $(PROTO_SRC:%.c=$(B)/%.o) $(STORE_SRC:%.c=$(B)/%.o) $(RELAY_SRC:%.c=$(B)/%.o) \
            $(B)/gen/embedded.o
MAIN_OBJ := $(B)/relay/main.o
LIBSR    := $(B)/libstatusrelay.a
LIBPROTO := $(B)/libproto.a

UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)
HELPER_SRC := $(wildcard tests/helpers/*.c)
HELPER_BIN := $(HELPER_SRC:tests/helpers/%.c=$(B)/helpers/%)
FUZZ_SRC  := $(wildcard tests/fuzz/fuzz_*.c)

.PHONY: all deps test test-unit test-integration asan fuzz clean demo bench check-purity \
        check-layout format npm-deps helpers
all: $(BIN) helpers

$(B)/%.o: %.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(EMBED_C): $(EMBED_SRC) relay/common/embed.pl
	@mkdir -p $(@D)
	perl relay/common/embed.pl $(EMBED_SRC) > $@.tmp && mv $@.tmp $@

$(B)/gen/embedded.o: $(EMBED_C)
	@$(CC) $(ALL_CFLAGS) -c $< -o $@

$(LIBSR): $(LIB_OBJ)
	@rm -f $@
	@ar rcs $@ $^

$(LIBPROTO): $(PROTO_SRC:%.c=$(B)/%.o)
	@rm -f $@
	@ar rcs $@ $^

$(BIN): $(MAIN_OBJ) $(LIBSR)
	@mkdir -p $(@D)
	@echo "  LINK    $@"
	@$(CC) $(ALL_LDFLAGS) -o $@ $(MAIN_OBJ) $(LIBSR) $(PKG_LIBS) -lm

helpers: $(HELPER_BIN)
$(B)/helpers/%: tests/helpers/%.c $(LIBSR)
	@mkdir -p $(@D)
	@echo "  LINK    $@"
	@$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(LIBSR) $(PKG_LIBS) -lm

# Unit tests of relay/ modules without I/O (test_relay_*) link the daemon's library.
$(B)/tests/test_relay_%: tests/unit/test_relay_%.c $(LIBSR)
	@mkdir -p $(@D)
	@echo "  LINK    $@"
	@$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -MMD -MP -MF $@.d -o $@ $< $(LIBSR) $(PKG_LIBS) -lcmocka -lm

# Unit tests cover protocol/ (pure) and link only libproto.a: no network, under a second.
$(B)/tests/%: tests/unit/%.c $(LIBPROTO)
	@mkdir -p $(@D)
	@echo "  LINK    $@"
	@$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -MMD -MP -MF $@.d -o $@ $< $(LIBPROTO) $(PKG_LIBS) -lcmocka -lm

# ---- dependencies -------------------------------------------------------------------------
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
deps:
	@missing=""; for p in $(DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || missing="$$missing nodejs npm"; \
	if [ -n "$$missing" ]; then \
	    echo "deps: installing$$missing"; \
	    $(SUDO) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "deps: all Debian packages present"; fi
	@$(MAKE) --no-print-directory npm-deps

npm-deps: tests/node_modules/.installed
tests/node_modules/.installed: tests/package.json
	cd tests && npm install --no-audit --no-fund --loglevel=error
	@touch $@

# ---- tests --------------------------------------------------------------------------------
test: test-unit test-alerts test-integration

test-unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; $$t; done

# The alert rules (docker/alerts.yml): syntax, their unit tests (docker/alerts.test.yml) and
# the compose stack's Prometheus config, with its container paths pointed at this tree.
.PHONY: test-alerts
test-alerts:
	@command -v promtool >/dev/null 2>&1 || { echo "test-alerts: promtool not found:" \
	    "install Debian's prometheus package (make deps)" >&2; exit 1; }
	promtool check rules docker/alerts.yml
	promtool test rules docker/alerts.test.yml
	@t=$$(mktemp -d) && trap 'rm -rf $$t' EXIT && echo token > $$t/token && \
	    sed -e "s#/etc/prometheus/alerts.yml#$(abspath docker/alerts.yml)#" \
	        -e "s#/run/secrets/statusrelay_token#$$t/token#" docker/prometheus.yml > $$t/prometheus.yml && \
	    promtool check config $$t/prometheus.yml

test-integration: $(BIN) helpers npm-deps
	cd tests && STATUSRELAY_BIN=$(abspath $(BIN)) STATUSRELAY_HELPERS=$(abspath $(B)/helpers) \
	    node --test --test-concurrency=1 --test-reporter=spec integration/

asan:
	$(MAKE) B=build-san BIN=build-san/statusrelay OPT="-O1 -g $(SAN)" LDFLAGS="$(SAN)" \
	    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 test

# libFuzzer targets: clang, ASan + UBSan, protocol/ sources only, each run FUZZ_SECONDS.
# Seeds: tests/data/seeds/<target>/ plus the upstream fixtures of that source
# (tests/fixtures/upstream/, copied next to the corpus: one copy of each sample in the tree).
FUZZ_CFLAGS = -std=gnu11 -I. -g -O1 -fsanitize=fuzzer,address,undefined \
              -fno-sanitize-recover=all $(shell pkg-config --cflags jansson openssl)
FUZZ_LIBS   = $(shell pkg-config --libs jansson openssl)
fuzz: $(FUZZ_SRC:tests/fuzz/%.c=build-fuzz/%)
	@set -e; for f in $^; do n=$$(basename $$f); mkdir -p build-fuzz/corpus/$$n; \
	    seeds=tests/data/seeds/$$n; [ -d $$seeds ] || seeds=; \
	    [ $$n != fuzz_facts ] || seeds="$$seeds tests/data/seeds/fuzz_normalize_requests"; \
	    case $$n in *_ws) fx='ws_*';; *_status) fx='status_v3_*';; *_webhook) fx='webhook_payload_*';; \
	        *_requests|*_facts) fx='requests_v3_*';; *_json) fx='*.json';; *) fx=;; esac; \
	    if [ -n "$$fx" ]; then rm -rf build-fuzz/fixtures/$$n; mkdir -p build-fuzz/fixtures/$$n; \
	        cp tests/fixtures/upstream/$$fx build-fuzz/fixtures/$$n/; seeds="$$seeds build-fuzz/fixtures/$$n"; fi; \
	    echo "== $$n for $(FUZZ_SECONDS)s"; \
	    $$f -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -artifact_prefix=build-fuzz/ -print_final_stats=1 \
	        build-fuzz/corpus/$$n $$seeds 2>&1 | grep -E "stat::number_of_executed_units|ERROR|SUMMARY|Done" ; \
	    test $${PIPESTATUS[0]} -eq 0; done
build-fuzz/%: tests/fuzz/%.c $(wildcard tests/fuzz/*.h) $(PROTO_SRC) $(wildcard protocol/*.h)
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) -o $@ $< $(PROTO_SRC) $(FUZZ_LIBS)

check-purity:
	@! grep -nE '#include <(event2|libwebsockets|hiredis|curl)|\b(socket|recv|send|fopen|time|clock_gettime|getrandom|pthread_[a-z_]+)\(' protocol/*.[ch] \
	    || (echo "protocol/ must stay free of I/O"; false)

# The include rules of the layout (docs/internals.md "Layout"): tests/tools/check_layout.sh.
check-layout:
	@tests/tools/check_layout.sh

format:
	clang-format -i $(wildcard protocol/*.[ch] store/*.[ch] relay/*.[ch] relay/*/*.[ch] tests/*/*.c)

demo: deps
	@$(MAKE) --no-print-directory $(BIN)
	BIN=$(BIN) tests/demo.sh

bench: $(BIN)
	@if [ -x bench/run.sh ]; then bench/run.sh $(SCENARIO); else echo "make bench: not yet"; exit 1; fi

clean:
	rm -rf build build-san build-fuzz bin

-include $(shell find $(B) -name '*.d' 2>/dev/null)
