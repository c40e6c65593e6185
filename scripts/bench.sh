#!/usr/bin/env bash
# bench.sh — the benchmark of ngx_http_idempotency_module (what `make bench` runs).
#
#   scripts/bench.sh [--quick] [--growth] [--instructions] [--cells "CELL ..."]
#                    [--rss] [--no-rss] [--no-live] [--no-sizing] [--no-docs] [--rounds N] [--duration S]
#                    [--growth-rounds N] [--growth-duration S] [--connections N]
#                    [--threads N] [--rss-seconds S] [--rss-requests N] [--keep]
#
# This file is the driver: the options, the cells, and the order of things.
# The rest is in the files it sources: bench-lib.sh (processes, ports, the
# test suite's fixtures through scripts/fixture, docs blocks), bench-servers.sh
# (the nginx configurations, the gateways), bench-measure.sh (wrk, CPU,
# Redis counters, the rounds, the memory run), bench-growth.sh (the growth
# set), bench-report.sh (the report and the docs blocks; its tables are made
# by bench-report.pl).
#
# Everything runs on 127.0.0.1, on free ports, in a temp dir, and only the
# processes started here are stopped (by pid):
#   upstream  nginx without the module, worker_processes 1: `return 201` with
#             about 200 bytes of JSON, keep-alive; static files of 200 B,
#             16 KB and 256 KB for the response size cells;
#   redis     redis-server --save '' --appendonly no, and the TLS one and the
#             clusters below: the test suite's fixtures (t/lib, scripts/fixture);
#   gateway   nginx with the module, worker_processes 1, access_log off,
#             `upstream { keepalive 32; }` with proxy_http_version 1.1 and an
#             empty Connection header (upstream connections are reused);
#   wrk       keep-alive connections (-t1 -c32 --latency), requests built by
#             scripts/bench.lua: POST with a small JSON body.
# Cells, run alternately over several rounds (the order rotates each round):
#   plain   proxy_pass to the upstream, `idempotency off` (the ceiling)
#   new     the module on, a fresh Idempotency-Key on every request
#   replay  the module on, one key stored beforehand, every request replays it
#   nokey   the module on, requests without a key
#   zone-new, zone-replay
#           new and replay with the shared memory zone store instead of Redis
#           (idempotency_zone zone=bench:1024m; the new cell's records have
#           idempotency_ttl 10s, so that its fresh keys expire and are
#           reclaimed in steady state instead of filling the zone)
#   new-tls, replay-tls
#           new and replay with a second redis-server reached over TLS
#           (idempotency_redis ... ssl, its certificate checked against a CA
#           made here with openssl): the cost of TLS to Redis
#   cluster-1, cluster-2, cluster-3
#           new keys through Redis Clusters of 1, 2 and 3 masters
#           (idempotency_redis_cluster; no replicas, slots split evenly);
#           their redis-servers' CPU is summed in the redis-server column
#   new-s2, replay-s2 (s3, ... for more)
#           new and replay on each redis-server of MORE_REDIS_SERVERS (paths,
#           space-separated, as the tests take TEST_REDIS_SERVER: another
#           Redis or a Valkey), started through the fixtures, each behind a
#           location of its own: the redis block gets its commands per
#           request, one row per server beside REDIS_SERVER's
#   plain-pinned, new-pinned, replay-pinned
#           plain, new and replay with redis-server on a CPU of its own
#           (taskset -c 1) and wrk, the gateway and the upstream on the other
#           (taskset -c 0): a deployment with Redis elsewhere (skipped with a
#           note on a machine of one CPU)
# --growth adds a second set of rounds (scripts/bench-growth.sh): response
# sizes, request body sizes, 512 connections, 2 gateway workers, and 200
# duplicates waiting for one slow original (Redis commands per waiter).
# Then the memory a stored response costs Redis and the zone, per body
# (scripts/bench-sizing.pl, with its own processes; not with --no-sizing;
# `sizing` in --cells), to build/bench/sizing.md and the sizing block; then
# large responses kept in pieces (scripts/bench-pieces.pl) to the pieces block.
# Then the live-join cell (scripts/bench-live.sh, with its own processes;
# not with --no-live): how late a duplicate joined to a streaming response
# gets each event, in the original's worker, in another worker and on
# another gateway through Redis, the CPU per joiner per KB against a
# replay's with 1, 100 and 1000 joiners, Redis commands per joiner, and the
# workers' memory while long streams run with joiners (about 1 minute,
# --quick; 3 otherwise). Its tables go to build/bench/live.md and the
# live-join block of docs/performance.md. After it (also not with
# --no-live) scripts/bench-wake.sh: how late a duplicate waiting for its
# original is answered after the original's end, in the original's worker
# and in the other one (build/bench/wake.md, the wake-up block); then
# scripts/bench-stall.sh, and scripts/bench-pieces-retention.sh: what Redis
# holds per response kept in pieces as the traffic stops (2.5 minutes).
# --cells "plain new ..." runs only the cells named (of either set, and
# `live` for the live-join cell).
# Reported per cell, as the median over the rounds with the min–max beside
# it: CPU time per request of the gateway worker, the upstream worker,
# redis-server and the whole machine (the primary table; with the share the
# hypervisor stole, which makes figures noisy); requests/s and p50 and p99
# latency; ratios only to a cell of the same run (plain, or plain-pinned for
# the pinned cells). Then Redis commands per request (INFO commandstats /
# INFO stats over round 1, and a MONITOR sample for the commands the gateway
# itself sends), and the worker's VmRSS over about 1,000,000 mixed requests
# (bounded by count and time). The tables go to stdout and to
# build/bench/results.md. Each measured table also goes into
# docs/performance.md between its markers (bench-report.sh lists them; not
# with --no-docs, nor when requests failed). --instructions then runs
# scripts/instructions.sh (its tables too). The targets are printed for
# information:
# the exit status is non-zero only when the benchmark could not run (a
# process did not start, requests failed).
#
# Default: 5 rounds of 5 s per cell plus a memory run of at most 60 s
# (about 7 minutes); --growth: 3 rounds of 2 s of its 27 cells (about 3.5
# minutes more).
# --quick: 3 rounds of 2 s (growth: 2 of 1 s) and a 20 s memory run.
# --rss: only the memory run (up to 200 s, or --rss-seconds), to build/bench/rss.md.
#
# Environment: NGINX_BIN, REDIS_SERVER, REDIS_CLI, WRK (default: from PATH);
# MORE_REDIS_SERVERS (none by default): more redis-server binaries whose
# commands per request the redis block counts.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
MODULE="$repo/build/ngx_http_idempotency_module.so"
LUA="$repo/scripts/bench.lua"
OUT_DIR="$repo/build/bench"
NGINX_BIN=${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}
REDIS_SERVER=${REDIS_SERVER:-$(command -v redis-server || echo /usr/bin/redis-server)}
REDIS_CLI=${REDIS_CLI:-$(command -v redis-cli || echo /usr/bin/redis-cli)}
WRK=${WRK:-$(command -v wrk || echo /usr/bin/wrk)}

ORIG_ARGS=("$@")
rounds=5 duration=5 warmup=2 conns=32 threads=1 growth=0 growth_rounds=3 growth_duration=2 only_cells=""
do_cells=1 do_rss=1 rss_seconds=60 rss_requests=1000000 keep=0 quick=0 rss_only=0 docs=1 instructions=0 live=1 sizing=1
usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) quick=1; rounds=3; duration=2; warmup=1; rss_seconds=20; growth_rounds=2; growth_duration=1 ;;
    --growth) growth=1 ;;
    --instructions) instructions=1 ;;
    --no-docs) docs=0 ;;
    --cells) only_cells=${2:?}; shift ;;
    --growth-rounds) growth_rounds=${2:?}; shift ;;
    --growth-duration) growth_duration=${2:?}; shift ;;
    --rss) rss_only=1; do_cells=0; do_rss=1; rss_seconds=200; live=0; sizing=0 ;;
    --no-rss) do_rss=0 ;;
    --no-live) live=0 ;;
    --no-sizing) sizing=0 ;;
    --rounds) rounds=${2:?}; shift ;;
    --duration) duration=${2:?}; shift ;;
    --connections) conns=${2:?}; shift ;;
    --threads) threads=${2:?}; shift ;;
    --rss-seconds) rss_seconds=${2:?}; shift ;;
    --rss-requests) rss_requests=${2:?}; shift ;;
    --keep) keep=1 ;;
    -h|--help) usage ;;
    *) echo "bench.sh: unknown option $1" >&2; usage ;;
    esac
    shift
done
for n in "$rounds" "$duration" "$growth_rounds" "$growth_duration" "$conns" "$threads" "$rss_seconds" "$rss_requests"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: not a positive whole number: $n" >&2; exit 2; }
done

source "$repo/scripts/bench-lib.sh"

# The sizing cell (scripts/bench-sizing.pl): its table to build/bench/sizing.md and the sizing block.
run_sizing() {
    echo
    echo "memory per stored response (scripts/bench-sizing.pl):"
    mkdir -p "$OUT_DIR"
    local sizing_args=(--out "$OUT_DIR/sizing.md")
    [ "$quick" = 1 ] && sizing_args+=(--quick)
    [ "$keep" = 1 ] && sizing_args+=(--keep)
    NGINX_BIN=$NGINX_BIN STRESS_MODULE=$MODULE TEST_REDIS_SERVER=$REDIS_SERVER \
        perl "$repo/scripts/bench-sizing.pl" "${sizing_args[@]}" || return 1
    [ "$docs" = 0 ] || doc_block sizing "$OUT_DIR/sizing.md" "\`scripts/bench-sizing.pl${sizing_args[2]:+ ${sizing_args[*]:2}}\`"
    echo
    echo "large responses kept in pieces (scripts/bench-pieces.pl):"
    NGINX_BIN=$NGINX_BIN STRESS_MODULE=$MODULE TEST_REDIS_SERVER=$REDIS_SERVER \
        perl "$repo/scripts/bench-pieces.pl" --out "$OUT_DIR/pieces.md" || return 1
    [ "$docs" = 0 ] || doc_block pieces "$OUT_DIR/pieces.md" "\`scripts/bench-pieces.pl\`"
}

ARGS_GIVEN=""
[ ${#ORIG_ARGS[@]} -eq 0 ] || ARGS_GIVEN=$(printf ' %q' "${ORIG_ARGS[@]}")
[ -f "$MODULE" ] || die "$MODULE is missing: build it first (make module)"
read -r -a MORE_SERVERS <<<"${MORE_REDIS_SERVERS:-}"
for b in "$NGINX_BIN" "$REDIS_SERVER" "$REDIS_CLI" "$WRK" "${MORE_SERVERS[@]}"; do
    [ -x "$b" ] || die "$b is not installed (make deps, or apt-get install nginx redis-server wrk)"
done
command -v curl >/dev/null || die "curl is needed"
export TEST_REDIS_SERVER=$REDIS_SERVER    # the fixtures' redis-server

bench_init bench
RUN_ID="b$(date +%s)$RANDOM"
BODY='{"amount":1000,"currency":"eur","customer":"cus_bench","description":"benchmark payment"}'
REPLAY_KEY="bench-replay-$RUN_ID"
POOL=64
export BENCH_BODY="$BODY"

# ------------------------------------------------------------------ cells

# cell NAME MODE PATH [body=BYTES] [conns=N] [gw=GATEWAY] [pin=1] [ref=CELL]:
# MODE is bench.lua's (plain, new, replay, nokey, mix), PATH the location it
# posts to; body= a generated body of BYTES instead of BODY; gw= the nginx
# that serves it (gateway, gateway2 with 2 workers, rss-gateway); pin=1 runs
# it with redis-server on CPU 1 and everything else on CPU 0; ref= the cell
# its ratios are taken against (default plain), in the same set of rounds.
declare -A CELL_MODE=() CELL_PATH=() CELL_BODY=() CELL_CONNS=() CELL_GW=() CELL_PIN=() CELL_REF=()
cell() {
    local name=$1 kv
    CELL_MODE[$name]=$2 CELL_PATH[$name]=$3 CELL_BODY[$name]="" CELL_CONNS[$name]=$conns
    CELL_GW[$name]=gateway CELL_PIN[$name]=0 CELL_REF[$name]=plain
    shift 3
    for kv; do
        case "$kv" in
        body=*) CELL_BODY[$name]=${kv#*=} ;;
        conns=*) CELL_CONNS[$name]=${kv#*=} ;;
        gw=*) CELL_GW[$name]=${kv#*=} ;;
        pin=*) CELL_PIN[$name]=${kv#*=} ;;
        ref=*) CELL_REF[$name]=${kv#*=} ;;
        *) die "cell $name: unknown attribute $kv" ;;
        esac
    done
}
replay_key_of() { [ "$1" = mix ] && echo "$REPLAY_KEY" || echo "$REPLAY_KEY-$1"; }

cell plain plain /plain/pay
cell new new /idem/pay
cell replay replay /idem/pay
cell nokey nokey /idem/pay
cell zone-new new /zone/pay
cell zone-replay replay /zone-replay/pay
cell new-tls new /idem-tls/pay
cell replay-tls replay /idem-tls/pay
for n in 1 2 3; do cell "cluster-$n" new "/cluster$n/pay"; done
cell plain-pinned plain /plain/pay pin=1 ref=plain-pinned
cell new-pinned new /idem/pay pin=1 ref=plain-pinned
cell replay-pinned replay /idem/pay pin=1 ref=plain-pinned
cell mix mix /idem/pay gw=rss-gateway
CELLS=(plain new replay nokey zone-new zone-replay new-tls replay-tls cluster-1 cluster-2 cluster-3
       plain-pinned new-pinned replay-pinned)
for i in "${!MORE_SERVERS[@]}"; do   # the server N (from 2) of MORE_REDIS_SERVERS
    cell "new-s$((i + 2))" new "/idem-s$((i + 2))/pay"
    cell "replay-s$((i + 2))" replay "/idem-s$((i + 2))/pay"
    CELLS+=("new-s$((i + 2))" "replay-s$((i + 2))")
done
PIN_NOTE=""
if [ "$(nproc)" -lt 2 ]; then
    CELLS=("${CELLS[@]/*-pinned/}")
    PIN_NOTE="one CPU only: the pinned cells (redis-server on a CPU of its own) are skipped"
fi
source "$repo/scripts/bench-growth.sh"   # GROWTH_CELLS, and what the growth set needs

selected() {  # selected CELL...: those of them --cells names (all without --cells)
    local c
    for c; do
        [ -n "$c" ] || continue
        if [ -z "$only_cells" ] || [[ " $only_cells " == *" $c "* ]]; then echo "$c"; fi
    done
}
if [ -n "$only_cells" ]; then   # the live-join and sizing cells run when --cells names them
    [[ " $only_cells " == *" live "* ]] || live=0
    [[ " $only_cells " == *" sizing "* ]] || sizing=0
    only_cells=$(echo " $only_cells " | sed 's/ live / /g; s/ sizing / /g; s/^ *//; s/ *$//')
    if [ -z "$only_cells" ]; then   # only them: nothing else to start
        if [ "$sizing" = 1 ]; then run_sizing || die "scripts/bench-sizing.pl failed"; fi
        [ "$live" = 1 ] || exit 0
        live_args=()
        [ "$quick" = 1 ] && live_args+=(--quick)
        [ "$docs" = 1 ] || live_args+=(--no-docs)
        [ "$keep" = 1 ] && live_args+=(--keep)
        NGINX_BIN=$NGINX_BIN STRESS_MODULE=$MODULE TEST_REDIS_SERVER=$REDIS_SERVER exec "$repo/scripts/bench-live.sh" "${live_args[@]}"
    fi
fi
for c in $only_cells; do [ -n "${CELL_MODE[$c]:-}" ] || die "--cells: no cell named $c"; done
mapfile -t CELLS < <(selected "${CELLS[@]}")
for c in $only_cells; do [[ " ${GROWTH_CELLS[*]} " == *" $c "* && " ${CELLS[*]} " != *" $c "* ]] && growth=1; done
if [ "$growth" = 1 ] && [ "$do_cells" = 1 ]; then mapfile -t GROWTH_CELLS < <(selected "${GROWTH_CELLS[@]}"); else GROWTH_CELLS=(); fi
[ ${#CELLS[@]} -gt 0 ] || [ ${#GROWTH_CELLS[@]} -gt 0 ] || do_cells=0

source "$repo/scripts/bench-servers.sh"
source "$repo/scripts/bench-measure.sh"
source "$repo/scripts/bench-report.sh"

# ------------------------------------------------------------------ start

mkdir -p "$OUT_DIR"
NGINX_VERSION=$("$NGINX_BIN" -v 2>&1 | sed 's/^nginx version: //')
REDIS_VERSION=$("$REDIS_SERVER" --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')
WRK_VERSION=$( { "$WRK" -v 2>&1 || true; } | head -1 | awk '{ print $2 }')
CPU_MODEL=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
GIT_REV=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$repo" diff --quiet HEAD -- module config 2>/dev/null || GIT_REV+=" (module sources modified)"

echo "nginx-idempotency benchmark: $NGINX_VERSION ($NGINX_BIN), redis $REDIS_VERSION, wrk $WRK_VERSION, $(nproc) CPUs"
echo "module $MODULE (commit $GIT_REV); temp dir $tmp"
if [ "$do_cells" = 1 ]; then
    [ ${#CELLS[@]} -eq 0 ] || echo "cells: ${CELLS[*]}; $rounds rounds of ${duration}s each, $warmup s warm-up; wrk -t$threads -c$conns"
    [ ${#GROWTH_CELLS[@]} -eq 0 ] || echo "growth cells: ${GROWTH_CELLS[*]}; $growth_rounds rounds of ${growth_duration}s each"
    [ -z "$PIN_NOTE" ] || echo "$PIN_NOTE"
fi

# Redis (plain, TLS, the clusters when a cluster cell runs) and the test
# upstream, scripts/upstream.pl (the slow upstream of the growth set)
want=(redis tls)
[[ " ${CELLS[*]} " == *" cluster-"* ]] && want+=(cluster 1 cluster 2 cluster 3)
start_fixtures --max-seconds $((3600 + 60 * (rounds * duration + growth_rounds * growth_duration) + rss_seconds)) "${want[@]}"
SLOW_PORT=$UPSTREAM_PORT
# the nginx ports, taken once the fixtures listen on theirs
free_ports 4
read -r UP_PORT GW_PORT GW2_PORT RSS_PORT <<<"$FREE_PORTS"
declare -A GW_PORT_OF=([gateway]=$GW_PORT [gateway2]=$GW2_PORT [rss-gateway]=$RSS_PORT) GW_WORKERS_OF=()
cp "$TLS_CA" "$tmp/ca.pem" && chmod 0644 "$tmp/ca.pem"   # readable by the gateway's workers
note "fixtures (pid $FIXTURE_PID): redis-server pid $REDIS_PID on 127.0.0.1:$REDIS_PORT; redis-server (TLS) pid $TLS_PID on 127.0.0.1:$TLS_PORT (TLS), $TLS_PLAIN_PORT; upstream.pl on 127.0.0.1:$UPSTREAM_PORT"
# what each server is, and whether it runs conditional writes (the redis
# block's rows and targets), by port
declare -A SERVER_LABEL=([$REDIS_PORT]="$(server_label "$REDIS_PORT")") SERVER_COND=([$REDIS_PORT]=$(server_conditional "$REDIS_PORT"))
# the servers of MORE_REDIS_SERVERS whose cells run, each through the
# fixtures as the tests start it (TEST_REDIS_SERVER)
declare -A STORE_PORT=() STORE_PID=()
STORE_CELLS=()
for i in "${!MORE_SERVERS[@]}"; do
    n=$((i + 2))
    [[ " ${CELLS[*]} " == *" new-s$n "* || " ${CELLS[*]} " == *" replay-s$n "* ]] || continue
    TEST_REDIS_SERVER=${MORE_SERVERS[$i]}
    start_fixtures --as "S$n" --max-seconds $((3600 + 60 * rounds * duration)) redis
    TEST_REDIS_SERVER=$REDIS_SERVER
    v=S${n}_REDIS_PORT; STORE_PORT[$n]=${!v}
    v=S${n}_REDIS_PID; STORE_PID[$n]=${!v}
    mapfile -t -O "${#STORE_CELLS[@]}" STORE_CELLS < <(selected "new-s$n" "replay-s$n")
    SERVER_LABEL[${STORE_PORT[$n]}]=$(server_label "${STORE_PORT[$n]}")
    SERVER_COND[${STORE_PORT[$n]}]=$(server_conditional "${STORE_PORT[$n]}")
    note "server $n, ${MORE_SERVERS[$i]} (${SERVER_LABEL[${STORE_PORT[$n]}]}): pid ${STORE_PID[$n]} on 127.0.0.1:${STORE_PORT[$n]}"
done
declare -A CLUSTER_PORTS=() CLUSTER_PIDS=()
if [[ " ${CELLS[*]} " == *" cluster-"* ]]; then
    for n in 1 2 3; do
        v=CLUSTER_${n}_PORTS; CLUSTER_PORTS[$n]=${!v}
        v=CLUSTER_${n}_PIDS; CLUSTER_PIDS[$n]=${!v}
        note "Redis Cluster of $n master(s): ports ${CLUSTER_PORTS[$n]}, pids ${CLUSTER_PIDS[$n]}"
    done
fi
mkdir -p "$tmp/upstream"
write_upstream_conf "$tmp/upstream"
write_static_files "$tmp/upstream"
start_nginx upstream "$tmp/upstream"
UP_PID=$started_pid
wait_for "the upstream nginx" "$UP_PID" curl -sf -o /dev/null -X POST "http://127.0.0.1:$UP_PORT/" -w '%{http_code}' --max-time 2
UP_WORKER=$(workers_of "$UP_PID" | head -1)
note "upstream nginx master $UP_PID on 127.0.0.1:$UP_PORT, worker $UP_WORKER"

if [ "$do_cells" = 1 ]; then
    start_gateway gateway 1
    if [ ${#CELLS[@]} -gt 0 ]; then
        warm_up "$warmup" "${CELLS[@]}"
        # the commands the gateway sends, per cell (MONITOR sample, outside the rounds)
        declare -A SENT=() SENT_BREAKDOWN=() ROUND_TRIPS=()
        for cell in $(selected new replay nokey) "${STORE_CELLS[@]}"; do
            monitor_sample "$cell"
            IFS='|' read -r n per breakdown trips <<<"$MON"
            SENT[$cell]=$per
            SENT_BREAKDOWN[$cell]="$breakdown"
            ROUND_TRIPS[$cell]=$trips
            note "MONITOR sample $cell: $n requests, commands sent by the gateway per request $per ($breakdown), round trips $trips"
        done
        run_rounds default "$rounds" "$duration" "${CELLS[@]}"
    fi
    [ ${#GROWTH_CELLS[@]} -eq 0 ] || run_growth
    stop_gateway gateway
fi

if [ "$do_rss" = 1 ]; then rss_run; fi

# ------------------------------------------------------------------ report

report="$tmp/report.md"
write_report "$report"
# stdout: the report without the configuration details
echo
sed '/^<details>/,$d' "$report"
result_file="$OUT_DIR/results.md"
[ "$do_cells" = 1 ] || result_file="$OUT_DIR/rss.md"     # --rss leaves the last full table alone
cp "$report" "$result_file"
rm -f "$OUT_DIR"/wrk-*.log
cp "$tmp"/wrk-*.log "$OUT_DIR/" 2>/dev/null || true
echo
echo "written to $result_file (wrk logs in $OUT_DIR/); total $(elapsed | tr -d ' ')"
if [ "$docs" = 1 ] && [ "$ERRORS" -eq 0 ]; then
    write_doc_blocks
elif [ "$docs" = 1 ]; then
    echo "requests failed: docs/performance.md left alone" >&2
fi
if [ "$live" = 1 ]; then
    echo
    echo "live joining (scripts/bench-live.sh):"
    live_args=()
    [ "$quick" = 1 ] && live_args+=(--quick)
    [ "$docs" = 1 ] || live_args+=(--no-docs)
    [ "$keep" = 1 ] && live_args+=(--keep)
    NGINX_BIN=$NGINX_BIN STRESS_MODULE=$MODULE TEST_REDIS_SERVER=$REDIS_SERVER "$repo/scripts/bench-live.sh" "${live_args[@]}" \
        || { echo "$SCRIPT_NAME: scripts/bench-live.sh failed" >&2; ERRORS=$((ERRORS + 1)); }
    echo
    echo "waiters woken (scripts/bench-wake.sh):"
    wake_args=()
    [ "$quick" = 1 ] && wake_args+=(--quick)
    [ "$docs" = 1 ] || wake_args+=(--no-docs)
    [ "$keep" = 1 ] && wake_args+=(--keep)
    NGINX_BIN=$NGINX_BIN STRESS_MODULE=$MODULE TEST_REDIS_SERVER=$REDIS_SERVER "$repo/scripts/bench-wake.sh" "${wake_args[@]}" \
        || { echo "$SCRIPT_NAME: scripts/bench-wake.sh failed" >&2; ERRORS=$((ERRORS + 1)); }
    echo
    echo "a Redis stall under a thousand duplicates (scripts/bench-stall.sh):"
    stall_args=()
    [ "$quick" = 1 ] && stall_args+=(--quick)
    [ "$docs" = 1 ] || stall_args+=(--no-docs)
    [ "$keep" = 1 ] && stall_args+=(--keep)
    NGINX_BIN=$NGINX_BIN STRESS_MODULE=$MODULE TEST_REDIS_SERVER=$REDIS_SERVER "$repo/scripts/bench-stall.sh" "${stall_args[@]}" \
        || { echo "$SCRIPT_NAME: scripts/bench-stall.sh failed" >&2; ERRORS=$((ERRORS + 1)); }
    echo
    echo "pieces once the traffic stops (scripts/bench-pieces-retention.sh):"
    retention_args=()
    [ "$quick" = 1 ] && retention_args+=(--quick)
    [ "$docs" = 1 ] || retention_args+=(--no-docs)
    NGINX_BIN=$NGINX_BIN STRESS_MODULE=$MODULE TEST_REDIS_SERVER=$REDIS_SERVER "$repo/scripts/bench-pieces-retention.sh" "${retention_args[@]}" \
        || { echo "$SCRIPT_NAME: scripts/bench-pieces-retention.sh failed" >&2; ERRORS=$((ERRORS + 1)); }
fi
if [ "$sizing" = 1 ] && ! run_sizing; then
    echo "$SCRIPT_NAME: scripts/bench-sizing.pl failed" >&2
    ERRORS=$((ERRORS + 1))
fi
if [ "$instructions" = 1 ] && ! command -v valgrind >/dev/null; then
    echo "valgrind is not installed: no instructions per request (apt-get install valgrind)" >&2
elif [ "$instructions" = 1 ]; then
    echo
    echo "instructions per request (scripts/instructions.sh):"
    ins_args=()
    [ "$quick" = 1 ] && ins_args+=(--quick)
    [ "$docs" = 1 ] || ins_args+=(--no-docs)
    NGINX_BIN=$NGINX_BIN "$repo/scripts/instructions.sh" "${ins_args[@]}" | tee "$OUT_DIR/instructions.md" \
        || die "scripts/instructions.sh failed"
fi
[ "$ERRORS" -eq 0 ] || exit 1
