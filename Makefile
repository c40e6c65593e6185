# nginx-idempotency — build, test and demo.
#   make          build build/ngx_http_idempotency_module.so against Debian's nginx-dev
#   make test     unit tests, then the Test::Nginx suite (installs what is missing)
#   make run      the demo gateway on 127.0.0.1:8080 (installs what is missing)
#   make deb      the Debian package libnginx-mod-http-idempotency in build/deb/

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
CORE_SRCS := module/key.cpp module/fingerprint.cpp module/record.cpp module/outcome.cpp module/seal.cpp module/redis/resp.cpp
UNIT_SRCS := $(wildcard t/unit/*.cpp)
UNIT_BIN  := $(BUILD)/unit_tests

MODULE_SRCS := $(shell find module -name '*.cpp' -o -name '*.hpp') config

.PHONY: all module deps unit test prove test-valgrind run stop clean stress instructions bench deb

all: module

module: $(MODULE)

# nginx's own configure, run on a private copy of the nginx-dev tree with the
# packaged binary's flags (--with-compat) so the module loads into it.
$(BUILD)/nginx/objs/Makefile: config
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

$(UNIT_BIN): $(CORE_SRCS) $(UNIT_SRCS) $(wildcard module/*.hpp)
	mkdir -p $(BUILD)
	$(CXX) $(CXXFLAGS) -Imodule $(UNIT_SRCS) $(CORE_SRCS) -o $@ -lgtest -lgtest_main -lpthread -lhiredis -lcrypto

deps:
	@scripts/install-deps.sh

unit: $(UNIT_BIN)
	$(UNIT_BIN)

# The Test::Nginx suite; the stand-in in t/standin is used only when the
# real Test::Nginx is not installed.
prove: $(MODULE)
	@if perl -MTest::Nginx::Socket -e1 2>/dev/null; then inc=; else inc="-I t/standin"; fi; \
	  TEST_NGINX_BINARY=$(NGINX_BIN) prove $$inc -r t

test: deps
	$(MAKE) unit
	$(MAKE) prove

# Instructions per request (callgrind), per cell and for the module's own work.
instructions: deps $(MODULE)
	@command -v valgrind >/dev/null || { echo "valgrind is needed: apt-get install valgrind" >&2; exit 1; }
	NGINX_BIN=$(NGINX_BIN) scripts/instructions.sh

# The suite with every nginx under valgrind memcheck; fails on any report.
test-valgrind: deps $(MODULE)
	@command -v valgrind >/dev/null || { echo "valgrind is needed: apt-get install valgrind" >&2; exit 1; }
	scripts/valgrind-suite.sh

run: deps $(MODULE)
	scripts/demo.sh start

stop:
	scripts/demo.sh stop

# Stress and failure-injection scenarios (scripts/stress.pl): its own Redis,
# upstream and nginx instances on free loopback ports; non-zero on a violation.
stress: deps $(MODULE)
	NGINX_BIN=$(NGINX_BIN) perl scripts/stress.pl

# The benchmark (scripts/bench.sh): plain proxy vs. the module (new key,
# replay, no key) with wrk on loopback, Redis commands per request, worker
# RSS; about 4 minutes; results in build/bench/results.md.
# `make bench BENCH_ARGS=--quick` for about 1 minute.
bench: deps $(MODULE)
	NGINX_BIN=$(NGINX_BIN) scripts/bench.sh $(BENCH_ARGS)

# The Debian package for the packaged nginx (debian/, dh-sequence-nginx),
# built by scripts/build-deb.sh in a copy of the tree (build/deb/src); installs
# its build dependencies when missing. Rebuilt only when a source changed.
DEB_PKG     := libnginx-mod-http-idempotency
DEB_VERSION := $(shell sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' debian/changelog)
DEB_ARCH    := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB         := $(BUILD)/deb/$(DEB_PKG)_$(DEB_VERSION)_$(DEB_ARCH).deb

deb: $(DEB)

$(DEB): $(MODULE_SRCS) $(shell find debian -type f) README.md scripts/build-deb.sh
	scripts/build-deb.sh $(BUILD)/deb

clean:
	rm -rf $(BUILD) t/servroot
