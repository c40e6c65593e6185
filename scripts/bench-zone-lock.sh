#!/usr/bin/env bash
# bench-zone-lock.sh — is the zone store's mutex contended? Counts, not
# requests/s (which on a shared machine mostly measure the neighbours).
#
#   scripts/bench-zone-lock.sh [--rounds N] [--duration S] [--connections N]
#                              [--prefill S] [--dir DIR] [--callgrind] [--no-docs]
#
# Builds the diagnostic variant of the module (zone/zone_lock.hpp,
# -DIDEM_ZONE_LOCK_STATS) into build/zone-lock/, starts an upstream (nginx,
# `return 201` with 211 bytes of JSON) and, per cell, a gateway with the
# zone store (idempotency_zone zone=bench:1024m, the locations of
# bench.sh's zone cells) and 1 or 2 workers, driven by wrk (-t1,
# scripts/bench.lua) with a fresh key per request (new) or one stored key
# (replay; before it, --prefill seconds of fresh keys, default 3, so that
# the lookup runs in a tree of the size zone-new leaves, as in bench.sh,
# where both cells share the zone). The cells alternate for --rounds rounds. A gateway is stopped
# after its cell (SIGQUIT), its workers print their counts to its error log;
# per cell and section (claim: a key claimed; found: a claim that found a
# record, i.e. a replay; store: the response stored), summed over the workers:
#   taken/req      mutex acquisitions per request (claim, and store for new)
#   found taken    acquisitions that found the mutex held by the other worker
#   spins          ngx_cpu_pause()s spent spinning for it, per acquisition
#   wait ns        time from the failed trylock to the lock, per failure
#   slept          times the spin gave up for ngx_shmtx_lock (semaphore)
#   held ns        mean and max time between lock and unlock
#   faults/req     the workers' minor page faults (/proc/PID/stat) per request
#   busiest worker its share of the section's acquisitions (wrk's connections
#                  are not always spread over both workers)
# With 2 workers, worker_cpu_affinity auto puts them on different CPUs: two
# workers time-sliced on one CPU would rarely meet at the mutex.
# --callgrind adds two runs of a single-process gateway under valgrind:
# the instructions executed while holding the mutex (diagnostic build,
# --collect-atstart=no; the build toggles collection at lock and unlock),
# and the instructions per request of the event loop with the production
# build (--toggle-collect=ngx_process_events_and_timers). Everything listens
# on 127.0.0.1, on free ports (scripts/fixture, through bench-lib.sh); only
# the processes started here are stopped, by pid; wrk runs under `timeout`.
# The table also goes into docs/performance.md, block "zone-lock" (not with
# --no-docs).
# ZONE_LOCK_MODULE=PATH.so uses that diagnostic build instead of building
# one (to compare two versions).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
NGINX_BIN=${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}
WRK=${WRK:-$(command -v wrk || echo /usr/bin/wrk)}
CC_OPT_BASE="-g -O2 -fstack-protector-strong -Wformat -Werror=format-security -fPIC -Wdate-time -D_FORTIFY_SOURCE=2"
rounds=2 duration=5 conns=32 dir="" callgrind=0 prefill=3 docs=1 keep=1
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=$2; shift ;;
    --duration) duration=$2; shift ;;
    --connections) conns=$2; shift ;;
    --prefill) prefill=$2; shift ;;
    --dir) dir=$2; shift ;;
    --callgrind) callgrind=1 ;;
    --no-docs) docs=0 ;;
    *) echo "usage: $0 [--rounds N] [--duration S] [--connections N] [--prefill S] [--dir DIR] [--callgrind] [--no-docs]" >&2; exit 2 ;;
    esac
    shift
done
for n in "$rounds" "$duration" "$conns"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "bench-zone-lock.sh: not a positive whole number: $n" >&2; exit 2; }
done
source "$repo/scripts/bench-lib.sh"
bench_init zone-lock      # $tmp: kept at the end (keep=1), the logs and profiles are the output
[ -n "$dir" ] || dir=$tmp
mkdir -p "$dir"
free_ports 2
read -r UP_PORT GW_PORT <<<"$FREE_PORTS"
STATS_MODULE=${ZONE_LOCK_MODULE:-$repo/build/zone-lock/ngx_http_idempotency_module.so}
PROD_MODULE=$repo/build/ngx_http_idempotency_module.so
BODY='{"amount":1000,"currency":"eur","customer":"cus_bench","description":"benchmark payment"}'

make -s -C "$repo" module >/dev/null
[ -n "${ZONE_LOCK_MODULE:-}" ] ||
    make -s -C "$repo" module BUILD=build/zone-lock CC_OPT="$CC_OPT_BASE -DIDEM_ZONE_LOCK_STATS" >/dev/null

common() {  # common DIR
    cat <<EOF
error_log $1/error.log notice;
pid $1/nginx.pid;
events { worker_connections 4096; }
EOF
}
http_common() {
    cat <<EOF
    access_log off;
    client_body_temp_path $1/tmp/body;
    proxy_temp_path $1/tmp/proxy;
    keepalive_requests 100000000;
    keepalive_timeout 300s;
EOF
}

mkdir -p "$dir/upstream/tmp"
cat >"$dir/upstream/nginx.conf" <<EOF
worker_processes 1;
$(common "$dir/upstream")
http {
$(http_common "$dir/upstream")
    default_type application/json;
    server {
        listen 127.0.0.1:$UP_PORT backlog=4096;
        location / {
            return 201 '{"id":"pay_\$request_id","object":"payment","amount":1000,"currency":"eur","status":"succeeded","customer":"cus_bench","description":"benchmark payment","created":1700000000,"livemode":false}';
        }
    }
}
EOF
start_nginx upstream "$dir/upstream"
UP_PID=$started_pid
wait_for "the upstream nginx" "$UP_PID" curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$UP_PORT/"

gateway_conf() {  # gateway_conf DIR MODULE WORKERS [single]
    cat <<EOF
load_module $2;
worker_processes $3;
$([ "${4:-}" = single ] && echo 'master_process off;')
$([ "$3" -gt 1 ] && echo 'worker_cpu_affinity auto;')
$(common "$1")
http {
$(http_common "$1")
    idempotency_zone zone=bench:1024m;
    upstream backend { server 127.0.0.1:$UP_PORT; keepalive 32; keepalive_requests 100000000; }
    server {
        listen 127.0.0.1:$GW_PORT backlog=4096;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        location /zone/  { idempotency on;  idempotency_store zone=bench; idempotency_ttl 10s; proxy_pass http://backend; }
        location /zone-replay/ { idempotency on; idempotency_store zone=bench; proxy_pass http://backend; }
    }
}
EOF
}

drive() {  # drive MODE CONNS DURATION: runs wrk, prints its request count
    local mode=$1 path=/zone/pay key=""
    if [ "$mode" = replay ]; then
        path=/zone-replay/pay key="zone-lock-replay-$RANDOM"
        curl -sf --max-time 10 -o /dev/null -X POST -H 'Content-Type: application/json' -H "Idempotency-Key: $key" \
            --data "$BODY" "http://127.0.0.1:$GW_PORT$path"
    fi
    BENCH_MODE=$mode BENCH_PATH=$path BENCH_RUN="zl-$RANDOM-$RANDOM" BENCH_BODY=$BODY BENCH_REPLAY_KEY=$key \
        timeout --signal=INT --kill-after=5 $(($3 + 30)) "$WRK" -t1 -c"$2" -d"$3"s --timeout 5s \
        -s "$repo/scripts/bench.lua" "http://127.0.0.1:$GW_PORT" \
        | sed -n 's/^BENCH .*requests=\([0-9]*\).*status_errors=\([0-9]*\).*/\1 \2/p'
}

start_gateway() {  # start_gateway DIR [valgrind args...]: sets GW_PID
    local d=$1; shift
    start_nginx "gateway" "$d" "$@"
    GW_PID=$started_pid
    WAIT_SECONDS=60 wait_for "the gateway" "$GW_PID" curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$GW_PORT/"
}

stop_gateway() {  # QUIT: the workers print their counts on the way out (callgrind writes its profile)
    stop_pid "$GW_PID" QUIT 120
}

faults() {  # faults PID: the minor page faults of the gateway's workers so far
    local p n=0
    for p in $(ps -o pid= --ppid "$1"); do
        n=$((n + $(awk '{ print $10 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
    done
    echo "$n"
}

summarise() {  # summarise PREFIX ERROR_LOG REQUESTS FAULTS: table rows, per section, from the workers' zone-lock lines
    perl -e '
        my ($prefix, $log, $req, $faults) = @ARGV;
        my (%s, %per);
        open my $f, "<", $log or die "$log: $!\n";
        while (<$f>) {
            next unless /zone-lock pid=\d+ section=(\w+) (.*)/;
            my ($sec, $counts) = ($1, $2);
            my %kv = $counts =~ /(\w+)=(\d+)/g;
            push @{ $per{$sec} }, $kv{taken};
            for (keys %kv) {
                $s{$sec}{$_} = /max/ ? ($kv{$_} > ($s{$sec}{$_} // 0) ? $kv{$_} : $s{$sec}{$_}) : ($s{$sec}{$_} // 0) + $kv{$_};
            }
        }
        for my $sec (grep { exists $s{$_} } qw(claim found store release renew)) {
            my %c = %{ $s{$sec} };
            next if $c{taken} < 0.01 * $req;   # a replay cell: the key stored beforehand
            my ($top) = sort { $b <=> $a } @{ $per{$sec} };
            printf "%s | %s | %d | %.2f | %d (%.3f %%) | %.2f | %.0f | %d | %.0f | %d | %.3f | %.0f %% |\n",
                $prefix, $sec, $req, $c{taken} / ($req || 1), $c{found_taken}, 100 * $c{found_taken} / $c{taken},
                $c{spins} / $c{taken}, $c{found_taken} ? $c{wait_ns} / $c{found_taken} : 0, $c{slept},
                $c{held_ns} / $c{taken}, $c{held_max_ns}, $faults / ($req || 1), 100 * $top / $c{taken};
        }
    ' "$@"
}

# the table: to stdout and to $dir/zone-lock.md
out() { if [ $# -gt 0 ]; then printf '%s\n' "$*"; else cat; fi | tee -a "$dir/zone-lock.md"; }
: >"$dir/zone-lock.md"

out "| round | cell | workers | section | requests | taken/req | found taken (share) | spins/acq | wait ns per found taken | slept | held ns mean | held ns max | worker minor faults/req | busiest worker |"
out "|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for r in $(seq "$rounds"); do
    for mode in new replay; do
        for w in 1 2; do
            d=$dir/gw-r$r-$mode-w$w
            mkdir -p "$d"
            gateway_conf "$d" "$STATS_MODULE" "$w" >"$d/nginx.conf"
            start_gateway "$d"
            [ "$mode" = replay ] && [ "$prefill" != 0 ] && drive new "$conns" "$prefill" >/dev/null
            f0=$(faults "$GW_PID")
            read -r req errors < <(drive "$mode" "$conns" "$duration")
            f1=$(faults "$GW_PID")
            stop_gateway
            [ "${errors:-0}" = 0 ] || echo "warning: $errors non-2xx answers in $d" >&2
            summarise "| $r | zone-$mode | $w" "$d/error.log" "$req" $((f1 - f0)) | out
        done
    done
done

if [ "$callgrind" = 1 ]; then
    out ""
    out "| cell | requests | acquisitions | instructions under the mutex | per acquisition | event loop instructions per request |"
    out "|---|---:|---:|---:|---:|---:|"
    for mode in new replay; do
        d=$dir/cg-held-$mode
        mkdir -p "$d"
        gateway_conf "$d" "$STATS_MODULE" 1 single >"$d/nginx.conf"
        start_gateway "$d" valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$d/callgrind.out"
        read -r req errors < <(drive "$mode" 4 "$duration")
        stop_gateway
        held=$(callgrind_annotate "$d/callgrind.out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
        taken=$(perl -ne '$t += $1 if /zone-lock .* taken=(\d+)/; END { print $t + 0 }' "$d/error.log")

        d=$dir/cg-loop-$mode
        mkdir -p "$d"
        gateway_conf "$d" "$PROD_MODULE" 1 single >"$d/nginx.conf"
        start_gateway "$d" valgrind --tool=callgrind --toggle-collect=ngx_process_events_and_timers \
            --callgrind-out-file="$d/callgrind.out"
        read -r req2 errors < <(drive "$mode" 4 "$duration")
        stop_gateway
        loop=$(callgrind_annotate "$d/callgrind.out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
        perl -e 'my ($m, $req, $taken, $held, $req2, $loop) = @ARGV;
            printf "| zone-%s | %d | %d | %d | %.0f | %.0f |\n", $m, $req, $taken, $held,
                $held / ($taken || 1), $loop / ($req2 || 1)' \
            "$mode" "$req" "$taken" "$held" "$req2" "$loop" | out
    done
fi
echo
echo "(logs and callgrind files in $dir)"
[ "$docs" = 0 ] || doc_block zone-lock "$dir/zone-lock.md" \
    "\`scripts/bench-zone-lock.sh\`, $rounds rounds of ${duration}s, wrk -c$conns"
