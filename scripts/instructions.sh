#!/usr/bin/env bash
# Instructions per request, counted by valgrind's callgrind: repeatable for
# the same binary and inputs, whatever else the machine is doing.
# For each cell (plain, new, replay, nokey) the gateway runs under callgrind
# for N1 and then N2 sequential keep-alive requests; (Ir(N2) - Ir(N1)) /
# (N2 - N1) is the cost of one request with start-up and shutdown cancelled
# out. The module's own work is a cell's figure minus plain's.
#   scripts/instructions.sh            (make instructions)
#   PROFILE_DIR=/tmp/p scripts/instructions.sh   also keeps each callgrind
#                                      profile there, for callgrind_annotate
set -euo pipefail
shopt -s inherit_errexit

repo=$(cd "$(dirname "$0")/.." && pwd)
NGINX_BIN=${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}
N1=${N1:-200}
N2=${N2:-1200}
dir=$(mktemp -d /tmp/idem-instructions.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    [ -f "$dir/up/nginx.pid" ] && kill "$(cat "$dir/up/nginx.pid")" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

free_port() { perl -MIO::Socket::INET -e 'print IO::Socket::INET->new(Listen=>1,LocalAddr=>"127.0.0.1:0")->sockport'; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 never opened" >&2; exit 1; }

redis_port=$(free_port); up_port=$(free_port); gw_port=$(free_port)
redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no --dir "$dir" > "$dir/redis.log" 2>&1 &
pids+=($!)
wait_port "$redis_port"

# the upstream: plain nginx answering 201 with ~200 bytes of JSON
mkdir -p "$dir/up/logs"
cat > "$dir/up/nginx.conf" <<CONF
worker_processes 1; error_log $dir/up/logs/error.log; pid $dir/up/nginx.pid;
events {}
http { access_log off; client_body_temp_path $dir/up/b; proxy_temp_path $dir/up/p; fastcgi_temp_path $dir/up/f; uwsgi_temp_path $dir/up/u; scgi_temp_path $dir/up/s;
  server { listen 127.0.0.1:$up_port; default_type application/json;
    location /static/ { root $dir/up; }
    location /v1/big { proxy_method GET; proxy_pass http://127.0.0.1:$up_port/static/big.json; }
    location / { return 201 '{"id":"pay_0123456789abcdef","object":"payment","amount":100,"currency":"eur","status":"succeeded","created":1700000000,"description":"benchmark payment","metadata":{"order":"42"},"livemode":false}'; } } }
CONF
"$NGINX_BIN" -p "$dir/up" -c "$dir/up/nginx.conf"
wait_port "$up_port"

gateway_conf() {  # gateway_conf CELL
    local on=on; [ "$1" = plain ] && on=off
    mkdir -p "$dir/gw/logs"
    cat > "$dir/gw/nginx.conf" <<CONF
load_module $repo/build/ngx_http_idempotency_module.so;
daemon off; master_process off; worker_processes 1;
error_log $dir/gw/logs/error.log; pid $dir/gw/nginx.pid;
events {}
http { access_log off; client_body_temp_path $dir/gw/b; proxy_temp_path $dir/gw/p; fastcgi_temp_path $dir/gw/f; uwsgi_temp_path $dir/gw/u; scgi_temp_path $dir/gw/s;
  idempotency_redis 127.0.0.1:$redis_port;
  upstream backend { server 127.0.0.1:$up_port; keepalive 8; }
  keepalive_requests 100000;
  server { listen 127.0.0.1:$gw_port;
    location / { idempotency $on; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_pass http://backend; } } }
CONF
}

# N sequential POSTs on one keep-alive connection; keys per cell
drive() {  # drive CELL N
    perl -MIO::Socket::INET -e '
        my ($port, $cell, $n, $tag, $path) = @ARGV;
        alarm 120;  # a gateway that stops answering ends the run
        my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port") or die "connect: $!";
        for my $i (1 .. $n) {
            my $key = $cell eq "new" ? "Idempotency-Key: $tag-$i\r\n"
                    : $cell eq "replay" ? "Idempotency-Key: the-one$path\r\n" : "";
            print $s "POST $path HTTP/1.1\r\nHost: gw\r\n${key}Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 10\r\n\r\namount=100";
            my $head = "";
            while ($head !~ /\r\n\r\n/) { sysread($s, $head, 1, length $head) or die "closed" }
            my ($len) = $head =~ /Content-Length: (\d+)/i;
            my $body = ""; while (length $body < $len) { sysread($s, $body, $len - length $body, length $body) or die "closed" }
            $head =~ m{^HTTP/1.1 20[01]} or die "unexpected answer: $head";
        }' "$gw_port" "$1" "$2" "$RANDOM$RANDOM" "${PATH_URI:-/v1/payments}"
}

count() {  # count CELL N -> total instructions of the gateway process
    gateway_conf "$1"
    valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" "$NGINX_BIN" -p "$dir/gw" -c "$dir/gw/nginx.conf" \
        > "$dir/cg.log" 2>&1 &
    local vg=$!
    pids+=("$vg")
    wait_port "$gw_port"
    drive "$1" "$2"
    kill -QUIT "$vg"; wait "$vg" || true
    [ -n "${PROFILE_DIR:-}" ] && cp "$dir/cg.out" "$PROFILE_DIR/callgrind.$1.$2${PATH_URI:+.big}.out"
    awk '/^(summary|totals):/ {print $2; exit}' "$dir/cg.out"
}

# store the replay cell's response once, outside the measurement
gateway_conf replay
"$NGINX_BIN" -p "$dir/gw" -c "$dir/gw/nginx.conf" & warm=$!
pids+=("$warm")
wait_port "$gw_port"; drive replay 1; kill -QUIT "$warm"; wait "$warm" || true

declare -A small_of
printf '| cell | instructions per request | module work per request |\n|---|---|---|\n'
plain=
for cell in plain new replay nokey; do
    a=$(count "$cell" "$N1"); b=$(count "$cell" "$N2")
    per=$(( (b - a) / (N2 - N1) ))
    [ "$cell" = plain ] && plain=$per
    small_of[$cell]=$per
    printf '| %s | %d | %s |\n' "$cell" "$per" "$([ "$cell" = plain ] && echo — || echo $((per - plain)))"
done

# The same with a 256 KB response (a static file the upstream serves):
# what each KB of response costs, against plain's per KB. Fewer requests:
# every new one stores 256 KB in Redis.
mkdir -p "$dir/up/static"
head -c 262144 /dev/zero | tr '\0' 'x' > "$dir/up/static/big.json"
chmod 755 "$dir" "$dir/up" "$dir/up/static"; chmod 644 "$dir/up/static/big.json"  # workers may run as nobody
B1=${B1:-20}
B2=${B2:-120}
export PATH_URI=/v1/big
gateway_conf replay
"$NGINX_BIN" -p "$dir/gw" -c "$dir/gw/nginx.conf" & warm=$!
pids+=("$warm")
wait_port "$gw_port"; drive replay 1; kill -QUIT "$warm"; wait "$warm" || true

printf '\n| cell, 256 KB response | instructions per request | per KB of response | × plain per KB |\n|---|---|---|---|\n'
plain_kb=
for cell in plain new replay; do
    a=$(count "$cell" "$B1"); b=$(count "$cell" "$B2")
    per=$(( (b - a) / (B2 - B1) ))
    small=${small_of[$cell]}
    kb=$(( (per - small) * 1000 / 256 ))  # per KB, in thousandths of an instruction
    [ "$cell" = plain ] && plain_kb=$kb
    printf '| %s | %d | %d.%03d | %s |\n' "$cell" "$per" $((kb / 1000)) $((kb % 1000)) \
        "$(awk -v a="$kb" -v b="$plain_kb" 'BEGIN { printf "%.2f", a / b }')"
done
