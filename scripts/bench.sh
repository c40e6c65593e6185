#!/usr/bin/env bash
# bench.sh — the benchmark of ngx_http_idempotency_module (what `make bench` runs).
#
#   scripts/bench.sh [--quick] [--rss] [--no-rss] [--rounds N] [--duration S]
#                    [--connections N] [--threads N] [--rss-seconds S]
#                    [--rss-requests N] [--keep]
#
# Everything runs on 127.0.0.1, on free ports, in a temp dir, and only the
# processes started here are stopped (by pid):
#   upstream  nginx without the module, worker_processes 1: `return 201` with
#             about 200 bytes of JSON, keep-alive;
#   redis     redis-server --save '' --appendonly no;
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
# Reported per cell: median requests/s, median p50 and p99 latency, the rps
# ratio to plain and the p99 added over plain; CPU time per request of the
# gateway worker, the upstream worker, redis-server and the whole machine
# (with the share the hypervisor stole, which makes figures noisy); Redis
# commands per request (INFO commandstats / INFO stats over round 1, and a
# MONITOR sample for the commands the gateway itself sends); then the
# worker's VmRSS over about 1,000,000 mixed requests (bounded by count and
# time). The table goes to
# stdout and to build/bench/results.md. The issue's targets are printed for
# information: the exit status is non-zero only when the benchmark could not
# run (a process did not start, requests failed).
#
# Default: 5 rounds of 5 s per cell plus a memory run of at most 60 s
# (2.5 to 4 minutes).
# --quick: 3 rounds of 2 s and a 20 s memory run (about 1 minute).
# --rss: only the memory run (up to 200 s, or --rss-seconds), to build/bench/rss.md.
#
# Environment: NGINX_BIN, REDIS_SERVER, REDIS_CLI, WRK (default: from PATH).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
MODULE="$repo/build/ngx_http_idempotency_module.so"
LUA="$repo/scripts/bench.lua"
OUT_DIR="$repo/build/bench"
NGINX_BIN=${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}
REDIS_SERVER=${REDIS_SERVER:-$(command -v redis-server || echo /usr/bin/redis-server)}
REDIS_CLI=${REDIS_CLI:-$(command -v redis-cli || echo /usr/bin/redis-cli)}
WRK=${WRK:-$(command -v wrk || echo /usr/bin/wrk)}

rounds=5 duration=5 warmup=2 conns=32 threads=1
do_cells=1 do_rss=1 rss_seconds=60 rss_requests=1000000 keep=0 quick=0 rss_only=0
usage() { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) quick=1; rounds=3; duration=2; warmup=1; rss_seconds=20 ;;
    --rss) rss_only=1; do_cells=0; do_rss=1; rss_seconds=200 ;;
    --no-rss) do_rss=0 ;;
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
for n in "$rounds" "$duration" "$conns" "$threads" "$rss_seconds" "$rss_requests"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: not a positive whole number: $n" >&2; exit 2; }
done

die() { echo "bench.sh: $*" >&2; exit 1; }
[ -f "$MODULE" ] || die "$MODULE is missing: build it first (make module)"
for b in "$NGINX_BIN" "$REDIS_SERVER" "$REDIS_CLI" "$WRK"; do
    [ -x "$b" ] || die "$b is not installed (make deps, or apt-get install nginx redis-server wrk)"
done
command -v curl >/dev/null || die "curl is needed"

T0=$(date +%s.%N)
elapsed() { perl -e 'printf "%6.1fs", $ARGV[1] - $ARGV[0]' "$T0" "$(date +%s.%N)"; }
note() { echo "  [$(elapsed)] $*"; }

# ------------------------------------------------------------------ processes

tmp=$(mktemp -d "${TMPDIR:-/tmp}/idempotency-bench-XXXXXX")
chmod 0755 "$tmp"     # nginx workers run as another user when we are root
declare -a PIDS=()    # everything started here, stopped by pid at exit
declare -A PNAME=()

start_bg() {  # start_bg NAME LOG COMMAND...: sets $started_pid
    local name=$1 log=$2; shift 2
    "$@" </dev/null >>"$log" 2>&1 &
    started_pid=$!
    PIDS+=("$started_pid")
    PNAME[$started_pid]=$name
}

alive() { kill -0 "$1" 2>/dev/null; }

declare -A STOPPED=()

workers_of() {  # the worker processes of an nginx master
    ps -o pid= --ppid "$1" 2>/dev/null | tr -d ' ' || true
}

stop_pid() {  # stop_pid PID [SIGNAL]: SIGNAL (TERM), then KILL after 5 s
    local pid=$1 sig=${2:-TERM} w workers=""
    [ -z "${STOPPED[$pid]:-}" ] || return 0
    STOPPED[$pid]=1
    # an nginx master: its workers, in case it has to be killed and leaves them
    [[ "${PNAME[$pid]:-}" == nginx* ]] && workers=$(workers_of "$pid")
    if alive "$pid"; then
        kill -"$sig" "$pid" 2>/dev/null || true
        for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
        if alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
    fi
    wait "$pid" 2>/dev/null || true
    for w in $workers; do
        alive "$w" && kill -KILL "$w" 2>/dev/null || true
    done
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    local i
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        stop_pid "${PIDS[$i]}" TERM
    done
    if [ "$keep" = 1 ] || [ "$rc" -ne 0 ]; then
        echo "temp dir kept: $tmp" >&2
    else
        rm -rf "$tmp"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'echo; echo "bench.sh: interrupted, stopping what was started" >&2; exit 130' INT TERM

free_ports() {  # free_ports N: N distinct free ports on 127.0.0.1
    perl -MIO::Socket::INET -e '
        my @s = map { IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0, Proto => "tcp",
                                            Listen => 1, ReuseAddr => 1) or die "bind: $!\n" } 1 .. $ARGV[0];
        print join(" ", map { $_->sockport } @s), "\n";' "$1"
}

wait_for() {  # wait_for WHAT PID COMMAND...: up to 10 s, while PID runs
    local what=$1 pid=$2; shift 2
    for _ in $(seq 100); do
        alive "$pid" || die "$what exited at start; see $tmp"
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    die "$what did not come up; see $tmp"
}

read -r REDIS_PORT UP_PORT GW_PORT RSS_PORT TLS_PLAIN_PORT TLS_PORT <<<"$(free_ports 6)"
RUN_ID="b$(date +%s)$RANDOM"
BODY='{"amount":1000,"currency":"eur","customer":"cus_bench","description":"benchmark payment"}'
REPLAY_KEY="bench-replay-$RUN_ID"
POOL=64
export BENCH_BODY="$BODY"

redis_cmd=("$REDIS_SERVER" --bind 127.0.0.1 --port "$REDIS_PORT" --save '' --appendonly no
           --dir "$tmp/redis" --daemonize no --protected-mode yes)
rcli() { "$REDIS_CLI" -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

start_redis() {
    mkdir -p "$tmp/redis"
    start_bg redis-server "$tmp/redis.log" "${redis_cmd[@]}"
    REDIS_PID=$started_pid
    wait_for redis-server "$REDIS_PID" rcli ping
}

# The Redis of the *-tls cells: a TLS port (and a plain one for redis-cli),
# its certificate for 127.0.0.1 signed by a CA made here.
start_redis_tls() {
    local d="$tmp/tls"
    mkdir -p "$d" "$tmp/redis-tls"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -keyout "$d/ca.key" \
        -out "$d/ca.pem" -subj /CN=bench-ca >"$d/openssl.log" 2>&1 || die "openssl (CA) failed; see $d"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/server.key" -out "$d/server.csr" \
        -subj /CN=127.0.0.1 >>"$d/openssl.log" 2>&1 || die "openssl (request) failed; see $d"
    echo "subjectAltName=IP:127.0.0.1" >"$d/server.ext"
    openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
        -out "$d/server.pem" -extfile "$d/server.ext" >>"$d/openssl.log" 2>&1 || die "openssl (sign) failed; see $d"
    chmod 0644 "$d"/*
    start_bg "redis-server (TLS)" "$tmp/redis-tls.log" "$REDIS_SERVER" --bind 127.0.0.1 --port "$TLS_PLAIN_PORT" \
        --tls-port "$TLS_PORT" --tls-cert-file "$d/server.pem" --tls-key-file "$d/server.key" \
        --tls-ca-cert-file "$d/ca.pem" --tls-auth-clients no --save '' --appendonly no --dir "$tmp/redis-tls" \
        --daemonize no
    REDIS_TLS_PID=$started_pid
    wait_for "redis-server (TLS)" "$REDIS_TLS_PID" "$REDIS_CLI" -h 127.0.0.1 -p "$TLS_PLAIN_PORT" ping
}

# Three Redis Clusters for the cluster-N cells: of 1, 2 and 3 masters (no
# replicas), slots split evenly (CLUSTER ADDSLOTSRANGE, CLUSTER MEET).
# CLUSTER_PORTS[N]: the ports of the cluster of N masters; CLUSTER_PIDS[N]
# their pids (their CPU is counted as redis-server's in the cluster-N cell).
declare -A CLUSTER_PORTS=() CLUSTER_PIDS=()
start_clusters() {
    local n i port bus first last pids ports
    for n in 1 2 3; do
        read -r -a ports <<<"$(free_ports "$n")"
        read -r -a bus <<<"$(free_ports "$n")"
        pids=""
        for ((i = 0; i < n; i++)); do
            port=${ports[$i]}
            mkdir -p "$tmp/cluster$n-$port"
            start_bg "redis-server cluster $n/$port" "$tmp/cluster$n-$port/log" "$REDIS_SERVER" --bind 127.0.0.1 \
                --port "$port" --cluster-port "${bus[$i]}" --cluster-enabled yes --cluster-config-file nodes.conf \
                --dir "$tmp/cluster$n-$port" --save '' --appendonly no --daemonize no
            pids+=" $started_pid"
            wait_for "cluster node $port" "$started_pid" "$REDIS_CLI" -p "$port" ping
            first=$((16384 * i / n)) last=$((16384 * (i + 1) / n - 1))
            "$REDIS_CLI" -p "$port" cluster addslotsrange "$first" "$last" >/dev/null
            [ "$i" -gt 0 ] && "$REDIS_CLI" -p "$port" cluster meet 127.0.0.1 "${ports[0]}" "${bus[0]}" >/dev/null
        done
        for ((i = 0; i < 300; i++)); do
            local ready=1
            for port in "${ports[@]}"; do
                "$REDIS_CLI" -p "$port" cluster info | grep -q 'cluster_state:ok' || ready=0
            done
            [ "$ready" = 1 ] && break
            sleep 0.1
        done
        [ "$ready" = 1 ] || die "the cluster of $n masters did not become ready"
        CLUSTER_PORTS[$n]="${ports[*]}" CLUSTER_PIDS[$n]="${pids# }"
    done
}

nginx_common() {  # the http-level lines both nginx instances share
    local d=$1
    cat <<EOF
    access_log off;
    client_body_temp_path $d/tmp/body;
    proxy_temp_path $d/tmp/proxy;
    fastcgi_temp_path $d/tmp/fastcgi;
    uwsgi_temp_path $d/tmp/uwsgi;
    scgi_temp_path $d/tmp/scgi;
    keepalive_requests 100000000;
    keepalive_timeout 300s;
EOF
}

write_upstream_conf() {
    local d=$1
    cat >"$d/nginx.conf" <<EOF
# the upstream of scripts/bench.sh: no module
worker_processes 1;
error_log $d/error.log warn;
pid $d/nginx.pid;
events { worker_connections 4096; }
http {
$(nginx_common "$d")
    default_type application/json;
    server {
        listen 127.0.0.1:$UP_PORT backlog=4096;
        location / {
            return 201 '{"id":"pay_\$request_id","object":"payment","amount":1000,"currency":"eur","status":"succeeded","customer":"cus_bench","description":"benchmark payment","created":1700000000,"livemode":false}';
        }
    }
}
EOF
}

write_gateway_conf() {  # write_gateway_conf DIR PORT
    local d=$1 port=$2
    cat >"$d/nginx.conf" <<EOF
# the gateway of scripts/bench.sh: the module, one worker
load_module $MODULE;
worker_processes 1;
error_log $d/error.log warn;
pid $d/nginx.pid;
events { worker_connections 4096; }
http {
$(nginx_common "$d")
    idempotency_redis 127.0.0.1:$REDIS_PORT;
    idempotency_zone zone=bench:1024m;

    upstream backend {
        server 127.0.0.1:$UP_PORT;
        keepalive 32;
        keepalive_requests 100000000;
    }

    server {
        listen 127.0.0.1:$port backlog=4096;
        proxy_http_version 1.1;
        proxy_set_header Connection "";

        location /plain/ { idempotency off; proxy_pass http://backend; }
        location /idem/  { idempotency on;  proxy_pass http://backend; }
        location /zone/  { idempotency on;  idempotency_store zone=bench; idempotency_ttl 10s; proxy_pass http://backend; }
        location /zone-replay/ { idempotency on; idempotency_store zone=bench; proxy_pass http://backend; }
        location /idem-tls/ {
            idempotency on;
            idempotency_redis 127.0.0.1:$TLS_PORT ssl;
            idempotency_redis_ssl_trusted_certificate $tmp/tls/ca.pem;
            proxy_pass http://backend;
        }
$(for n in 1 2 3; do
    printf '        location /cluster%s/ { idempotency on; idempotency_redis_cluster 127.0.0.1:%s; proxy_pass http://backend; }\n' \
        "$n" "${CLUSTER_PORTS[$n]%% *}"
done)
        location = /bench-status { stub_status; }
    }
}
EOF
}

start_nginx() {  # start_nginx NAME DIR: sets $started_pid (the master; daemon off)
    local name=$1 d=$2
    mkdir -p "$d/tmp"
    "$NGINX_BIN" -t -q -p "$d/" -c "$d/nginx.conf" -g 'daemon off;' 2>"$d/check.log" \
        || { cat "$d/check.log" >&2; die "nginx -t refused $d/nginx.conf"; }
    start_bg "nginx $name" "$d/stderr.log" "$NGINX_BIN" -p "$d/" -c "$d/nginx.conf" -g 'daemon off;'
}

stub_requests() {  # the gateway's request count (stub_status), this query excluded
    local n
    n=$(curl -s --max-time 5 "http://127.0.0.1:$1/bench-status" | awk 'NR == 3 { print $3 }')
    [[ "$n" =~ ^[0-9]+$ ]] || die "no stub_status from the gateway on port $1"
    echo $((n - 1))
}

post() {  # post PORT PATH [KEY]: the response head and body, to stdout
    local args=(-s -i --max-time 5 -X POST -H 'Content-Type: application/json' --data-binary "$BODY")
    [ -n "${3:-}" ] && args+=(-H "Idempotency-Key: $3")
    curl "${args[@]}" "http://127.0.0.1:$1$2"
}

check_gateway() {  # check_gateway PORT KEY: the cells answer what they should; KEY is stored
    local port=$1 key=$2 r
    r=$(post "$port" /plain/pay) || die "plain: no answer"
    [[ "$r" == "HTTP/1.1 201"* ]] || die "plain: expected 201, got: ${r%%$'\r'*}"
    r=$(post "$port" /idem/pay) || die "nokey: no answer"
    [[ "$r" == "HTTP/1.1 201"* ]] || die "nokey: expected 201, got: ${r%%$'\r'*}"
    r=$(post "$port" /idem/pay "$key") || die "new: no answer"
    [[ "$r" == "HTTP/1.1 201"* && "$r" != *Idempotent-Replayed* ]] || die "new key: expected a fresh 201, got: ${r%%$'\r'*}"
    r=$(post "$port" /idem/pay "$key") || die "replay: no answer"
    [[ "$r" == "HTTP/1.1 201"* && "$r" == *"Idempotent-Replayed: true"* ]] || die "replay: expected a replayed 201, got: $r"
    r=$(post "$port" /zone/pay "$key-zone-new") || die "zone-new: no answer"
    [[ "$r" == "HTTP/1.1 201"* && "$r" != *Idempotent-Replayed* ]] || die "zone-new: expected a fresh 201, got: ${r%%$'\r'*}"
    r=$(post "$port" /zone-replay/pay "$key") || die "zone-replay: no answer (storing the key)"
    r=$(post "$port" /zone-replay/pay "$key") || die "zone-replay: no answer"
    [[ "$r" == "HTTP/1.1 201"* && "$r" == *"Idempotent-Replayed: true"* ]] || die "zone-replay: expected a replayed 201, got: $r"
    UP_BODY_BYTES=$(printf '%s' "${r#*$'\r\n\r\n'}" | wc -c)
    r=$(post "$port" /idem-tls/pay "$key") || die "new-tls: no answer"
    [[ "$r" == "HTTP/1.1 201"* && "$r" != *Idempotent-Replayed* ]] || die "new-tls: expected a fresh 201, got: ${r%%$'\r'*}"
    r=$(post "$port" /idem-tls/pay "$key") || die "replay-tls: no answer"
    [[ "$r" == "HTTP/1.1 201"* && "$r" == *"Idempotent-Replayed: true"* ]] || die "replay-tls: expected a replayed 201, got: $r"
    local n
    for n in 1 2 3; do
        r=$(post "$port" "/cluster$n/pay" "$key-cluster-$n") || die "cluster-$n: no answer"
        [[ "$r" == "HTTP/1.1 201"* && "$r" != *Idempotent-Replayed* ]] || die "cluster-$n: expected a fresh 201, got: ${r%%$'\r'*}"
    done
}

# ------------------------------------------------------------------ wrk

CELLS=(plain new replay nokey zone-new zone-replay new-tls replay-tls cluster-1 cluster-2 cluster-3)
export BENCH_CELLS="${CELLS[*]}"    # the order of the report's tables

# wrk_start PURPOSE MODE SECONDS PORT LOG [CONNS]: wrk in the background
# (WRK_PID: the `timeout` around it, which passes INT on to wrk);
# wrk_finish: waits for it and sets $wrk_line (the BENCH line of bench.lua).
# run_wrk: both.
declare -a WRK_FORMS=()    # the distinct command lines, for the report
declare -A WRK_MODES=()
wrk_start() {
    local purpose=$1 mode=$2 secs=$3 port=$4 log=$5 c=${6:-$conns} t=$threads
    [ "$c" -lt "$t" ] && t=$c
    local run="$RUN_ID-$((++WRK_RUNS))"
    local cmd=(env BENCH_MODE="$mode" BENCH_RUN="$run" BENCH_REPLAY_KEY="$REPLAY_KEY" BENCH_POOL="$POOL"
               "$WRK" -t"$t" -c"$c" -d"${secs}s" --latency --timeout 5s -s "$LUA" "http://127.0.0.1:$port/")
    local form="$purpose: BENCH_RUN=<unique per run> wrk -t$t -c$c -d${secs}s --latency --timeout 5s"
    form+=" -s scripts/bench.lua http://127.0.0.1:PORT/"
    if [ -z "${WRK_MODES[$form]+x}" ]; then WRK_FORMS+=("$form"); WRK_MODES[$form]=""; fi
    [[ " ${WRK_MODES[$form]} " == *" $mode "* ]] || WRK_MODES[$form]+=" $mode"
    start_bg wrk "$log" timeout --signal=INT --kill-after=5 $((secs + 30)) "${cmd[@]}"
    WRK_PID=$started_pid WRK_LOG=$log WRK_MODE=$mode
}
wrk_finish() {
    local rc=0
    wait "$WRK_PID" || rc=$?
    STOPPED[$WRK_PID]=1
    [ "$rc" -eq 0 ] || die "wrk ($WRK_MODE) failed (exit $rc); see $WRK_LOG"
    wrk_line=$(grep '^BENCH ' "$WRK_LOG" | tail -1)
    [ -n "$wrk_line" ] || die "wrk ($WRK_MODE) printed no figures; see $WRK_LOG"
}
run_wrk() { wrk_start "$@"; wrk_finish; }
WRK_RUNS=0

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$wrk_line"; }

check_errors() {  # the cell's requests all got a 2xx without socket errors
    local what=$1 e=0 f
    for f in status_errors connect read write timeout; do e=$((e + $(field $f))); done
    if [ "$e" -ne 0 ]; then
        echo "  $what: $e errors: $wrk_line" >&2
        ERRORS=$((ERRORS + e))
    fi
}
ERRORS=0

# Snapshot of Redis counters: commandstats calls and total_commands_processed.
redis_snapshot() {
    rcli INFO all | tr -d '\r' | perl -ne '
        print "total $1\n" if /^total_commands_processed:(\d+)/;
        print "reads $1\n" if /^total_reads_processed:(\d+)/;
        print "$1 $2 $3\n" if /^cmdstat_(\S+?):calls=(\d+),usec=(\d+)/;'
}

# Commands per request between two snapshots; prints a line for the summary.
# Our own INFO calls are left out.
redis_per_request() {  # BEFORE AFTER REQUESTS
    perl -e '
        my ($bf, $af, $n) = @ARGV;
        my (%b, %a);
        for my $f ([$bf, \%b], [$af, \%a]) { open my $fh, "<", $f->[0] or die; while (<$fh>) { my ($k, $v, $us) = split; $f->[1]{$k} = $v; $f->[1]{"usec:$k"} = $us // 0 } }
        my $ours = ($a{info} // 0) - ($b{info} // 0);
        my $total = $a{total} - $b{total} - $ours;
        my (@cmds, $sum);
        for my $k (sort { ($a{$b} - ($b{$b} // 0)) <=> ($a{$a} - ($b{$a} // 0)) || $a cmp $b } keys %a) {
            next if $k eq "total" || $k eq "info" || $k eq "reads" || $k =~ /^usec:/;
            my $d = $a{$k} - ($b{$k} // 0);
            next unless $d;
            $sum += $d;
            push @cmds, sprintf("%s %.2f × %.2f µs", uc $k, $d / $n, ($a{"usec:$k"} - ($b{"usec:$k"} // 0)) / $d);
        }
        my $reads = ($a{reads} // 0) - ($b{reads} // 0) - $ours;
        printf "%d|%s|%.2f|%.2f|%.2f\n", $n, join(", ", @cmds) || "none", ($sum // 0) / $n, $total / $n, $reads / $n;
    ' "$1" "$2" "$3"
}

# The commands the gateway itself sends per request (not those a Lua script
# runs inside Redis): a MONITOR sample of 1 s of wrk -c4.
monitor_sample() {  # CELL: sets MON (REQUESTS|SENT_PER_REQUEST|BREAKDOWN)
    local cell=$1 log="$tmp/monitor-$1.log" mpid before after
    start_bg "redis-cli monitor" "$log" "$REDIS_CLI" -h 127.0.0.1 -p "$REDIS_PORT" monitor
    mpid=$started_pid
    for _ in $(seq 50); do grep -q '^OK' "$log" 2>/dev/null && break; sleep 0.05; done
    before=$(stub_requests "$GW_PORT")
    run_wrk "MONITOR sample (redis-cli monitor running)" "$cell" 1 "$GW_PORT" "$tmp/wrk-monitor-$cell.log" 4
    sleep 0.3
    after=$(stub_requests "$GW_PORT")
    stop_pid "$mpid" TERM
    MON=$(perl -e '
        my ($log, $n) = @ARGV;
        open my $fh, "<", $log or die;
        my (%c, $sum);
        while (<$fh>) {
            next unless /^\d+\.\d+ \[\d+ ([^\]]+)\] "([^"]+)"/;
            my ($client, $cmd) = ($1, uc $2);
            next if $client eq "lua" || $cmd =~ /^(INFO|PING|CLIENT|MONITOR|COMMAND)$/;
            $c{$cmd}++; $sum++;
        }
        $sum //= 0;
        printf "%d|%.2f|%s\n", $n, $n ? $sum / $n : 0,
            join(", ", map { sprintf "%s %.2f", $_, $c{$_} / $n } sort { $c{$b} <=> $c{$a} } keys %c) || "none";
    ' "$log" $((after - before - 1)))
}

# ------------------------------------------------------------------ report helpers


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
    echo "cells: ${CELLS[*]}; $rounds rounds of ${duration}s each, $warmup s warm-up; wrk -t$threads -c$conns"
fi

start_redis
note "redis-server pid $REDIS_PID on 127.0.0.1:$REDIS_PORT"
start_redis_tls
note "redis-server (TLS) pid $REDIS_TLS_PID on 127.0.0.1:$TLS_PORT (TLS), $TLS_PLAIN_PORT"
if [ "$do_cells" = 1 ]; then
    start_clusters
    for n in 1 2 3; do note "Redis Cluster of $n master(s): ports ${CLUSTER_PORTS[$n]}, pids ${CLUSTER_PIDS[$n]}"; done
fi
mkdir -p "$tmp/upstream"
write_upstream_conf "$tmp/upstream"
start_nginx upstream "$tmp/upstream"
UP_PID=$started_pid
wait_for "the upstream nginx" "$UP_PID" curl -sf -o /dev/null -X POST "http://127.0.0.1:$UP_PORT/" -w '%{http_code}' --max-time 2
UP_WORKER=$(workers_of "$UP_PID" | head -1)
note "upstream nginx master $UP_PID on 127.0.0.1:$UP_PORT, worker $UP_WORKER"

start_gateway() {  # start_gateway NAME PORT: sets GW_PID, GW_WORKER
    local d="$tmp/$1"
    mkdir -p "$d"
    write_gateway_conf "$d" "$2"
    start_nginx "$1" "$d"
    GW_PID=$started_pid GW_NAME=$1
    wait_for "the $1 nginx" "$GW_PID" curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$2/bench-status"
    GW_WORKER=$(workers_of "$GW_PID" | head -1)
    [ -n "$GW_WORKER" ] || die "the $1 nginx has no worker"
    note "$1 nginx master $GW_PID on 127.0.0.1:$2, worker $GW_WORKER"
}

LOG_FINDINGS=()
stop_gateway() {  # stops it and keeps what its error log says (warn and above)
    stop_pid "$GW_PID" TERM
    local log="$tmp/$GW_NAME/error.log" n
    n=$(grep -c '\[\(warn\|error\|crit\|alert\|emerg\)\]' "$log" 2>/dev/null || true)
    if [ "${n:-0}" -gt 0 ]; then
        LOG_FINDINGS+=("$GW_NAME: $n lines at warn or above, first: $(grep -m1 '\[\(warn\|error\|crit\|alert\|emerg\)\]' "$log")")
        note "the $GW_NAME error log has $n lines at warn or above"
    fi
}

# CPU time so far (ns, /proc/PID/schedstat) of the gateway worker, the
# upstream worker and redis-server, then the machine's busy and idle ticks.
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
export CLK_TCK
proc_ns() { local a; if read -r a _ <"/proc/$1/schedstat" 2>/dev/null; then echo "$a"; else echo 0; fi; }
redis_ns() {  # redis_ns CELL: CPU time of the redis-server(s) that CELL uses
    local pid total=0
    case "$1" in
    cluster-*) for pid in ${CLUSTER_PIDS[${1#cluster-}]}; do total=$((total + $(proc_ns "$pid"))); done ;;
    *-tls) total=$(proc_ns "$REDIS_TLS_PID") ;;
    *) total=$(proc_ns "$REDIS_PID") ;;
    esac
    echo "$total"
}
cpu_snap() {  # cpu_snap CELL
    echo "$(proc_ns "$GW_WORKER") $(proc_ns "$UP_WORKER") $(redis_ns "${1:-new}")" \
         "$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $5 + $6, $9 }' /proc/stat)"
}

vm_rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo '?'; }

RESULTS="$tmp/results.tsv"
: >"$RESULTS"
RSS_LINES=()
RSS_NOTE=""

# ------------------------------------------------------------------ the cells

if [ "$do_cells" = 1 ]; then
    start_gateway gateway "$GW_PORT"
    check_gateway "$GW_PORT" "$REPLAY_KEY"
    note "checked: plain 201, nokey 201, replay key $REPLAY_KEY stored and replayed (upstream body $UP_BODY_BYTES bytes)"

    for cell in "${CELLS[@]}"; do
        run_wrk "warm-up" "$cell" "$warmup" "$GW_PORT" "$tmp/wrk-warmup-$cell.log"
    done
    note "warm-up done (${warmup}s per cell)"

    # the commands the gateway sends, per cell (MONITOR sample, outside the rounds)
    declare -A SENT=() SENT_BREAKDOWN=()
    for cell in new replay nokey; do
        monitor_sample "$cell"
        IFS='|' read -r n per breakdown <<<"$MON"
        SENT[$cell]=$per
        SENT_BREAKDOWN[$cell]="$breakdown"
        note "MONITOR sample $cell: $n requests, commands sent by the gateway per request $per ($breakdown)"
    done

    declare -A STATS=()
    for ((r = 1; r <= rounds; r++)); do
        order=()
        for ((i = 0; i < ${#CELLS[@]}; i++)); do
            order+=("${CELLS[$(((i + r - 1) % ${#CELLS[@]}))]}")
        done
        line="round $r/$rounds:"
        for cell in "${order[@]}"; do
            if [ "$r" = 1 ] && [[ "$cell" == new || "$cell" == replay ]]; then
                redis_snapshot >"$tmp/redis-before-$cell"
                req_before=$(stub_requests "$GW_PORT")
            fi
            cpu_before=$(cpu_snap "$cell")
            run_wrk "the rounds" "$cell" "$duration" "$GW_PORT" "$tmp/wrk-r$r-$cell.log"
            cpu_after=$(cpu_snap "$cell")
            check_errors "round $r $cell"
            if [ "$r" = 1 ] && [[ "$cell" == new || "$cell" == replay ]]; then
                sleep 0.3   # requests still in flight when wrk stopped finish their Redis work
                req_after=$(stub_requests "$GW_PORT")
                redis_snapshot >"$tmp/redis-after-$cell"
                STATS[$cell]=$(redis_per_request "$tmp/redis-before-$cell" "$tmp/redis-after-$cell" \
                               $((req_after - req_before - 1)))
            fi
            req=$(field requests) dur=$(field duration_us)
            rps=$(perl -e 'printf "%.0f", $ARGV[0] / ($ARGV[1] / 1e6)' "$req" "$dur")
            cpu=$(perl -e '
                my ($n, @v) = @ARGV;
                my $CLK_TCK = $ENV{CLK_TCK} || 100;
                my @d = map { $v[$_ + 6] - $v[$_] } 0 .. 5;
                my $all = ($d[3] + $d[4] + $d[5]) || 1;
                printf "%.1f\t%.1f\t%.1f\t%.0f\t%.1f\t%.0f", $d[0] / 1e3 / $n, $d[1] / 1e3 / $n, $d[2] / 1e3 / $n,
                    100 * $d[3] / $all, $d[3] * 1e6 / $CLK_TCK / $n, 100 * $d[5] / $all;' "$req" $cpu_before $cpu_after)
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$cell" "$rps" "$(field p50_us)" "$(field p99_us)" "$req" "$cpu" >>"$RESULTS"
            line+=" $cell $rps rps (p99 $(perl -e 'printf "%.2f", $ARGV[0] / 1000' "$(field p99_us)") ms, steal $(cut -f6 <<<"$cpu")%);"
        done
        note "${line%;}"
    done
    stop_gateway
fi

# ------------------------------------------------------------------ memory

if [ "$do_rss" = 1 ]; then
    start_gateway rss-gateway "$RSS_PORT"
    check_gateway "$RSS_PORT" "$REPLAY_KEY-rss-check"
    for ((i = 0; i < POOL; i++)); do
        post "$RSS_PORT" /idem/pay "$REPLAY_KEY-$i" >/dev/null || die "could not store the pool's keys"
    done
    base=$(stub_requests "$RSS_PORT")
    rss0=$(vm_rss "$GW_WORKER")
    RSS_LINES+=("start|0|$rss0|0")
    note "memory run: worker $GW_WORKER VmRSS $rss0 kB at start; mix 40% new / 40% replay ($POOL keys) / 20% no key, up to $rss_requests requests or ${rss_seconds}s"
    # wrk runs for the time limit; a poller (stub_status every 20 ms) reads the
    # worker's VmRSS as the count passes each checkpoint and stops wrk (INT) at
    # the last one.
    cps=()
    for cp in 10000 100000 500000 1000000; do [ "$cp" -lt "$rss_requests" ] && cps+=("$cp"); done
    cps+=("$rss_requests")
    wrk_start "memory run (stopped by the poller at the request count)" mix "$rss_seconds" "$RSS_PORT" "$tmp/wrk-rss.log"
    start_bg "rss poller" "$tmp/rss-poller.log" perl -MIO::Socket::INET -MTime::HiRes=time,sleep -e '
        my ($port, $worker, $wrk, $base, @cps) = @ARGV;
        $| = 1;
        my ($t0, $polls) = (time, 0);
        sub count {
            my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $port, Timeout => 2) or return;
            print $s "GET /bench-status HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
            local $/; my $r = <$s> // "";
            $polls++;
            return $r =~ /^\s*\d+\s+\d+\s+(\d+)\s*$/m ? $1 : undef;
        }
        sub rss { open my $fh, "<", "/proc/$worker/status" or return "?"; while (<$fh>) { return $1 if /^VmRSS:\s+(\d+)/ } "?" }
        while (@cps && kill 0, $wrk) {
            my $n = count();
            if (defined $n) {
                my $done = $n - $base - $polls;
                while (@cps && $done >= $cps[0]) {
                    my $cp = shift @cps;
                    printf "%d|%d|%s|%.1f\n", $cp, $done, rss(), time - $t0;
                }
                kill "INT", $wrk unless @cps;
            }
            sleep 0.02;
        }
    ' "$RSS_PORT" "$GW_WORKER" "$WRK_PID" "$base" "${cps[@]}"
    poller=$started_pid
    wrk_finish
    check_errors "memory run"
    stop_pid "$poller" TERM
    while IFS= read -r l; do
        [[ "$l" =~ ^[0-9]+\|[0-9]+\| ]] || continue
        RSS_LINES+=("$l")
        IFS='|' read -r cp n rss t <<<"$l"
        note "after $n requests (checkpoint $cp, ${t}s): worker VmRSS $rss kB"
    done <"$tmp/rss-poller.log"
    sleep 0.3
    alive "$GW_WORKER" || die "the gateway worker $GW_WORKER is gone (crashed?)"
    done_n=$(( $(stub_requests "$RSS_PORT") - base ))
    rss=$(vm_rss "$GW_WORKER")
    RSS_LINES+=("idle after the run|$done_n|$rss|")
    note "after the run ($done_n requests, $(field requests) counted by wrk), idle: worker VmRSS $rss kB"
    last_cp=${cps[-1]}
    [ "$done_n" -ge "$last_cp" ] || RSS_NOTE="time limit (${rss_seconds}s) reached at $done_n requests, before $last_cp"
    [ -z "$RSS_NOTE" ] || note "$RSS_NOTE"
    stop_gateway
fi

# ------------------------------------------------------------------ report

report="$tmp/report.md"
{
    echo "# nginx-idempotency benchmark"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "- machine: $(nproc) CPUs ($CPU_MODEL), $(uname -sr), $(awk '/MemTotal/ { printf "%.1f GB", $2 / 1048576 }' /proc/meminfo)"
    echo "- nginx: $NGINX_VERSION ($NGINX_BIN); redis: $REDIS_VERSION; wrk: $WRK_VERSION"
    echo "- module: build/ngx_http_idempotency_module.so, commit $GIT_REV, built $(date -u -r "$MODULE" '+%Y-%m-%d %H:%M:%S UTC'), sha256 $(sha256sum "$MODULE" | cut -c1-16)"
    echo "- everything on 127.0.0.1 on the same machine: wrk, the gateway (1 worker), the upstream nginx (1 worker), redis-server"
    if [ "$do_cells" = 1 ]; then
        echo "- $rounds rounds, ${duration}s per cell per round (order rotating), ${warmup}s warm-up per cell; medians over the rounds"
        echo "- request: POST, ${#BODY}-byte JSON body; upstream answer: 201, $UP_BODY_BYTES-byte JSON body"
        echo
        echo "## Throughput and latency"
        echo
        perl -e '
            my ($file, $rounds) = @ARGV;
            my %v;
            open my $fh, "<", $file or die;
            while (<$fh>) { chomp; my ($r, $c, $rps, $p50, $p99) = split /\t/; push @{ $v{$c}{rps} }, $rps; push @{ $v{$c}{p50} }, $p50; push @{ $v{$c}{p99} }, $p99 }
            sub med { my @s = sort { $a <=> $b } @_; return @s % 2 ? $s[$#s / 2] : ($s[@s / 2 - 1] + $s[@s / 2]) / 2 }
            my %m;
            for my $c (keys %v) { $m{$c}{$_} = med(@{ $v{$c}{$_} }) for qw(rps p50 p99) }
            print "| cell | requests/s (median) | rps range over rounds | × plain | p50 ms | p99 ms | p99 added over plain, ms |\n";
            print "|---|---:|---:|---:|---:|---:|---:|\n";
            for my $c (split " ", $ENV{BENCH_CELLS}) {
                next unless $m{$c};
                my @r = sort { $a <=> $b } @{ $v{$c}{rps} };
                printf "| %s | %.0f | %.0f–%.0f | %.3f | %.3f | %.3f | %+.3f |\n", $c, $m{$c}{rps}, $r[0], $r[-1],
                    $m{$c}{rps} / $m{plain}{rps}, $m{$c}{p50} / 1000, $m{$c}{p99} / 1000, ($m{$c}{p99} - $m{plain}{p99}) / 1000;
            }
            print "\nCPU time per request (medians; from /proc/PID/schedstat, all processes share the same $ARGV[2] CPUs):\n\n";
            print "| cell | gateway worker µs | upstream worker µs | redis-server µs | whole machine µs (wrk, kernel included) | machine busy | stolen by the hypervisor |\n";
            print "|---|---:|---:|---:|---:|---:|---:|\n";
            my %c;
            open my $in, "<", $file or die;
            while (<$in>) { chomp; my @f = split /\t/; push @{ $c{$f[1]}[$_] }, $f[6 + $_] for 0 .. 5 }
            for my $cell (split " ", $ENV{BENCH_CELLS}) {
                next unless $c{$cell};
                printf "| %s | %.1f | %.1f | %.1f | %.1f | %.0f %% | %.0f %% |\n", $cell, map { med(@{ $c{$cell}[$_] }) } 0 .. 2, 4, 3, 5;
            }
            open my $out, ">", "$file.medians" or die;
            for my $c (keys %m) { print $out join("\t", $c, $m{$c}{rps} / $m{plain}{rps}, ($m{$c}{p99} - $m{plain}{p99}) / 1000), "\n" }
        ' "$RESULTS" "$rounds" "$(nproc)"
        echo
        echo "Per round (requests/s):"
        echo
        echo '```'
        perl -e '
            my %v; my @rounds;
            while (<STDIN>) { chomp; my ($r, $c, $rps, $p50, $p99) = split /\t/; $v{$r}{$c} = sprintf "%6d (p99 %5.2f ms, steal %2d%%)", $rps, $p99 / 1000, (split /\t/)[11] // 0; push @rounds, $r unless grep { $_ == $r } @rounds }
            my @cells = split " ", $ENV{BENCH_CELLS};
            printf "%-6s" . " %-34s" x @cells . "\n", "round", @cells;
            for my $r (@rounds) { printf "%-6s" . " %-34s" x @cells . "\n", $r, map { $v{$r}{$_} // "-" } @cells }
        ' <"$RESULTS"
        echo '```'
        perl -e '
            my ($n, $bad) = (0, 0);
            while (<STDIN>) { chomp; my @f = split /\t/; $n++; $bad++ if ($f[11] // 0) > 10 }
            print "\nNote: $bad of $n cell runs lost more than 10 % of the machine to the hypervisor (steal);",
                  " they are in the medians. Rerun on a quiet machine for firmer figures.\n" if $bad;
        ' <"$RESULTS"
        echo
        echo "## Redis commands per request"
        echo
        echo "| cell | sent by the gateway (MONITOR sample) | INFO commandstats, round 1: calls per request × Redis CPU µs per call (includes the commands Lua scripts run inside Redis; EVALSHA's time includes theirs) | total_commands_processed, round 1 | Redis socket reads (total_reads_processed), round 1 |"
        echo "|---|---|---|---|---|"
        for cell in new replay nokey; do
            if [ -n "${STATS[$cell]:-}" ]; then
                IFS='|' read -r n cmds sum total reads <<<"${STATS[$cell]}"
                echo "| $cell | ${SENT[$cell]} (${SENT_BREAKDOWN[$cell]}) | $sum ($cmds; $n requests) | $total | $reads |"
            else
                echo "| $cell | ${SENT[$cell]} (${SENT_BREAKDOWN[$cell]}) | — | — | — |"
            fi
        done
        echo
        echo "## Targets (informational)"
        echo
        perl -e '
            my ($file, $new_sent, $replay_sent) = @ARGV;
            my %m;
            open my $fh, "<", "$file.medians" or die;
            while (<$fh>) { chomp; my ($c, $ratio, $added) = split /\t/; $m{$c} = [$ratio, $added] }
            my @t = (
                ["new rps ≥ 0.80 × plain",    $m{new}[0],    sub { $_[0] >= 0.80 }, "%.3f"],
                ["replay rps ≥ 1.0 × plain",  $m{replay}[0], sub { $_[0] >= 1.0 },  "%.3f"],
                ["nokey rps ≥ 0.97 × plain",  $m{nokey}[0],  sub { $_[0] >= 0.97 }, "%.3f"],
                (map { ["$_ p99 added < 1 ms", $m{$_}[1], sub { $_[0] < 1 }, "%+.3f ms"] } qw(new replay nokey)),
                ["zone-new rps ≥ 0.80 × plain", $m{"zone-new"}[0], sub { $_[0] >= 0.80 }, "%.3f"],
                ["zone-replay rps ≥ 1.0 × plain", $m{"zone-replay"}[0], sub { $_[0] >= 1.0 }, "%.3f"],
                ["new: 2 Redis commands per request",    $new_sent,    sub { abs($_[0] - 2) < 0.05 }, "%.2f"],
                ["replay: 1 Redis command per request",  $replay_sent, sub { abs($_[0] - 1) < 0.05 }, "%.2f"],
            );
            for my $t (@t) {
                my ($what, $v, $ok, $fmt) = @$t;
                printf "- %-38s %-12s %s\n", $what . ":", sprintf($fmt, $v), $ok->($v) ? "met" : "NOT met";
            }
        ' "$RESULTS" "${SENT[new]}" "${SENT[replay]}"
    fi
    if [ "$do_rss" = 1 ]; then
        echo
        echo "## Gateway worker memory (VmRSS)"
        echo
        echo "One worker, a fresh gateway, wrk -t$threads -c$conns, 40% new keys / 40% replays of $POOL stored keys / 20% without a key; VmRSS read from /proc/PID/status under load as the request count (stub_status) passes each checkpoint; bounded by $rss_requests requests and ${rss_seconds}s."
        echo
        echo "| checkpoint | requests done | VmRSS kB | change from the first checkpoint | seconds |"
        echo "|---|---:|---:|---:|---:|"
        first=""
        for l in "${RSS_LINES[@]}"; do
            IFS='|' read -r cp n rss t <<<"$l"
            if [ "$cp" = start ]; then echo "| start (idle) | 0 | $rss | | |"; continue; fi
            [ -n "$first" ] || first=$rss
            echo "| $cp | $n | $rss | $(perl -e 'printf "%+.1f %%", 100 * ($ARGV[1] - $ARGV[0]) / $ARGV[0]' "$first" "$rss") | $t |"
        done
        [ -z "$RSS_NOTE" ] || { echo; echo "Stopped early: $RSS_NOTE."; }
    fi
    if [ "$ERRORS" -ne 0 ]; then
        echo
        echo "**$ERRORS requests failed (non-2xx or socket errors); see the wrk logs.**"
    fi
    echo
    if [ ${#LOG_FINDINGS[@]} -eq 0 ]; then
        echo "Gateway error logs (level warn): empty."
    else
        echo "Gateway error logs (level warn):"
        for l in "${LOG_FINDINGS[@]}"; do echo "- $l"; done
    fi
    echo
    echo "## Commands"
    echo
    echo '```sh'
    echo "scripts/bench.sh$( [ "$quick" = 1 ] && printf ' --quick')$( [ "$rss_only" = 1 ] && printf ' --rss')  # rounds=$rounds duration=${duration}s rss_seconds=$rss_seconds"
    echo "${redis_cmd[*]}" | sed "s|$tmp|\$TMP|g; s|--save  |--save '' |; s|$REDIS_PORT|REDIS_PORT|"
    echo "$NGINX_BIN -p \$TMP/upstream/ -c \$TMP/upstream/nginx.conf -g 'daemon off;'"
    echo "$NGINX_BIN -p \$TMP/gateway/ -c \$TMP/gateway/nginx.conf -g 'daemon off;'"
    echo "export BENCH_BODY='$BODY' BENCH_REPLAY_KEY=<the key stored beforehand> BENCH_POOL=$POOL"
    for f in "${WRK_FORMS[@]}"; do
        modes=$(echo ${WRK_MODES[$f]} | tr ' ' ',')
        echo "# ${f%%: *}"
        echo "BENCH_MODE={$modes} ${f#*: }"
    done
    echo '```'
    echo
    echo "Each \`new\` key is BENCH_RUN-thread-random-counter, with BENCH_RUN unique to every wrk run, so keys never repeat."
    echo
    echo "<details><summary>upstream nginx.conf</summary>"
    echo
    echo '```nginx'
    sed "s|$tmp|\$TMP|g" "$tmp/upstream/nginx.conf"
    echo '```'
    echo "</details>"
    echo
    gw_conf="$tmp/gateway/nginx.conf"
    [ -f "$gw_conf" ] || gw_conf="$tmp/rss-gateway/nginx.conf"
    echo "<details><summary>gateway nginx.conf</summary>"
    echo
    echo '```nginx'
    sed "s|$tmp|\$TMP|g" "$gw_conf"
    echo '```'
    echo "</details>"
} >"$report"

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
[ "$ERRORS" -eq 0 ] || exit 1
