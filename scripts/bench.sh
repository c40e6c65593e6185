#!/usr/bin/env bash
# bench.sh — the benchmark of ngx_http_idempotency_module (what `make bench` runs).
#
#   scripts/bench.sh [--quick] [--growth] [--cells "CELL ..."] [--rss] [--no-rss]
#                    [--rounds N] [--duration S] [--growth-rounds N]
#                    [--growth-duration S] [--connections N] [--threads N]
#                    [--rss-seconds S] [--rss-requests N] [--keep]
#
# Everything runs on 127.0.0.1, on free ports, in a temp dir, and only the
# processes started here are stopped (by pid):
#   upstream  nginx without the module, worker_processes 1: `return 201` with
#             about 200 bytes of JSON, keep-alive; static files of 200 B,
#             16 KB and 256 KB for the response size cells;
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
#   plain-pinned, new-pinned, replay-pinned
#           plain, new and replay with redis-server on a CPU of its own
#           (taskset -c 1) and wrk, the gateway and the upstream on the other
#           (taskset -c 0): a deployment with Redis elsewhere (skipped with a
#           note on a machine of one CPU)
# --growth adds a second set of rounds (scripts/bench-growth.sh): response
# sizes, request body sizes, 512 connections, 2 gateway workers, and 200
# duplicates waiting for one slow original (Redis commands per waiter).
# --cells "plain new ..." runs only the cells named (of either set).
# Reported per cell, as the median over the rounds with the min–max beside
# it: CPU time per request of the gateway worker, the upstream worker,
# redis-server and the whole machine (the primary table; with the share the
# hypervisor stole, which makes figures noisy); requests/s and p50 and p99
# latency; ratios only to a cell of the same run (plain, or plain-pinned for
# the pinned cells). Then Redis commands per request (INFO commandstats /
# INFO stats over round 1, and a MONITOR sample for the commands the gateway
# itself sends), and the worker's VmRSS over about 1,000,000 mixed requests
# (bounded by count and time). The tables go to stdout and to
# build/bench/results.md. The issue's targets are printed for information:
# the exit status is non-zero only when the benchmark could not run (a
# process did not start, requests failed).
#
# Default: 5 rounds of 5 s per cell plus a memory run of at most 60 s
# (about 7 minutes); --growth: 3 rounds of 2 s of its 27 cells (about 3.5
# minutes more).
# --quick: 3 rounds of 2 s (growth: 2 of 1 s) and a 20 s memory run.
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

ORIG_ARGS=("$@")
rounds=5 duration=5 warmup=2 conns=32 threads=1 growth=0 growth_rounds=3 growth_duration=2 only_cells=""
do_cells=1 do_rss=1 rss_seconds=60 rss_requests=1000000 keep=0 quick=0 rss_only=0
usage() { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) quick=1; rounds=3; duration=2; warmup=1; rss_seconds=20; growth_rounds=2; growth_duration=1 ;;
    --growth) growth=1 ;;
    --cells) only_cells=${2:?}; shift ;;
    --growth-rounds) growth_rounds=${2:?}; shift ;;
    --growth-duration) growth_duration=${2:?}; shift ;;
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
for n in "$rounds" "$duration" "$growth_rounds" "$growth_duration" "$conns" "$threads" "$rss_seconds" "$rss_requests"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: not a positive whole number: $n" >&2; exit 2; }
done

die() { echo "bench.sh: $*" >&2; exit 1; }
ARGS_GIVEN=""
[ ${#ORIG_ARGS[@]} -eq 0 ] || ARGS_GIVEN=$(printf ' %q' "${ORIG_ARGS[@]}")
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

read -r REDIS_PORT UP_PORT GW_PORT GW2_PORT RSS_PORT TLS_PLAIN_PORT TLS_PORT SLOW_PORT <<<"$(free_ports 8)"
declare -A GW_PORT_OF=([gateway]=$GW_PORT [gateway2]=$GW2_PORT [rss-gateway]=$RSS_PORT) GW_WORKERS_OF=()
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
for c in $only_cells; do [ -n "${CELL_MODE[$c]:-}" ] || die "--cells: no cell named $c"; done
mapfile -t CELLS < <(selected "${CELLS[@]}")
for c in $only_cells; do [[ " ${GROWTH_CELLS[*]} " == *" $c "* && " ${CELLS[*]} " != *" $c "* ]] && growth=1; done
if [ "$growth" = 1 ] && [ "$do_cells" = 1 ]; then mapfile -t GROWTH_CELLS < <(selected "${GROWTH_CELLS[@]}"); else GROWTH_CELLS=(); fi
[ ${#CELLS[@]} -gt 0 ] || [ ${#GROWTH_CELLS[@]} -gt 0 ] || do_cells=0

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
    client_max_body_size 2m;
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
        location /static/ { root $d; }
        location / {
            return 201 '{"id":"pay_\$request_id","object":"payment","amount":1000,"currency":"eur","status":"succeeded","customer":"cus_bench","description":"benchmark payment","created":1700000000,"livemode":false}';
        }
    }
}
EOF
}

write_gateway_conf() {  # write_gateway_conf DIR PORT WORKERS
    local d=$1 port=$2 workers=$3
    # With 2 workers a listening socket of each (reuseport): on one shared
    # socket wrk's 32 connections often all land on one worker, and the
    # 2-worker cells measured a single worker.
    local reuseport=; [ "$workers" -gt 1 ] && reuseport=" reuseport"
    cat >"$d/nginx.conf" <<EOF
# the gateway of scripts/bench.sh: the module, $workers worker(s)
load_module $MODULE;
worker_processes $workers;
error_log $d/error.log warn;
pid $d/nginx.pid;
events { worker_connections 4096; }
http {
$(nginx_common "$d")
    idempotency_redis 127.0.0.1:$REDIS_PORT;
    idempotency_zone zone=bench:1024m;
    idempotency_scope "";               # one caller: the load generator

    upstream backend {
        server 127.0.0.1:$UP_PORT;
        keepalive 32;
        keepalive_requests 100000000;
    }

    server {
        listen 127.0.0.1:$port backlog=4096$reuseport;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        client_body_buffer_size 128k;   # request bodies up to 64 KB in memory, 1 MB in a temp file

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
$(growth_locations)
$(for n in ${!CLUSTER_PORTS[@]}; do
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

post() {  # post PORT PATH [KEY [BODY_BYTES]]: the response head and body, to stdout
    local args=(-s -i --max-time 10 -X POST -H 'Content-Type: application/json') data=$tmp/body-${4:-default}
    if [ ! -f "$data" ]; then
        if [ -n "${4:-}" ]; then
            perl -e 'print q({"pad":"), "x" x ($ARGV[0] - 10), q("})' "$4" >"$data"   # as bench.lua builds it
        else
            printf '%s' "$BODY" >"$data"
        fi
    fi
    args+=(--data-binary "@$data")
    [ -n "${3:-}" ] && args+=(-H "Idempotency-Key: $3")
    curl "${args[@]}" "http://127.0.0.1:$1$2"
}

check_cell() {  # check_cell CELL: it answers what it should; a replay cell's key is stored
    local c=$1 port=${GW_PORT_OF[${CELL_GW[$1]}]} path=${CELL_PATH[$1]} body=${CELL_BODY[$1]} r
    case "${CELL_MODE[$c]}" in
    plain | nokey)
        r=$(post "$port" "$path" "" "$body") || die "$c: no answer"
        [[ "$r" == "HTTP/1.1 20"[01]* && "$r" != *Idempotent-Replayed* ]] || die "$c: expected 200 or 201, got: ${r%%$'\r'*}" ;;
    new)
        CHECKS=$((CHECKS + 1))
        r=$(post "$port" "$path" "$RUN_ID-check-$c-$CHECKS" "$body") || die "$c: no answer"
        [[ "$r" == "HTTP/1.1 20"[01]* && "$r" != *Idempotent-Replayed* ]] || die "$c: expected a fresh 200 or 201, got: ${r%%$'\r'*}" ;;
    replay)
        post "$port" "$path" "$(replay_key_of "$c")" "$body" >/dev/null || die "$c: no answer (storing the key)"
        r=$(post "$port" "$path" "$(replay_key_of "$c")" "$body") || die "$c: no answer"
        [[ "$r" == "HTTP/1.1 20"[01]* && "$r" == *"Idempotent-Replayed: true"* ]] || die "$c: expected a replay, got: ${r%%$'\r\n\r\n'*}" ;;
    esac
    RESPONSE_BYTES[$c]=$(printf '%s' "${r#*$'\r\n\r\n'}" | wc -c)
}
declare -A RESPONSE_BYTES=()
CHECKS=0

# ------------------------------------------------------------------ wrk

# wrk_start PURPOSE CELL SECONDS LOG [CONNS]: wrk in the background, with
# the cell's settings in bench.lua's environment, under `taskset -c 0` for a
# pinned cell (WRK_PID: the `timeout` around it, which passes INT on to wrk);
# wrk_finish: waits for it and sets $wrk_line (the BENCH line of bench.lua).
# run_wrk: both.
declare -a WRK_FORMS=()    # the distinct command lines, for the report
declare -A WRK_CELLS=()
wrk_start() {
    local purpose=$1 cell=$2 secs=$3 log=$4 c=${5:-${CELL_CONNS[$2]}} t=$threads pin=()
    [ "$c" -lt "$t" ] && t=$c
    [ "${CELL_PIN[$cell]}" = 1 ] && pin=(taskset -c 0)
    local run="$RUN_ID-$((++WRK_RUNS))" port=${GW_PORT_OF[${CELL_GW[$cell]}]}
    local cmd=(env BENCH_MODE="${CELL_MODE[$cell]}" BENCH_PATH="${CELL_PATH[$cell]}" BENCH_RUN="$run"
               BENCH_REPLAY_KEY="$(replay_key_of "$cell")" BENCH_POOL="$POOL")
    [ -n "${CELL_BODY[$cell]}" ] && cmd+=(BENCH_BODY_BYTES="${CELL_BODY[$cell]}")
    cmd+=("${pin[@]}" "$WRK" -t"$t" -c"$c" -d"${secs}s" --latency --timeout 5s -s "$LUA" "http://127.0.0.1:$port/")
    local form="$purpose: ${pin[*]}${pin:+ }wrk -t$t -c$c -d${secs}s --latency --timeout 5s"
    form+=" -s scripts/bench.lua http://127.0.0.1:PORT/"
    if [ -z "${WRK_CELLS[$form]+x}" ]; then WRK_FORMS+=("$form"); WRK_CELLS[$form]=""; fi
    [[ " ${WRK_CELLS[$form]} " == *" $cell "* ]] || WRK_CELLS[$form]+=" $cell"
    start_bg wrk "$log" timeout --signal=INT --kill-after=5 $((secs + 30)) "${cmd[@]}"
    WRK_PID=$started_pid WRK_LOG=$log WRK_MODE=$cell
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
    run_wrk "MONITOR sample (redis-cli monitor running)" "$cell" 1 "$tmp/wrk-monitor-$cell.log" 4
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

start_redis
note "redis-server pid $REDIS_PID on 127.0.0.1:$REDIS_PORT"
start_redis_tls
note "redis-server (TLS) pid $REDIS_TLS_PID on 127.0.0.1:$TLS_PORT (TLS), $TLS_PLAIN_PORT"
if [[ " ${CELLS[*]} " == *" cluster-"* ]]; then
    start_clusters
    for n in 1 2 3; do note "Redis Cluster of $n master(s): ports ${CLUSTER_PORTS[$n]}, pids ${CLUSTER_PIDS[$n]}"; done
fi
mkdir -p "$tmp/upstream"
write_upstream_conf "$tmp/upstream"
write_static_files "$tmp/upstream"
start_nginx upstream "$tmp/upstream"
UP_PID=$started_pid
wait_for "the upstream nginx" "$UP_PID" curl -sf -o /dev/null -X POST "http://127.0.0.1:$UP_PORT/" -w '%{http_code}' --max-time 2
UP_WORKER=$(workers_of "$UP_PID" | head -1)
note "upstream nginx master $UP_PID on 127.0.0.1:$UP_PORT, worker $UP_WORKER"

declare -A GW_PID_OF=()
start_gateway() {  # start_gateway NAME [WORKERS]: sets GW_PID, GW_WORKER (the first), GW_WORKERS_OF[NAME]
    local d="$tmp/$1" port=${GW_PORT_OF[$1]} n=${2:-1} w
    mkdir -p "$d"
    write_gateway_conf "$d" "$port" "$n"
    start_nginx "$1" "$d"
    GW_PID=$started_pid
    GW_PID_OF[$1]=$GW_PID
    wait_for "the $1 nginx" "$GW_PID" curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$port/bench-status"
    for _ in $(seq 50); do
        w=$(workers_of "$GW_PID" | tr '\n' ' ')
        [ "$(wc -w <<<"$w")" -ge "$n" ] && break
        sleep 0.1
    done
    GW_WORKERS_OF[$1]=${w% }
    GW_WORKER=${w%% *}
    [ -n "$GW_WORKER" ] || die "the $1 nginx has no worker"
    note "$1 nginx master $GW_PID on 127.0.0.1:$port, worker(s) ${GW_WORKERS_OF[$1]}"
}

LOG_FINDINGS=() TEMP_FILE_LINES=()
stop_gateway() {  # stop_gateway NAME: stops it and keeps what its error log says (warn and above)
    stop_pid "${GW_PID_OF[$1]}" TERM
    local log="$tmp/$1/error.log" n temp
    # the 1 MB request bodies go through a temp file by design: counted, not a finding
    temp=$(grep -c 'is buffered to a temporary file' "$log" 2>/dev/null || true)
    [ "${temp:-0}" -eq 0 ] || TEMP_FILE_LINES+=("$1: $temp")
    n=$(grep '\[\(warn\|error\|crit\|alert\|emerg\)\]' "$log" 2>/dev/null | grep -vc 'is buffered to a temporary file' || true)
    if [ "${n:-0}" -gt 0 ]; then
        LOG_FINDINGS+=("$1: $n lines at warn or above, first: $(grep '\[\(warn\|error\|crit\|alert\|emerg\)\]' "$log" | grep -vm1 'is buffered to a temporary file')")
        note "the $1 error log has $n lines at warn or above"
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
gateway_ns() {  # gateway_ns CELL: CPU time of the workers of the CELL's gateway
    local pid total=0
    for pid in ${GW_WORKERS_OF[${CELL_GW[$1]}]}; do total=$((total + $(proc_ns "$pid"))); done
    echo "$total"
}
cpu_snap() {  # cpu_snap CELL
    echo "$(gateway_ns "$1") $(proc_ns "$UP_WORKER") $(redis_ns "$1")" \
         "$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $5 + $6, $9 }' /proc/stat)"
}

vm_rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo '?'; }

RESULTS="$tmp/results.tsv"
: >"$RESULTS"
RSS_LINES=()
RSS_NOTE=""

# ------------------------------------------------------------------ the cells

# pin on|off: for a pinned cell, redis-server (all its threads) on CPU 1 and
# the gateway, the upstream (masters and workers) on CPU 0, where wrk is
# started too; off: back on every CPU.
pin() {
    local main=0 redis=1 pid
    [ "$1" = on ] || { main="0-$(($(nproc) - 1))"; redis=$main; }
    taskset -a -p -c "$redis" "$REDIS_PID" >/dev/null || die "taskset failed on redis-server $REDIS_PID"
    for pid in "${GW_PID_OF[gateway]}" ${GW_WORKERS_OF[gateway]} "$UP_PID" "$UP_WORKER"; do
        taskset -p -c "$main" "$pid" >/dev/null || die "taskset failed on nginx $pid"
    done
}

# One cell run of the rounds: wrk for SECONDS with the CPU times of the
# processes read before and after; one line of $RESULTS.
measure_cell() {  # measure_cell PHASE ROUND CELL SECONDS
    local phase=$1 r=$2 cell=$3 secs=$4 cpu_before cpu_after req dur rps cpu
    [ "${CELL_PIN[$cell]}" = 1 ] && pin on
    cpu_before=$(cpu_snap "$cell")
    run_wrk "$phase rounds" "$cell" "$secs" "$tmp/wrk-$phase-r$r-$cell.log"
    cpu_after=$(cpu_snap "$cell")
    [ "${CELL_PIN[$cell]}" = 1 ] && pin off
    check_errors "$phase round $r $cell"
    req=$(field requests) dur=$(field duration_us)
    rps=$(perl -e 'printf "%.0f", $ARGV[0] / ($ARGV[1] / 1e6)' "$req" "$dur")
    cpu=$(perl -e '
        my ($n, @v) = @ARGV;
        my $CLK_TCK = $ENV{CLK_TCK} || 100;
        my @d = map { $v[$_ + 6] - $v[$_] } 0 .. 5;
        my $all = ($d[3] + $d[4] + $d[5]) || 1;
        printf "%.1f\t%.1f\t%.1f\t%.0f\t%.1f\t%.0f", $d[0] / 1e3 / $n, $d[1] / 1e3 / $n, $d[2] / 1e3 / $n,
            100 * $d[3] / $all, $d[3] * 1e6 / $CLK_TCK / $n, 100 * $d[5] / $all;' "$req" $cpu_before $cpu_after)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$phase" "$r" "$cell" "$rps" "$(field p50_us)" "$(field p99_us)" \
        "$req" "$cpu" >>"$RESULTS"
    round_line+=" $cell $rps rps (machine $(cut -f5 <<<"$cpu") µs, steal $(cut -f6 <<<"$cpu")%);"
}

warm_up() {  # warm_up SECONDS CELL...: every cell answers, and runs once
    local secs=$1 cell
    shift
    for cell; do check_cell "$cell"; done
    for cell; do run_wrk "warm-up" "$cell" "$secs" "$tmp/wrk-warmup-$cell.log"; done
    note "checked and warmed up (${secs}s per cell): $*"
}

# run_rounds PHASE ROUNDS SECONDS CELL...: the cells alternately, the order
# rotating each round. Round 1 of new and replay in the default phase also
# counts Redis's commands per request (STATS).
declare -A STATS=()
run_rounds() {
    local phase=$1 rounds=$2 secs=$3 r i cell req_before req_after order
    shift 3
    local cells=("$@")
    for ((r = 1; r <= rounds; r++)); do
        order=()
        for ((i = 0; i < ${#cells[@]}; i++)); do order+=("${cells[$(((i + r - 1) % ${#cells[@]}))]}"); done
        round_line="$phase round $r/$rounds:"
        for cell in "${order[@]}"; do
            if [ "$phase" = default ] && [ "$r" = 1 ] && [[ "$cell" == new || "$cell" == replay ]]; then
                redis_snapshot >"$tmp/redis-before-$cell"
                req_before=$(stub_requests "$GW_PORT")
                measure_cell "$phase" "$r" "$cell" "$secs"
                sleep 0.3   # requests still in flight when wrk stopped finish their Redis work
                req_after=$(stub_requests "$GW_PORT")
                redis_snapshot >"$tmp/redis-after-$cell"
                STATS[$cell]=$(redis_per_request "$tmp/redis-before-$cell" "$tmp/redis-after-$cell" \
                               $((req_after - req_before - 1)))
            else
                measure_cell "$phase" "$r" "$cell" "$secs"
            fi
        done
        note "${round_line%;}"
    done
}

if [ "$do_cells" = 1 ]; then
    start_gateway gateway 1
    if [ ${#CELLS[@]} -gt 0 ]; then
        warm_up "$warmup" "${CELLS[@]}"
        # the commands the gateway sends, per cell (MONITOR sample, outside the rounds)
        declare -A SENT=() SENT_BREAKDOWN=()
        for cell in $(selected new replay nokey); do
            monitor_sample "$cell"
            IFS='|' read -r n per breakdown <<<"$MON"
            SENT[$cell]=$per
            SENT_BREAKDOWN[$cell]="$breakdown"
            note "MONITOR sample $cell: $n requests, commands sent by the gateway per request $per ($breakdown)"
        done
        run_rounds default "$rounds" "$duration" "${CELLS[@]}"
    fi
    [ ${#GROWTH_CELLS[@]} -eq 0 ] || run_growth
    stop_gateway gateway
fi

# ------------------------------------------------------------------ memory

if [ "$do_rss" = 1 ]; then
    start_gateway rss-gateway
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
    wrk_start "memory run (stopped by the poller at the request count)" mix "$rss_seconds" "$tmp/wrk-rss.log"
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
    stop_gateway rss-gateway
fi

# ------------------------------------------------------------------ report

report="$tmp/report.md"
report_table() {  # report_table TABLE PHASE CELL...: a table of bench-report.pl, each cell against its reference
    local table=$1 phase=$2 c
    shift 2
    perl "$repo/scripts/bench-report.pl" "$table" "$RESULTS" "$phase" $(for c; do printf '%s@%s ' "$c" "${CELL_REF[$c]}"; done)
}
{
    echo "# nginx-idempotency benchmark"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "- machine: $(nproc) CPUs ($CPU_MODEL), $(uname -sr), $(awk '/MemTotal/ { printf "%.1f GB", $2 / 1048576 }' /proc/meminfo)"
    echo "- nginx: $NGINX_VERSION ($NGINX_BIN); redis: $REDIS_VERSION; wrk: $WRK_VERSION"
    echo "- module: build/ngx_http_idempotency_module.so, commit $GIT_REV, built $(date -u -r "$MODULE" '+%Y-%m-%d %H:%M:%S UTC'), sha256 $(sha256sum "$MODULE" | cut -c1-16)"
    echo "- everything on 127.0.0.1 on the same machine: wrk, the gateway (1 worker), the upstream nginx (1 worker), redis-server"
    if [ "$do_cells" = 1 ] && [ ${#CELLS[@]} -gt 0 ]; then
        echo "- $rounds rounds, ${duration}s per cell per round (order rotating), ${warmup}s warm-up per cell; every figure is the median over the rounds with the min–max over the rounds beside it"
        echo "- request: POST, ${#BODY}-byte JSON body; upstream answer: 201, ${RESPONSE_BYTES[plain]:-?}-byte JSON body"
        echo
        echo "## CPU time per request"
        echo
        echo "µs of CPU per request, from /proc/PID/schedstat (the whole machine from /proc/stat: wrk and the kernel included); all processes share the same $(nproc) CPUs, except in the *-pinned cells, where redis-server has CPU 1 to itself and wrk, the gateway and the upstream share CPU 0 (a deployment with Redis elsewhere). For the cluster cells the redis-server column sums the cluster's masters. \"machine × ref\": the whole machine's µs per request against the reference cell's, in these same rounds."
        echo
        report_table cpu default "${CELLS[@]}"
        [ -z "$PIN_NOTE" ] || { echo; echo "$PIN_NOTE."; }
        echo
        echo "## Throughput and latency"
        echo
        report_table throughput default "${CELLS[@]}"
        echo
        echo "Per round (requests/s):"
        echo
        echo '```'
        report_table rounds default "${CELLS[@]}"
        echo '```'
        report_table steal default "${CELLS[@]}"
        echo
        echo "## Redis commands per request"
        echo
        echo "| cell | sent by the gateway (MONITOR sample) | INFO commandstats, round 1: calls per request × Redis CPU µs per call (includes the commands Lua scripts run inside Redis; EVALSHA's time includes theirs) | total_commands_processed, round 1 | Redis socket reads (total_reads_processed), round 1 |"
        echo "|---|---|---|---|---|"
        for cell in $(selected new replay nokey); do
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
        report_table ratio default "${CELLS[@]}" | perl -e '
            my ($new_sent, $replay_sent) = @ARGV;
            my %m;
            while (<STDIN>) { my ($c, $ratio, $added) = split; $m{$c} = [$ratio, $added] }
            my @t = (
                ["new rps ≥ 0.80 × plain",    $m{new}[0],    sub { $_[0] >= 0.80 }, "%.3f"],
                ["replay rps ≥ 1.0 × plain",  $m{replay}[0], sub { $_[0] >= 1.0 },  "%.3f"],
                ["nokey rps ≥ 0.97 × plain",  $m{nokey}[0],  sub { $_[0] >= 0.97 }, "%.3f"],
                (map { ["$_ p99 added < 1 ms", $m{$_}[1], sub { $_[0] < 1 }, "%+.3f ms"] } qw(new replay nokey)),
                ["zone-new rps ≥ 0.80 × plain", $m{"zone-new"}[0], sub { $_[0] >= 0.80 }, "%.3f"],
                ["zone-replay rps ≥ 1.0 × plain", $m{"zone-replay"}[0], sub { $_[0] >= 1.0 }, "%.3f"],
                ["new-pinned rps ≥ 0.80 × plain-pinned", $m{"new-pinned"}[0], sub { $_[0] >= 0.80 }, "%.3f"],
                ["new: 2 Redis commands per request",    $new_sent,    sub { abs($_[0] - 2) < 0.05 }, "%.2f"],
                ["replay: 1 Redis command per request",  $replay_sent, sub { abs($_[0] - 1) < 0.05 }, "%.2f"],
            );
            for my $t (@t) {
                my ($what, $v, $ok, $fmt) = @$t;
                next unless defined $v && length $v;
                printf "- %-38s %-12s %s\n", $what . ":", sprintf($fmt, $v), $ok->($v) ? "met" : "NOT met";
            }
        ' "${SENT[new]:-}" "${SENT[replay]:-}"
    fi
    [ ${#GROWTH_CELLS[@]} -eq 0 ] || growth_report
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
        echo "Gateway error logs (level warn): empty$([ ${#TEMP_FILE_LINES[@]} -eq 0 ] || echo " but for the warnings that a body is buffered to a temporary file (the large request bodies; ${TEMP_FILE_LINES[*]})")."
    else
        echo "Gateway error logs (level warn):"
        for l in "${LOG_FINDINGS[@]}"; do echo "- $l"; done
    fi
    echo
    echo "## Commands"
    echo
    echo '```sh'
    echo "scripts/bench.sh$ARGS_GIVEN  # rounds=$rounds duration=${duration}s growth: rounds=$growth_rounds duration=${growth_duration}s; rss_seconds=$rss_seconds"
    echo "${redis_cmd[*]}" | sed "s|$tmp|\$TMP|g; s|--save  |--save '' |; s|$REDIS_PORT|REDIS_PORT|"
    echo "$NGINX_BIN -p \$TMP/upstream/ -c \$TMP/upstream/nginx.conf -g 'daemon off;'"
    echo "$NGINX_BIN -p \$TMP/gateway/ -c \$TMP/gateway/nginx.conf -g 'daemon off;'"
    [ ${#GROWTH_CELLS[@]} -eq 0 ] || echo "$NGINX_BIN -p \$TMP/gateway2/ -c \$TMP/gateway2/nginx.conf -g 'daemon off;'   # worker_processes 2"
    echo "export BENCH_BODY='$BODY' BENCH_POOL=$POOL"
    for f in "${WRK_FORMS[@]}"; do
        echo "# ${f%%: *}, cells:${WRK_CELLS[$f]}"
        echo "BENCH_MODE=<mode> BENCH_PATH=<path> [BENCH_BODY_BYTES=<bytes>] BENCH_REPLAY_KEY=<the cell's stored key> BENCH_RUN=<unique per run> ${f#*: }"
    done
    echo '```'
    echo
    echo "Each \`new\` key is BENCH_RUN-thread-random-counter, with BENCH_RUN unique to every wrk run, so keys never repeat. The cells:"
    echo
    echo "| cell | BENCH_MODE | BENCH_PATH | BENCH_BODY_BYTES | wrk -c | gateway | pinned | ratios against |"
    echo "|---|---|---|---:|---:|---|---|---|"
    listed=()
    for c in $([ "$do_cells" = 1 ] && echo "${CELLS[@]}" "${GROWTH_CELLS[@]}") $([ "$do_rss" = 1 ] && echo mix); do
        [[ " ${listed[*]:-} " == *" $c "* ]] && continue
        listed+=("$c")
        echo "| $c | ${CELL_MODE[$c]} | ${CELL_PATH[$c]} | ${CELL_BODY[$c]:-${#BODY}} | ${CELL_CONNS[$c]} | ${CELL_GW[$c]} | $([ "${CELL_PIN[$c]}" = 1 ] && echo 'CPU 0; redis-server CPU 1' || echo no) | ${CELL_REF[$c]} |"
    done
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
