#!/usr/bin/env bash
# Instructions per request, counted by valgrind's callgrind: repeatable for
# the same binary and inputs, whatever else the machine is doing.
# For each cell (plain, new, replay, nokey) the gateway runs under callgrind
# for N1 and then N2 sequential keep-alive requests; (Ir(N2) - Ir(N1)) /
# (N2 - N1) is the cost of one request with start-up and shutdown cancelled
# out. The module's own work is a cell's figure minus plain's, checked
# against its targets (new 15500, replay 1500, nokey 300). A second
# table does the same with a 256 KB response (B1 and B2 requests).
# MORE_REDIS_SERVERS (paths of redis-server binaries, as bench.sh takes
# them): new and replay counted again on each, started through the
# fixtures (TEST_REDIS_SERVER), one row each.
#   scripts/instructions.sh [--quick] [--no-docs]   (make instructions)
#     --quick     N1=100 N2=600, B1=10 B2=60 instead of 200/1200 and 20/120
#     --no-docs   the tables to stdout only, not into docs/performance.md
#                 (block "instructions", scripts/bench-docs.pl)
#   PROFILE_DIR=/tmp/p scripts/instructions.sh   also keeps each callgrind
#                                      profile there, for callgrind_annotate
# Redis and the free ports come from the test suite's fixtures
# (scripts/fixture, through bench-lib.sh); everything on 127.0.0.1, and only
# the processes started here are stopped, by pid.
set -euo pipefail
shopt -s inherit_errexit

repo=$(cd "$(dirname "$0")/.." && pwd)
NGINX_BIN=${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}
keep=0
source "$repo/scripts/bench-lib.sh"
bench_options "$@"
if [ "$quick" = 1 ]; then N1=${N1:-100} N2=${N2:-600} B1=${B1:-10} B2=${B2:-60}; fi
N1=${N1:-200} N2=${N2:-1200} B1=${B1:-20} B2=${B2:-120}

bench_init instructions
start_fixtures --max-seconds 3600 redis
free_ports 2
read -r up_port gw_port <<<"$FREE_PORTS"
redis_port=$REDIS_PORT
WAIT_SECONDS=60     # nginx under valgrind starts slowly on a busy machine

# the upstream: plain nginx answering 201 with ~200 bytes of JSON
mkdir -p "$tmp/up/logs"
cat > "$tmp/up/nginx.conf" <<CONF
worker_processes 1; error_log $tmp/up/logs/error.log; pid $tmp/up/nginx.pid;
events {}
http { access_log off; client_body_temp_path $tmp/up/b; proxy_temp_path $tmp/up/p; fastcgi_temp_path $tmp/up/f; uwsgi_temp_path $tmp/up/u; scgi_temp_path $tmp/up/s;
  server { listen 127.0.0.1:$up_port; default_type application/json;
    location /static/ { root $tmp/up; }
    location /v1/big { proxy_method GET; proxy_pass http://127.0.0.1:$up_port/static/big.json; }
    location / { return 201 '{"id":"pay_0123456789abcdef","object":"payment","amount":100,"currency":"eur","status":"succeeded","created":1700000000,"description":"benchmark payment","metadata":{"order":"42"},"livemode":false}'; } } }
CONF
start_nginx upstream "$tmp/up"
wait_for "the upstream nginx" "$started_pid" bash -c "exec 3<>/dev/tcp/127.0.0.1/$up_port"

gateway_conf() {  # gateway_conf CELL
    local on=on; [ "$1" = plain ] && on=off
    mkdir -p "$tmp/gw/logs"
    cat > "$tmp/gw/nginx.conf" <<CONF
load_module $repo/build/ngx_http_idempotency_module.so;
master_process off; worker_processes 1;
error_log $tmp/gw/logs/error.log; pid $tmp/gw/nginx.pid;
events {}
http { access_log off; client_body_temp_path $tmp/gw/b; proxy_temp_path $tmp/gw/p; fastcgi_temp_path $tmp/gw/f; uwsgi_temp_path $tmp/gw/u; scgi_temp_path $tmp/gw/s;
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

gateway_up() { bash -c "exec 3<>/dev/tcp/127.0.0.1/$gw_port"; }

count() {  # count CELL N: sets $ir, the instructions of the gateway process (no subshell: it starts processes)
    gateway_conf "$1"
    callgrind_requests "$tmp/gw" "$gw_port" drive "$1" "$2"
    [ -n "${PROFILE_DIR:-}" ] && cp "$tmp/cg.out" "$PROFILE_DIR/callgrind.$1.$2${PATH_URI:+.big}.out"
    return 0
}

store_replay() {  # the replay cell's response, stored once outside the measurement
    gateway_conf replay
    start_nginx "gateway (storing the replay)" "$tmp/gw"
    local warm=$started_pid
    wait_for "the gateway" "$warm" gateway_up
    drive replay 1
    stop_pid "$warm" QUIT 30
}

# what a redis-server says it is ("Redis 7.0.15", "Valkey 9.1.2")
server_label() {
    perl -I"$repo/t/lib" -MIdempotencyTest -e '
        my $i = IdempotencyTest::redis_command_at($ARGV[0], "INFO", "server");
        my ($n) = $i =~ /^server_name:(\S+)/m; my ($v) = $i =~ /^valkey_version:(\S+)/m; my ($r) = $i =~ /^redis_version:(\S+)/m;
        print +($n // "") eq "valkey" ? "Valkey $v" : "Redis $r"' "$1"
}

store_replay
declare -A small_of
{
    printf 'Redis: %s (the fixtures'"'"' redis-server)' "$(server_label "$redis_port")"
    printf '\n\n| cell | instructions per request | module work per request |\n|---|---|---|\n'
    plain=
    for cell in plain new replay nokey; do
        count "$cell" "$N1"; a=$ir; count "$cell" "$N2"; b=$ir
        per=$(( (b - a) / (N2 - N1) ))
        [ "$cell" = plain ] && plain=$per
        small_of[$cell]=$per
        printf '| %s | %d | %s |\n' "$cell" "$per" "$([ "$cell" = plain ] && echo — || echo $((per - plain)))"
    done
    # new and replay again on each of MORE_REDIS_SERVERS
    read -r -a more_servers <<<"${MORE_REDIS_SERVERS:-}"
    for i in "${!more_servers[@]}"; do
        TEST_REDIS_SERVER=${more_servers[$i]} start_fixtures --as "S$i" --max-seconds 3600 redis >&2
        v=S${i}_REDIS_PORT; redis_port=${!v}
        label=$(server_label "$redis_port")
        store_replay
        for cell in new replay; do
            count "$cell" "$N1"; a=$ir; count "$cell" "$N2"; b=$ir
            per=$(( (b - a) / (N2 - N1) ))
            printf '| %s, %s | %d | %d |\n' "$cell" "$label" "$per" $((per - plain))
        done
    done
    redis_port=$REDIS_PORT
    # the targets, on the module's own work per request
    printf '\nTargets, the module'"'"'s own work per request (on the first Redis): '
    for t in new:15500 replay:1500 nokey:300; do
        w=$(( small_of[${t%%:*}] - plain ))
        printf '%s at most %d: %d, %s%s' "${t%%:*}" "${t#*:}" "$w" \
            "$([ "$w" -le "${t#*:}" ] && echo met || echo '**not met**')" "$([ "$t" = nokey:300 ] && echo . || echo '; ')"
    done
    printf '\n'
} > "$tmp/small.md"
cat "$tmp/small.md"

# The same with a 256 KB response (a static file the upstream serves):
# what each KB of response costs, against plain's per KB. Fewer requests:
# every new one stores 256 KB in Redis.
mkdir -p "$tmp/up/static"
head -c 262144 /dev/zero | tr '\0' 'x' > "$tmp/up/static/big.json"
chmod 755 "$tmp/up" "$tmp/up/static"; chmod 644 "$tmp/up/static/big.json"  # workers may run as nobody
export PATH_URI=/v1/big
store_replay

{
    printf '\n| cell, 256 KB response | instructions per request | per KB of response | × plain per KB |\n|---|---|---|---|\n'
    plain_kb=
    for cell in plain new replay; do
        count "$cell" "$B1"; a=$ir; count "$cell" "$B2"; b=$ir
        per=$(( (b - a) / (B2 - B1) ))
        small=${small_of[$cell]}
        kb=$(( (per - small) * 1000 / 256 ))  # per KB, in thousandths of an instruction
        [ "$cell" = plain ] && plain_kb=$kb
        printf '| %s | %d | %d.%03d | %s |\n' "$cell" "$per" $((kb / 1000)) $((kb % 1000)) \
            "$(awk -v a="$kb" -v b="$plain_kb" 'BEGIN { printf "%.2f", a / b }')"
    done
} > "$tmp/big.md"
cat "$tmp/big.md"

if [ "$docs" = 1 ]; then
    cat "$tmp/small.md" "$tmp/big.md" > "$tmp/instructions.md"
    doc_block instructions "$tmp/instructions.md" \
        "\`scripts/instructions.sh\`, callgrind, $N1 and $N2 requests ($B1 and $B2 at 256 KB)"
fi
