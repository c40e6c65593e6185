#!/usr/bin/env bash
# The demo gateway: the demo payments upstream (scripts/upstream.pl) and
# nginx with the module, all on 127.0.0.1. The store is a shared memory zone
# in nginx (no Redis at all); DEMO_STORE=redis starts the demo's own Redis and
# uses it instead.
#   scripts/demo.sh start    (what `make run` calls; the module must be built)
#   DEMO_STORE=redis scripts/demo.sh start
#   scripts/demo.sh stop     (`make stop`)
# Everything lives in build/demo; processes are stopped by their pid files.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
dir="$repo/build/demo"
GATEWAY_PORT=${GATEWAY_PORT:-8080}
UPSTREAM_PORT=${UPSTREAM_PORT:-9000}
REDIS_PORT=${REDIS_PORT:-6390}
DEMO_STORE=${DEMO_STORE:-zone}
NGINX_BIN=${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}

stop_pid() {  # stop_pid NAME PIDFILE
    local pid
    [ -f "$2" ] || return 0
    pid=$(cat "$2")
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        echo "stopped $1 (pid $pid)"
    fi
    rm -f "$2"
}

port_free() {
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

wait_for() {  # wait_for WHAT COMMAND...: up to 10 s
    local what=$1; shift
    for _ in $(seq 100); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "$what did not come up; see $dir/*.log" >&2
    exit 1
}

stop() {
    stop_pid nginx "$dir/nginx.pid"
    stop_pid "demo upstream" "$dir/upstream.pid"
    stop_pid redis "$dir/redis.pid"
}

start() {
    [ -f "$repo/build/ngx_http_idempotency_module.so" ] || { echo "build the module first: make" >&2; exit 1; }
    case "$DEMO_STORE" in
    zone) ports="$GATEWAY_PORT $UPSTREAM_PORT"
          store="    idempotency_zone zone=demo:10m;
    idempotency_store zone=demo;"
          store_text="the shared memory zone \"demo\" (10 MB; no Redis)" ;;
    redis) ports="$GATEWAY_PORT $UPSTREAM_PORT $REDIS_PORT"
           store="    idempotency_redis 127.0.0.1:$REDIS_PORT;"
           store_text="Redis 127.0.0.1:$REDIS_PORT" ;;
    *) echo "DEMO_STORE must be zone or redis" >&2; exit 2 ;;
    esac
    stop >/dev/null
    for p in $ports; do
        port_free "$p" || { echo "port $p on 127.0.0.1 is in use (set GATEWAY_PORT, UPSTREAM_PORT or REDIS_PORT)" >&2; exit 1; }
    done
    mkdir -p "$dir/logs" "$dir/tmp"

    if [ "$DEMO_STORE" = redis ]; then
        mkdir -p "$dir/redis"
        redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save '' --appendonly no --dir "$dir/redis" \
            --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
        wait_for Redis redis-cli -p "$REDIS_PORT" ping
    fi

    nohup perl "$repo/scripts/upstream.pl" --listen "127.0.0.1:$UPSTREAM_PORT" --state-dir "$dir/upstream-state" \
        --pid-file "$dir/upstream.pid" > "$dir/upstream.log" 2>&1 &
    wait_for "the demo upstream" curl -sf "http://127.0.0.1:$UPSTREAM_PORT/_health"

    STORE="$store" perl -pe 's/^\@STORE\@$/$ENV{STORE}/' "$repo/scripts/demo-nginx.conf" \
        | sed -e "s|@MODULE@|$repo/build/ngx_http_idempotency_module.so|" -e "s|@DIR@|$dir|g" \
              -e "s|@GATEWAY_PORT@|$GATEWAY_PORT|" -e "s|@UPSTREAM_PORT@|$UPSTREAM_PORT|" > "$dir/nginx.conf"
    "$NGINX_BIN" -p "$dir" -c "$dir/nginx.conf" -t -q
    "$NGINX_BIN" -p "$dir" -c "$dir/nginx.conf"
    wait_for nginx curl -s -o /dev/null "http://127.0.0.1:$GATEWAY_PORT/"

    cat <<MSG
The demo gateway is up: http://127.0.0.1:$GATEWAY_PORT/v1/ -> demo payments upstream (127.0.0.1:$UPSTREAM_PORT)
Store: $store_text. Logs: $dir/logs/ (access log shows \$idempotency_status), upstream: $dir/upstream.log

  curl -i -X POST -H 'Idempotency-Key: k1' -d 'amount=100' http://127.0.0.1:$GATEWAY_PORT/v1/payments
  curl -i -X POST -H 'Idempotency-Key: k1' -d 'amount=100' http://127.0.0.1:$GATEWAY_PORT/v1/payments   # replay
  grep -c execution $dir/upstream.log                                                   # executions

Stop it with: make stop
MSG
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
