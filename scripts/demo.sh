#!/usr/bin/env bash
# The demo gateway: its own Redis, the demo payments upstream
# (scripts/upstream.pl) and nginx with the module, all on 127.0.0.1.
#   scripts/demo.sh start    (what `make run` calls; the module must be built)
#   scripts/demo.sh stop     (`make stop`)
# Everything lives in build/demo; processes are stopped by their pid files.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
dir="$repo/build/demo"
GATEWAY_PORT=${GATEWAY_PORT:-8080}
UPSTREAM_PORT=${UPSTREAM_PORT:-9000}
REDIS_PORT=${REDIS_PORT:-6390}
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
    stop >/dev/null
    for p in "$GATEWAY_PORT" "$UPSTREAM_PORT" "$REDIS_PORT"; do
        port_free "$p" || { echo "port $p on 127.0.0.1 is in use (set GATEWAY_PORT, UPSTREAM_PORT or REDIS_PORT)" >&2; exit 1; }
    done
    mkdir -p "$dir/logs" "$dir/tmp" "$dir/redis"

    redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save '' --appendonly no --dir "$dir/redis" \
        --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
    wait_for Redis redis-cli -p "$REDIS_PORT" ping

    nohup perl "$repo/scripts/upstream.pl" --listen "127.0.0.1:$UPSTREAM_PORT" --state-dir "$dir/upstream-state" \
        --pid-file "$dir/upstream.pid" > "$dir/upstream.log" 2>&1 &
    wait_for "the demo upstream" curl -sf "http://127.0.0.1:$UPSTREAM_PORT/_health"

    sed -e "s|@MODULE@|$repo/build/ngx_http_idempotency_module.so|" -e "s|@DIR@|$dir|g" \
        -e "s|@GATEWAY_PORT@|$GATEWAY_PORT|" -e "s|@UPSTREAM_PORT@|$UPSTREAM_PORT|" -e "s|@REDIS_PORT@|$REDIS_PORT|" \
        "$repo/scripts/demo-nginx.conf" > "$dir/nginx.conf"
    "$NGINX_BIN" -p "$dir" -c "$dir/nginx.conf" -t -q
    "$NGINX_BIN" -p "$dir" -c "$dir/nginx.conf"
    wait_for nginx curl -s -o /dev/null "http://127.0.0.1:$GATEWAY_PORT/"

    cat <<MSG
The demo gateway is up: http://127.0.0.1:$GATEWAY_PORT/v1/ -> demo payments upstream (127.0.0.1:$UPSTREAM_PORT)
Redis 127.0.0.1:$REDIS_PORT. Logs: $dir/logs/ (access log shows \$idempotency_status), upstream: $dir/upstream.log

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
