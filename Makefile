# nginx-idempotency — build, test and demo.
#   make          build build/ngx_http_idempotency_module.so against Debian's nginx-dev
#   make test     unit tests, the monitoring rules, then the Test::Nginx suite (installs what is missing)
#   make run      the demo gateway on 127.0.0.1:8080 (installs what is missing)
#   make deb      the Debian package libnginx-mod-http-idempotency in build/deb/
#   make deb-trixie         the same for Debian 13, built in a trixie root
#   make docker-steps       contrib/docker/Dockerfile's steps, run in trixie roots without Docker
#   make test-fresh-root    the README's quick start (make test, make run) in a fresh trixie root
#   make matrix             the module built against nginx 1.22, 1.26 and 1.30, with and without debug
#   make test-newest-nginx  the Test::Nginx suite against the newest nginx Debian serves, built here
#   make test-stores        the files that talk to Redis against Valkey 8.1, Valkey 9.1 and Redis 8.0, built here
#   make verify   the claim protocol's model checked by SPIN (model/README.md)

SHELL := /bin/bash

NGINX_SRC   ?= /usr/share/nginx/src
BUILD       ?= build
MODULE      := $(BUILD)/ngx_http_idempotency_module.so
NGINX_BIN   ?= $(shell command -v nginx 2>/dev/null || echo /usr/sbin/nginx)

# Debian's flags for building nginx modules (what dh-sequence-nginx passes)
CC_OPT ?= -g -O2 -fstack-protector-strong -Wformat -Werror=format-security -fPIC -Wdate-time -D_FORTIFY_SOURCE=2
LD_OPT ?= -Wl,-z,relro -Wl,-z,now -fPIC

CXX      ?= g++
CXXFLAGS ?= -std=c++17 -O1 -g -Wall -Wextra -Werror
CORE_SRCS := module/json_canonical.cpp module/form_fields.cpp module/fingerprint_parts.cpp module/disposition.cpp module/upstream_control.cpp module/claim_token.cpp module/inspect.cpp module/key.cpp module/fingerprint.cpp module/record.cpp module/replayable.cpp module/compression.cpp module/pieces.cpp module/live_log.cpp module/sse.cpp module/outcome.cpp module/decide.cpp module/seal.cpp module/redis/resp.cpp module/redis/reply_reader.cpp module/redis/retry.cpp module/redis/info.cpp module/redis/cluster.cpp module/redis/tls_reason.cpp module/zone/zone_rules.cpp
UNIT_SRCS := $(wildcard t/unit/*.cpp)
UNIT_BIN  := $(BUILD)/unit_tests

MODULE_SRCS := $(shell find module -name '*.cpp' -o -name '*.hpp') config

.PHONY: all module deps unit test prove test-valgrind test-asan run stop clean stress instructions bench deb deb-trixie fuzz

all: module

module: $(MODULE)

# nginx's own configure, run on a private copy of the nginx-dev tree with the
# packaged binary's flags (--with-compat) so the module loads into it.
# configure lists the module's headers as dependencies: a header added,
# removed or renamed means configuring again.
MODULE_HEADERS := $(sort $(wildcard module/*.hpp module/*/*.hpp))
$(BUILD)/headers.list: FORCE
	@mkdir -p $(BUILD); echo '$(MODULE_HEADERS)' | cmp -s - $@ || echo '$(MODULE_HEADERS)' > $@

$(BUILD)/nginx/objs/Makefile: config $(BUILD)/headers.list
	rm -rf $(BUILD)/nginx
	mkdir -p $(BUILD)
	cp -r $(NGINX_SRC) $(BUILD)/nginx
	cd $(BUILD)/nginx && \
	  if [ -f conf_flags ]; then . ./conf_flags; else NGX_CONF_FLAGS=(--with-compat); fi && \
	  ./configure --with-cc-opt="$(CC_OPT)" --with-ld-opt="$(LD_OPT)" "$${NGX_CONF_FLAGS[@]}" \
	    --add-dynamic-module="$(CURDIR)" > configure.log || { cat configure.log; exit 1; }

$(MODULE): $(BUILD)/nginx/objs/Makefile $(MODULE_SRCS)
	$(MAKE) -C $(BUILD)/nginx -f objs/Makefile modules
	cp $(BUILD)/nginx/objs/ngx_http_idempotency_module.so $@.tmp && mv -f $@.tmp $@  # a new inode: running nginx keep theirs
	@echo "load_module $(CURDIR)/$@; events {}" > $(BUILD)/load-check.conf
	$(NGINX_BIN) -t -q -p $(CURDIR)/$(BUILD) -c $(CURDIR)/$(BUILD)/load-check.conf -g 'error_log stderr; pid /dev/null;'

$(UNIT_BIN): $(CORE_SRCS) $(UNIT_SRCS) $(wildcard module/*.hpp module/redis/*.hpp module/zone/*.hpp)
	mkdir -p $(BUILD)
	$(CXX) $(CXXFLAGS) -Imodule $(UNIT_SRCS) $(CORE_SRCS) -o $@ -lgtest -lgtest_main -lpthread -lhiredis -lzstd -lsimdjson -lcrypto

deps:
	@scripts/install-deps.sh

# libFuzzer targets (fuzz/*.cpp) on the pure core, built with clang and
# ASan+UBSan into $(BUILD)/fuzz/, each run for FUZZ_SECONDS on a working
# corpus in $(BUILD)/fuzz/corpus/<target> seeded from fuzz/corpus/<target>
# (the committed seeds are never written). Fails if any target finds a
# crash, a sanitizer report or a broken invariant; the input is left in
# $(BUILD)/fuzz/artifacts/. `make fuzz FUZZ_SECONDS=5` is a quick smoke run.
FUZZ_SECONDS ?= 60
FUZZ_CXX     ?= clang++
FUZZ_FLAGS   := -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_TARGETS := fuzz_key fuzz_record fuzz_reply fuzz_cluster fuzz_live fuzz_operator fuzz_canonical
FUZZ_BINS    := $(addprefix $(FUZZ_DIR)/,$(FUZZ_TARGETS))
FUZZ_MAX_LEN_fuzz_key    := 1024
FUZZ_MAX_LEN_fuzz_record := 4096
FUZZ_MAX_LEN_fuzz_reply  := 4096
FUZZ_MAX_LEN_fuzz_cluster := 4096
FUZZ_MAX_LEN_fuzz_live    := 4096
FUZZ_MAX_LEN_fuzz_operator := 4096
FUZZ_MAX_LEN_fuzz_canonical := 4096

$(FUZZ_BINS): $(FUZZ_DIR)/%: fuzz/%.cpp fuzz/fuzz_common.hpp $(CORE_SRCS) $(wildcard module/*.hpp module/redis/*.hpp module/zone/*.hpp)
	mkdir -p $(FUZZ_DIR)
	$(FUZZ_CXX) $(FUZZ_FLAGS) -Imodule $< $(CORE_SRCS) -o $@ -lhiredis -lzstd -lsimdjson -lcrypto

fuzz: deps $(FUZZ_BINS)
	@failed=; \
	for tl in $(foreach t,$(FUZZ_TARGETS),$(t):$(FUZZ_MAX_LEN_$(t))); do \
	  t=$${tl%:*}; len=$${tl#*:}; log=$(FUZZ_DIR)/$$t.log; \
	  mkdir -p $(FUZZ_DIR)/corpus/$$t $(FUZZ_DIR)/artifacts; \
	  cp fuzz/corpus/$$t/* $(FUZZ_DIR)/corpus/$$t/; \
	  if $(FUZZ_DIR)/$$t -max_total_time=$(FUZZ_SECONDS) -max_len=$$len -timeout=10 \
	       -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/artifacts/$$t- \
	       $(FUZZ_DIR)/corpus/$$t > $$log 2>&1; then status=ok; \
	  else status="FAILED (see $$log)"; failed="$$failed $$t"; fi; \
	  execs=$$(sed -n 's/^stat::number_of_executed_units: *//p' $$log); \
	  rate=$$(sed -n 's/^stat::average_exec_per_sec: *//p' $$log); \
	  secs=$$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' $$log); \
	  cov=$$(grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*' $$log | tail -1); \
	  echo "$$t: $${execs:-?} execs ($${rate:-?}/s) in $${secs:-?} s, $${cov:-no coverage line}: $$status"; \
	done; \
	if [ -n "$$failed" ]; then \
	  for t in $$failed; do echo "--- $$t"; grep -E 'check failed|ERROR:|runtime error|SUMMARY:|Test unit written' $(FUZZ_DIR)/$$t.log; done; \
	  exit 1; \
	fi

# The replay path fuzzed through a real nginx (scripts/fuzz-gateway.pl): the
# module's ASan+UBSan build (scripts/asan-build.sh, which alone compiles in
# the test hook idempotency_test_store_raw: raw bytes under any key of the
# zone store) in nginx with 2 workers, on a private Redis and on the zone
# store. Seeds are real records of every kind (a claim, plain, trailers,
# compressed, with a dictionary, sealed, in pieces, unreplayable, a live log)
# written by driving the gateway; each iteration writes a mutated or crafted
# one under its real keys and sends the retry, joiners, the operator's
# inspection and purge, clients that leave. Fails on an answer the design
# does not list, a sanitizer report, a worker lost, an [alert], any execution
# of the upstream (every key holds a record), a request never finalized, or
# a worker's VmRSS over FUZZ_GATEWAY_RSS_MB (64) above its baseline. Each
# finding's input and report in $(BUILD)/fuzz-gateway/findings/; replay one
# with `perl scripts/fuzz-gateway.pl --replay DIR`. FUZZ_GATEWAY_SECONDS of
# fuzzing (600), split among FUZZ_GATEWAY_STORE (both, redis or zone);
# FUZZ_GATEWAY_SEED repeats a run's mutations. `make fuzz-gateway-ci` is the
# short pass: FUZZ_GATEWAY_CI_SECONDS (60) of fuzzing, about 80 s in all
# once the ASan build is there. `make fuzz-gateway-seeds` writes the seeds
# again into fuzz/corpus/gateway/.
FUZZ_GATEWAY_SECONDS    ?= 600
FUZZ_GATEWAY_CI_SECONDS ?= 60
FUZZ_GATEWAY_STORE      ?= both
FUZZ_GATEWAY_ENV = NGINX_BIN=$(NGINX_BIN) FUZZ_GATEWAY_STORE=$(FUZZ_GATEWAY_STORE) \
                   FUZZ_GATEWAY_FINDINGS=$(CURDIR)/$(BUILD)/fuzz-gateway/findings
.PHONY: fuzz-gateway fuzz-gateway-ci fuzz-gateway-seeds asan-build
asan-build: deps
	NGINX_SRC=$(NGINX_SRC) NGINX_BIN=$(NGINX_BIN) scripts/asan-build.sh > /dev/null

fuzz-gateway: asan-build
	$(FUZZ_GATEWAY_ENV) FUZZ_GATEWAY_SECONDS=$(FUZZ_GATEWAY_SECONDS) perl scripts/fuzz-gateway.pl

fuzz-gateway-ci: asan-build
	$(FUZZ_GATEWAY_ENV) FUZZ_GATEWAY_SECONDS=$(FUZZ_GATEWAY_CI_SECONDS) perl scripts/fuzz-gateway.pl

fuzz-gateway-seeds: asan-build
	rm -rf fuzz/corpus/gateway
	$(FUZZ_GATEWAY_ENV) FUZZ_GATEWAY_SECONDS=0 perl scripts/fuzz-gateway.pl --write-seeds fuzz/corpus/gateway

# The include floors of docs/design.md#layers, then the unit tests.
unit: $(UNIT_BIN)
	scripts/check-layers.pl
	$(UNIT_BIN)

# The floors checked on the built module's calls as well (nm), and the check
# itself on a planted upward call and include.
.PHONY: layers
layers: $(MODULE)
	scripts/check-layers.pl --calls $(BUILD)/nginx/objs/addon
	scripts/check-layers-selftest.sh

# The Test::Nginx suite, on Redis; then the store-agnostic files again on the
# shared-memory zone store, then CLUSTER_TESTS again on a Redis Cluster of 3
# masters (t/lib/Idem/Store.pm rewrites their blocks' Redis configuration;
# blocks marked --- redis_only are skipped on both, --- shared_store on the
# zone). The stand-in in t/standin is used only when the real Test::Nginx
# is not installed. PROVE_JOBS=N runs each pass as N prove processes at
# once (scripts/prove-jobs.sh). STORE_SERVER=valkey-9 (or valkey-8,
# redis-8: scripts/store-server.sh, which builds it the first time) runs
# make prove, make test and make stress on that server and its cli instead
# of the machine's redis-server. PROVE_STORES chooses the passes: redis
# (every file), zone, cluster; all three by default.
STORE_SERVER ?=
STORE_ENV = $(if $(STORE_SERVER),bin=$$(scripts/store-server.sh $(STORE_SERVER)) || exit 1; \
              export TEST_REDIS_SERVER=$$bin; echo "store server: $$bin";)
STORE_AGNOSTIC_TESTS := t/001-replay.t t/003-fingerprint.t t/004-in-flight.t t/005-upstream-errors.t \
                        t/011-wait.t t/013-max-response-size.t t/014-failure-outcomes.t t/032-scope.t \
                        t/042-release-statuses.t t/055-live-join.t t/057-event-stream-resume.t \
                        t/059-admin.t t/060-fence.t t/061-upstream-control.t t/062-replayed-header.t \
                        t/064-compression.t t/065-pieces.t t/066-dictionary.t t/067-pieces-flow.t \
                        t/070-unreplayable-at-capture.t t/073-fingerprint-parts.t
CLUSTER_TESTS := t/055-live-join.t t/059-admin.t t/060-fence.t t/065-pieces.t t/067-pieces-flow.t

PROVE_STORES ?= redis zone cluster
prove: $(MODULE)
	@$(STORE_ENV) if perl -MTest::Nginx::Socket -e1 2>/dev/null; then inc=; else inc="-I t/standin"; fi; \
	  for store in $(PROVE_STORES); do \
	    case $$store in \
	    redis)   TEST_NGINX_BINARY=$(NGINX_BIN) scripts/prove-jobs.sh $$inc -r t ;; \
	    zone)    TEST_NGINX_BINARY=$(NGINX_BIN) TEST_NGINX_IDEM_STORE=zone scripts/prove-jobs.sh $$inc $(STORE_AGNOSTIC_TESTS) ;; \
	    cluster) TEST_NGINX_BINARY=$(NGINX_BIN) TEST_NGINX_IDEM_STORE=cluster scripts/prove-jobs.sh $$inc $(CLUSTER_TESTS) ;; \
	    *)       echo "PROVE_STORES: no pass \"$$store\" (redis, zone, cluster)" >&2; false ;; \
	    esac || exit 1; \
	  done

test: deps doc-check
	$(MAKE) unit
	$(MAKE) layers
	$(MAKE) rules-check
	$(MAKE) prove

# The monitoring in contrib/: the Prometheus rules checked and their unit
# tests run by promtool (contrib/prometheus/idempotency.rules.test.yml), and
# the Grafana dashboard checked (scripts/check-dashboard.pl: well-formed,
# every PromQL expression parsed by promtool, every metric one the module
# serves). t/063-prometheus.t runs both against a real Prometheus.
.PHONY: rules-check
rules-check:
	@command -v promtool >/dev/null || scripts/install-deps.sh
	promtool check rules contrib/prometheus/idempotency.rules.yml
	cd contrib/prometheus && promtool test rules idempotency.rules.test.yml
	scripts/check-dashboard.pl

# The claim protocol's model (model/claim.pml), checked by SPIN: every
# property must hold, every switch that reproduces a known defect must give
# its counterexample (model/verify.sh; trails in build/model/).
.PHONY: verify
verify:
	@command -v spin >/dev/null || scripts/install-deps.sh
	model/verify.sh

# Every relative link and #anchor in README.md, docs/*.md and t/README.md
# resolves (scripts/check-doc-links.sh), and the benchmark's blocks in the
# docs are the ones its scripts write (scripts/bench-check-docs.sh): the
# cheap first step of make test.
.PHONY: doc-check
doc-check:
	scripts/check-doc-links.sh
	scripts/bench-check-docs.sh

# Instructions per request (callgrind), per cell and for the module's own work;
# the tables also into docs/performance.md (block "instructions").
instructions: deps $(MODULE)
	@command -v valgrind >/dev/null || { echo "valgrind is needed: apt-get install valgrind" >&2; exit 1; }
	NGINX_BIN=$(NGINX_BIN) scripts/instructions.sh $(INSTRUCTIONS_ARGS)

# The suite with every nginx under valgrind memcheck; fails on any report.
test-valgrind: deps $(MODULE)
	@command -v valgrind >/dev/null || { echo "valgrind is needed: apt-get install valgrind" >&2; exit 1; }
	scripts/valgrind-suite.sh

# The suite against the module built with ASan+UBSan in build/asan/ (its own
# configure of the nginx-dev tree), libasan preloaded into every nginx; fails on
# a sanitizer report about the module or a failing test. About 1.5 minutes.
# ASAN_TESTS="t/a.t" runs only those files; with TEST_NGINX_IDEM_STORE=zone or
# =cluster, on that store (as the store passes of prove).
test-asan: deps
	NGINX_SRC=$(NGINX_SRC) NGINX_BIN=$(NGINX_BIN) scripts/asan-suite.sh

run: deps $(MODULE)
	scripts/demo.sh start

stop:
	scripts/demo.sh stop

# Stress and failure-injection scenarios (stress/*.t, Test::More files run
# by prove, on the fixtures of t/lib/Idem/): each file its own Redis,
# upstream and nginx instances on free loopback ports (the concurrency case
# also against the zone store and Redis over TLS); non-zero on a violation.
# STRESS_SCALE=0.2 for a quick run, STRESS_ASAN=1 against the ASan build,
# STRESS_TESTS="stress/03-redis-outage.t" for some files only,
# STORE_SERVER=valkey-9 on another server (see prove).
STRESS_TESTS ?= stress
stress: deps $(MODULE)
	$(STORE_ENV) NGINX_BIN=$(NGINX_BIN) prove -v $(STRESS_TESTS)

# The benchmark (scripts/bench.sh --growth --instructions): CPU per request
# per process, throughput and latency of plain proxy vs. the module (new key,
# replay, no key; the zone store, TLS, Redis Cluster, Redis on a CPU of its
# own), Redis commands per request, worker RSS, how the cost grows (response
# and body size, connections, workers, waiting duplicates), instructions
# per request (callgrind), and live joining (scripts/bench-live.sh: a
# joiner's lag, joiners at scale, memory); about 14 minutes; results in
# build/bench/results.md, and each measured table into docs/performance.md
# between its bench:begin/bench:end markers (scripts/bench-docs.pl).
# `make bench BENCH_ARGS=--quick` for about 5; BENCH_ARGS=--no-docs leaves
# the docs alone.
bench: deps $(MODULE)
	NGINX_BIN=$(NGINX_BIN) scripts/bench.sh --growth --instructions $(BENCH_ARGS)

# The Debian package for the packaged nginx (debian/, dh-sequence-nginx),
# built by scripts/build-deb.sh in a copy of the tree (build/deb/src); installs
# its build dependencies when missing. Rebuilt only when a source changed.
DEB_PKG     := libnginx-mod-http-idempotency
DEB_VERSION := $(shell sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' debian/changelog)
DEB_ARCH    := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB         := $(BUILD)/deb/$(DEB_PKG)_$(DEB_VERSION)_$(DEB_ARCH).deb

deb: $(DEB)

# The same package for Debian 13 (trixie), version +deb13, built against
# trixie's nginx-dev in a debootstrapped trixie root kept in
# ~/.cache/nginx-idempotency/trixie-root, then installed there and checked
# with trixie's nginx and redis-server (scripts/build-deb-trixie.sh; needs
# root). About 4 minutes the first time, 1 minute after.
deb-trixie: deps
	scripts/build-deb-trixie.sh $(BUILD)/deb-trixie

# contrib/docker/Dockerfile's instructions run without Docker, each stage in
# an overlay of a pristine debootstrapped trixie root, as the file's FROM
# debian:trixie names (scripts/docker-steps.sh, which reads the file: its
# package lists and commands are the ones run); then the image's nginx loads
# the module. Needs root. About 2 minutes (the first run 1.5 more: debootstrap).
.PHONY: docker-steps
docker-steps:
	scripts/docker-steps.sh contrib/docker/Dockerfile $(BUILD)/docker-steps

# The README's quick start on a fresh Debian 13: in an overlay of the same
# pristine trixie root, with nothing but git, make and a copy of the tree,
# `make deps`, `make test $(FRESH_ROOT_MAKE_ARGS)`, then `make run` with the
# README's POST and its retry, in a network namespace of their own
# (scripts/test-fresh-root.sh; needs root). One Test::Nginx pass, on Redis,
# by default: the zone and cluster passes run in the machine's make test
# (docs/install.md#a-fresh-debian). 10.5 to 12.5 minutes.
FRESH_ROOT_MAKE_ARGS ?= PROVE_STORES=redis
.PHONY: test-fresh-root
test-fresh-root:
	scripts/test-fresh-root.sh $(BUILD)/fresh-root $(FRESH_ROOT_MAKE_ARGS)

$(DEB): $(MODULE_SRCS) $(shell find debian -type f) README.md $(wildcard docs/*.md) scripts/build-deb.sh $(shell find contrib -type f) scripts/idempotency-admin
	scripts/build-deb.sh $(BUILD)/deb

clean:
	rm -rf $(BUILD) t/servroot

FORCE:

# The module compiled (nginx's make modules, its -Werror) against the nginx-dev
# of the machine (Debian 12: 1.22.1) and of Debian 13 trixie and sid
# (downloaded into ~/.cache/nginx-idempotency, not installed), each with and
# without --with-debug, plus any nginx source trees in NGINX_MATRIX_EXTRA
# (an nginx.org release or a github.com/nginx/nginx checkout). Builds in
# build/matrix/; a table at the end, non-zero if any build failed.
NGINX_MATRIX_EXTRA ?=
.PHONY: matrix
matrix: deps
	CC_OPT="$(CC_OPT)" LD_OPT="$(LD_OPT)" NGINX_SRC=$(NGINX_SRC) scripts/matrix.sh $(NGINX_MATRIX_EXTRA)

# Two gateways of different releases on one Redis (a rolling upgrade):
# this build and the module built from MIXED_OLD_REF (default: the last
# release before responses kept in pieces and compression dictionaries),
# each reading what the other wrote (scripts/mixed-versions.pl).
MIXED_OLD_REF ?= a28a887
.PHONY: mixed-versions
mixed-versions: $(MODULE)
	rm -rf $(BUILD)/mixed && mkdir -p $(BUILD)/mixed/src
	git archive $(MIXED_OLD_REF) | tar -x -C $(BUILD)/mixed/src
	$(MAKE) -C $(BUILD)/mixed/src module BUILD=build > $(BUILD)/mixed/build.log 2>&1 || \
	  { tail -30 $(BUILD)/mixed/build.log; exit 1; }
	NGINX_BIN=$(NGINX_BIN) perl scripts/mixed-versions.pl --old $(BUILD)/mixed/src/build/ngx_http_idempotency_module.so

# The files that talk to Redis against the servers users run besides
# Debian 12's Redis 7.0 (make test's): Valkey 8.1 (Debian 13's), Valkey 9.1
# (sid's) and Redis 8.0 (Debian 13's), each built from the Debian archive's
# source and kept in ~/.cache/nginx-idempotency (scripts/store-server.sh),
# each checked to be the version it claims and asked SET ... IFEQ, then the
# files run on it, its Cluster, Sentinel and TLS servers included
# (scripts/test-stores.sh; the builds missing run in the background while
# the servers before them are tested). STORE_TESTS, 24 of the suite's 70
# files, chosen for what differs between servers: the claim, wait, fence
# and store paths and the commands they count (the conditional writes
# where the server has them; not the lease's own files, t/024, t/044,
# t/046, t/047, t/054, whose path such a server never takes), AUTH and
# ACL users, error replies, a Redis paused, full, refusing as a replica, busy or loading,
# TLS, Cluster (plain, TLS), Sentinel, pieces, live join, compression and
# the operator's plane; in this order so that the two prove processes
# (PROVE_JOBS=2) take about as long. Their sum of file times was 245 s of
# the whole suite's 530; measured on 2 CPUs, with other work loading them
# 5 to 10: 137 to 159 s a server; builds of 128, 165 and 84 CPU-seconds
# (Valkey 8.1, 9.1, Redis 8.0: 1.2, 1.5 and 0.8 minutes on 2 idle CPUs,
# 5 to 8 under that load); so about 9 minutes the first time on an idle
# machine (the first build, then the three runs, the other builds beside
# them), 7 once built. STORES=valkey-9 for one server;
# STORE_TESTS="$(ls t/*.t)" on the command line for the whole suite
# (about 5 minutes a server; on a server with conditional writes the
# lease's own files fail: they expect the lease's commands).
STORES ?= valkey-8 valkey-9 redis-8
STORE_TESTS ?= t/028-store-retry.t t/045-redis-full.t t/038-tls-cluster.t t/023-sentinel.t \
               t/065-pieces.t t/071-conditional-writes.t t/011-wait.t t/022-cluster.t t/059-admin.t \
               t/007-redis-unavailable.t t/037-tls.t t/064-compression.t t/004-in-flight.t \
               t/012-claim-renewal.t t/043-safety.t t/055-live-join.t \
               t/015-redis-errors.t t/060-fence.t t/017-metrics.t t/001-replay.t \
               t/014-failure-outcomes.t t/010-redis-auth.t t/048-tls-untrusted-silence.t \
               t/057-event-stream-resume.t
.PHONY: test-stores
test-stores: deps $(MODULE)
	STORES="$(STORES)" STORE_TESTS="$(STORE_TESTS)" TEST_NGINX_BINARY=$(NGINX_BIN) scripts/test-stores.sh

# The mutation run (scripts/mutants.pl, its list t/mutants.list): each
# mutation of the newest code — a bound, a timer, a cleanup, a refusal —
# applied alone to a copy of the tree in $(BUILD)/mutants/ (never the
# working tree), the module (and the unit binary, or the ASan build) rebuilt
# there, and the tests that should catch it run; one line per mutation,
# then the kill rate, non-zero under MUTANTS_MIN_RATE (90 %). 12 minutes
# for 55 mutations on 2 cores: not in CI (t/README.md#mutation-testing).
# MUTANTS_ONLY=id,prefix* runs some; MUTANTS_ARGS=--baseline first runs
# each test selection against the unmutated copy; --check only checks the
# list against the tree.
MUTANTS_ONLY ?=
MUTANTS_ARGS ?=
.PHONY: mutants
mutants: deps
	NGINX_BIN=$(NGINX_BIN) MUTANTS_DIR=$(CURDIR)/$(BUILD)/mutants perl scripts/mutants.pl \
	  $(if $(MUTANTS_ONLY),--only '$(MUTANTS_ONLY)') $(MUTANTS_ARGS)

# The Test::Nginx suite against the newest nginx the Debian archive serves
# (sid's, else trixie's; its source package, else its orig tarball), built
# like Debian's nginx binary and kept in ~/.cache/nginx-idempotency, with the
# module built against it in build/newest/ (scripts/newest-nginx.sh).
.PHONY: test-newest-nginx
test-newest-nginx: deps
	CC_OPT="$(CC_OPT)" LD_OPT="$(LD_OPT)" scripts/newest-nginx.sh
