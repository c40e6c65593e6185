# bench-servers.sh — the servers of scripts/bench.sh, sourced by it: the
# configurations of the upstream nginx and of the gateways (the module), the
# gateways' start and stop, and the requests that check a cell answers what
# it should. Redis (plain, TLS, the clusters) comes from the test suite's
# fixtures (start_fixtures in bench-lib.sh); it uses bench.sh's variables
# ($tmp, the ports, the cells).

rcli() { "$REDIS_CLI" -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

redis_port_of() {  # redis_port_of CELL: the port of the redis-server whose keys the cell writes
    case "$1" in
    new-s[0-9]* | replay-s[0-9]*) echo "${STORE_PORT[${1##*-s}]}" ;;
    *) echo "$REDIS_PORT" ;;
    esac
}

# server_label PORT: what the server says it is ("Redis 7.0.15", "Valkey
# 9.1.2"); server_conditional PORT: 1 when it runs SET ... IFEQ, by the
# module's rule (module/redis/info.cpp: Valkey 8.1, Redis 8.4), else 0.
server_info() { "$REDIS_CLI" -h 127.0.0.1 -p "$1" INFO server | tr -d '\r'; }
server_label() {
    server_info "$1" | perl -ne '$n = $1 if /^server_name:(\S+)/; $v = $1 if /^valkey_version:(\S+)/; $r = $1 if /^redis_version:(\S+)/;
        END { print $n eq "valkey" ? "Valkey $v" : "Redis $r" }'
}
server_conditional() {
    server_info "$1" | perl -ne '$n = $1 if /^server_name:(\S+)/; $v = $1 if /^valkey_version:(\d+\.\d+)/; $r = $1 if /^redis_version:(\d+\.\d+)/;
        END { my ($maj, $min) = split /\./, ($n eq "valkey" ? $v : $r) // "0.0";
              print +($maj * 1000 + $min >= ($n eq "valkey" ? 8001 : 8004)) && (!$n || $n eq "valkey") ? 1 : 0 }'
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
            idempotency_redis_ssl_trusted_certificate $tmp/ca.pem;
            proxy_pass http://backend;
        }
$(growth_locations)
$(for n in ${!STORE_PORT[@]}; do
    printf '        location /idem-s%s/ { idempotency on; idempotency_redis 127.0.0.1:%s; proxy_pass http://backend; }\n' \
        "$n" "${STORE_PORT[$n]}"
done)
$(for n in ${!CLUSTER_PORTS[@]}; do
    printf '        location /cluster%s/ { idempotency on; idempotency_redis_cluster 127.0.0.1:%s; proxy_pass http://backend; }\n' \
        "$n" "${CLUSTER_PORTS[$n]%% *}"
done)
        location = /bench-status { stub_status; }
    }
}
EOF
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
        LOG_FINDINGS+=("$1: $n lines at warn or above, first: $(grep '\[\(warn\|error\|crit\|alert\|emerg\)\]' "$log" | grep -v 'is buffered to a temporary file' | sed -n 1p)")
        note "the $1 error log has $n lines at warn or above"
    fi
}
