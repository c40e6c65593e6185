#!/usr/bin/env bash
# bench-pieces-retention.sh — what a store holds for responses kept in
# pieces, over time, once the traffic stops (a cell of `make bench`, through
# scripts/bench.sh; also runnable alone).
#
#   scripts/bench-pieces-retention.sh [--quick] [--no-docs]
#
# One nginx (the module, idempotency_ttl 60s, 64k pieces, not compressed),
# on Redis and then on a 64 MB zone: N responses of 300 KB stored under new
# keys, then what the store holds over what it held before, every 30 s for
# 150 s: Redis's used_memory and key count; the zone's pages in use
# (idempotency_zone_bytes on the metrics page). A zone frees expired
# records as claims pass (each frees up to two expired ones on its way),
# so 200 claims of one small key go before each of its readings. Per stored
# response; the table goes to stdout, build/bench/pieces-retention.md and
# docs/performance.md (block pieces-retention; not with --no-docs).
# --quick: 20 responses, else 60.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
NGINX_BIN=${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}
MODULE=${STRESS_MODULE:-$repo/build/ngx_http_idempotency_module.so}

source "$repo/scripts/bench-lib.sh"
bench_options "$@"
keys=$([ "$quick" = 1 ] && echo 20 || echo 60)
[ -f "$MODULE" ] || die "the module is missing: build it first (make module)"
bench_init pieces-retention
start_fixtures redis
free_ports 1
port=$FREE_PORTS
size=300000

redis() { redis-cli -p "$REDIS_PORT" "$@"; }
used() { redis info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p'; }
post() {  # post KEY [SIZE]: the status
    curl -s -o /dev/null -w '%{http_code}' --max-time 30 -X POST -H "Idempotency-Key: $1" --data x \
        "http://127.0.0.1:$port/keep/$1?size=${2:-$size}&binary=1"
}
zone_used() {  # the zone's bytes in use (its size less its free pages)
    curl -s "http://127.0.0.1:$port/metrics" | awk -F'} ' '
        /^idempotency_zone_bytes\{zone="keep",state="size"\}/ {size = $2}
        /^idempotency_zone_bytes\{zone="keep",state="free"\}/ {free = $2}
        END {print size - free}'
}

conf() {  # conf STORE-DIRECTIVES
    cat <<EOF
load_module $MODULE;
worker_processes 1;
error_log $tmp/gw/error.log warn;
pid $tmp/gw/nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    $1
    upstream backend { server 127.0.0.1:$UPSTREAM_PORT; keepalive 8; }
    server {
        listen 127.0.0.1:$port;
        location / {
            idempotency on;
            idempotency_scope "";
            idempotency_ttl 60s;
            idempotency_compress off;
            idempotency_max_response_size 8m;
            idempotency_piece_size 64k;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://backend;
        }
        location = /metrics { idempotency_metrics; }
    }
}
EOF
}

run_store() {  # run_store NAME STORE-DIRECTIVES: one row per reading
    local name=$1 before t
    rm -rf "$tmp/gw"; mkdir -p "$tmp/gw"
    conf "$2" >"$tmp/gw/nginx.conf"
    start_nginx "$name" "$tmp/gw"
    local ng=$started_pid
    wait_for "nginx ($name)" "$ng" curl -s -o /dev/null "http://127.0.0.1:$port/"
    redis flushall >/dev/null
    if [ "$name" = zone ]; then before=$(zone_used); else before=$(used); fi
    for i in $(seq "$keys"); do
        [ "$(post "$name-$i")" = 201 ] || die "$name: the response $i was not answered 201"
    done
    note "$name: $keys responses of $size bytes stored" >&2
    local start=$SECONDS
    for t in 0 30 60 90 120 150; do
        while [ $((SECONDS - start)) -lt "$t" ]; do sleep 1; done
        if [ "$name" = zone ]; then
            # 200 claims of one small key (replayed after the first): each
            # frees up to 2 expired records on its way, as traffic would
            for _ in $(seq 200); do post zone-tick 100 >/dev/null; done
            echo "| zone | $t s | $(( ($(zone_used) - before) / keys )) | — |"
        else
            echo "| Redis | $t s | $(( ($(used) - before) / keys )) | $(redis dbsize) |"
        fi
    done
    stop_pid "$ng" QUIT 10
}

out="$tmp/pieces-retention.md"
{
    echo "$keys responses of $size bytes (kept uncompressed, 5 pieces of 64 KB each), \`idempotency_ttl 60s\`, then nothing: what the store holds per stored response as time passes (0 s: right after the last one)."
    echo
    echo "| store | after the last | bytes per stored response | Redis keys |"
    echo "|---|---|---:|---:|"
    run_store redis "idempotency_redis 127.0.0.1:$REDIS_PORT;"
    run_store zone "idempotency_zone zone=keep:64m; idempotency_store zone=keep;"
} >"$out"
cat "$out"
mkdir -p "$repo/build/bench"
cp "$out" "$repo/build/bench/pieces-retention.md"
[ "$docs" = 1 ] && doc_block pieces-retention "$out" "\`scripts/bench-pieces-retention.sh\`"
exit 0
