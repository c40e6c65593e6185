#!/usr/bin/env bash
# What reading a body as data costs (idempotency_fingerprint,
# docs/performance.md#fingerprint-parts), two tables:
#   json-libraries    the two JSON libraries Debian packages, canonicalizing
#                     scripts/payment-2k.json (scripts/json-libraries.cpp,
#                     built -O2 as the module is): instructions per
#                     canonicalization by callgrind ((Ir(N2) - Ir(N1)) /
#                     (N2 - N1)), and user CPU per canonicalization over
#                     CPU_RUNS runs;
#   fingerprint-cost  a new key per request, POST with that 2 KB JSON body,
#                     through the gateway: the raw fingerprint (the default),
#                     the canonical form (body=json) and two chosen members
#                     (json=/amount json=/currency), beside the same POST
#                     with the module off: instructions per request by
#                     callgrind (N1 and N2 requests, as scripts/instructions.sh),
#                     and the gateway's CPU per request (utime + stime of
#                     its one process over CPU_REQUESTS requests, unprofiled;
#                     the least of CPU_ROUNDS rounds, the cells interleaved);
#                     and the fingerprint alone, made in a process of its
#                     own as the module makes it (json-libraries raw, json,
#                     members): instructions and user CPU per fingerprint.
#   scripts/fingerprint-cost.sh [--quick] [--no-docs]
#     --quick     N1=50 N2=300, CPU_REQUESTS=5000 instead of 100/600 and 20000
#     --no-docs   the tables to stdout only, not into docs/performance.md
# Redis and the free ports come from the test suite's fixtures; everything
# on 127.0.0.1, and only the processes started here are stopped, by pid.
set -euo pipefail
shopt -s inherit_errexit

repo=$(cd "$(dirname "$0")/.." && pwd)
NGINX_BIN=${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}
keep=0
source "$repo/scripts/bench-lib.sh"
bench_options "$@"
if [ "$quick" = 1 ]; then N1=${N1:-50} N2=${N2:-300} CPU_REQUESTS=${CPU_REQUESTS:-5000}; fi
N1=${N1:-100} N2=${N2:-600} CPU_REQUESTS=${CPU_REQUESTS:-20000} CPU_ROUNDS=${CPU_ROUNDS:-5} CPU_RUNS=${CPU_RUNS:-20000}
body_file=$repo/scripts/payment-2k.json
command -v valgrind >/dev/null || { echo "valgrind is needed: apt-get install valgrind" >&2; exit 1; }
[ -f "$repo/build/ngx_http_idempotency_module.so" ] || { echo "build the module first: make" >&2; exit 1; }

bench_init fingerprint-cost

callgrind_ir() {  # callgrind_ir OUT COMMAND...: the instructions COMMAND ran
    valgrind --tool=callgrind --callgrind-out-file="$1" "${@:2}" >/dev/null 2>&1
    awk '/^(summary|totals):/ {print $2; exit}' "$1"
}

# ---------------------------------------------------------------- libraries
note "the JSON libraries, on $(wc -c < "$body_file") bytes"
g++ -std=c++17 -O2 -I"$repo/module" "$repo/scripts/json-libraries.cpp" "$repo/module/json_canonical.cpp" \
    "$repo/module/fingerprint.cpp" "$repo/module/fingerprint_parts.cpp" -o "$tmp/json-libraries" -lsimdjson -lcrypto
per_run() {  # per_run MODE: sets $per (instructions) and $us (user CPU) of one run of json-libraries MODE
    local a b
    a=$(callgrind_ir "$tmp/cg.$1.a" "$tmp/json-libraries" "$1" "$body_file" 10)
    b=$(callgrind_ir "$tmp/cg.$1.b" "$tmp/json-libraries" "$1" "$body_file" 210)
    per=$(( (b - a) / 200 ))
    { TIMEFORMAT=%U; time "$tmp/json-libraries" "$1" "$body_file" "$CPU_RUNS" >/dev/null; } 2> "$tmp/time.$1"
    us=$(awk -v s="$(cat "$tmp/time.$1")" -v n="$CPU_RUNS" 'BEGIN { printf "%.1f", s * 1e6 / n }')
}
{
    printf '| library | instructions per canonicalization | user CPU per canonicalization | in the package |\n|---|---:|---:|---|\n'
    for lib in simdjson nlohmann; do
        per_run "$lib"
        pkg=$([ "$lib" = simdjson ] && echo 'libsimdjson14 (a shared library: Depends)' || echo 'nothing (header-only)')
        printf '| %s | %d | %s µs | %s |\n' "$lib" "$per" "$us" "$pkg"
    done
} > "$tmp/libraries.md"
cat "$tmp/libraries.md"

# ------------------------------------------------------------ per new key
start_fixtures --max-seconds 3600 redis
free_ports 2
read -r up_port gw_port <<<"$FREE_PORTS"
WAIT_SECONDS=60     # nginx under valgrind starts slowly on a busy machine

mkdir -p "$tmp/up/logs"
cat > "$tmp/up/nginx.conf" <<CONF
worker_processes 1; error_log $tmp/up/logs/error.log; pid $tmp/up/nginx.pid;
events {}
http { access_log off; client_body_temp_path $tmp/up/b; proxy_temp_path $tmp/up/p; fastcgi_temp_path $tmp/up/f; uwsgi_temp_path $tmp/up/u; scgi_temp_path $tmp/up/s;
  server { listen 127.0.0.1:$up_port; default_type application/json;
    location / { return 201 '{"id":"pay_0123456789abcdef","object":"payment","amount":12999,"currency":"EUR","status":"succeeded"}'; } } }
CONF
start_nginx upstream "$tmp/up"
wait_for "the upstream nginx" "$started_pid" bash -c "exec 3<>/dev/tcp/127.0.0.1/$up_port"

mkdir -p "$tmp/gw/logs"
cat > "$tmp/gw/nginx.conf" <<CONF
load_module $repo/build/ngx_http_idempotency_module.so;
master_process off; worker_processes 1;
error_log $tmp/gw/logs/error.log; pid $tmp/gw/nginx.pid;
events {}
http { access_log off; client_body_temp_path $tmp/gw/b; proxy_temp_path $tmp/gw/p; fastcgi_temp_path $tmp/gw/f; uwsgi_temp_path $tmp/gw/u; scgi_temp_path $tmp/gw/s;
  idempotency_redis 127.0.0.1:$REDIS_PORT;
  idempotency_scope "";
  upstream backend { server 127.0.0.1:$up_port; keepalive 8; }
  keepalive_requests 100000;
  server { listen 127.0.0.1:$gw_port;
    proxy_http_version 1.1; proxy_set_header Connection "";
    location /plain/ { proxy_pass http://backend; }
    location /raw/ { idempotency on; proxy_pass http://backend; }
    location /json/ { idempotency on; idempotency_fingerprint method uri body=json; proxy_pass http://backend; }
    location /members/ { idempotency on; idempotency_fingerprint method path json=/amount json=/currency; proxy_pass http://backend; } } }
CONF

# N sequential POSTs of the 2 KB body on one keep-alive connection, each a new key
drive() {  # drive CELL N
    perl -MIO::Socket::INET -e '
        my ($port, $cell, $n, $tag, $file) = @ARGV;
        alarm 300;
        open my $fh, "<", $file or die "$file: $!"; my $body = do { local $/; <$fh> };
        my $len = length $body;
        my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port") or die "connect: $!";
        for my $i (1 .. $n) {
            print $s "POST /$cell/payments HTTP/1.1\r\nHost: gw\r\nIdempotency-Key: $tag-$i\r\n"
                . "Content-Type: application/json\r\nContent-Length: $len\r\n\r\n$body";
            my $head = "";
            while ($head !~ /\r\n\r\n/) { sysread($s, $head, 1, length $head) or die "closed" }
            my ($l) = $head =~ /Content-Length: (\d+)/i;
            my $b = ""; while (length $b < $l) { sysread($s, $b, $l - length $b, length $b) or die "closed" }
            $head =~ m{^HTTP/1.1 201} or die "unexpected answer: $head";
        }' "$gw_port" "$1" "$2" "$RANDOM$RANDOM" "$body_file"
}

gateway_up() { bash -c "exec 3<>/dev/tcp/127.0.0.1/$gw_port"; }

count() {  # count CELL N: sets $ir, the gateway's instructions
    callgrind_requests "$tmp/gw" "$gw_port" drive "$1" "$2"
}

cpu() {  # cpu CELL N: sets $us, the gateway's CPU per request (µs)
    start_nginx gateway "$tmp/gw"
    local gw=$started_pid
    wait_for "the gateway" "$gw" gateway_up
    drive "$1" 50   # warm
    local t0 t1 hz
    hz=$(getconf CLK_TCK)
    t0=$(awk '{print $14 + $15}' "/proc/$gw/stat")
    drive "$1" "$2"
    t1=$(awk '{print $14 + $15}' "/proc/$gw/stat")
    stop_pid "$gw" QUIT 30
    us=$(awk -v d=$((t1 - t0)) -v hz="$hz" -v n="$2" 'BEGIN { printf "%.1f", d * 1e6 / hz / n }')
}

note "per new key: callgrind $N1 and $N2 requests, CPU over $CPU_REQUESTS, the least of $CPU_ROUNDS rounds"
cells=(plain raw json members)
declare -A ir_of us_of
for cell in "${cells[@]}"; do
    count "$cell" "$N1"; a=$ir; count "$cell" "$N2"; b=$ir
    ir_of[$cell]=$(( (b - a) / (N2 - N1) ))
done
# the CPU rounds interleaved, each cell's least kept: the machine's other
# load only ever adds
for _ in $(seq "$CPU_ROUNDS"); do
    for cell in "${cells[@]}"; do
        cpu "$cell" "$CPU_REQUESTS"
        if [ -z "${us_of[$cell]:-}" ] || awk -v a="$us" -v b="${us_of[$cell]}" 'BEGIN { exit !(a < b) }'; then
            us_of[$cell]=$us
        fi
    done
done
{
    printf '| cell | instructions per request | the module'"'"'s work | gateway CPU per request | the fingerprint alone: instructions | its CPU |\n|---|---:|---:|---:|---:|---:|\n'
    plain=${ir_of[plain]}
    for cell in "${cells[@]}"; do
        alone='— | —'
        if [ "$cell" != plain ]; then per_run "$cell"; alone="$per | $us µs"; fi
        case $cell in
        plain) label='module off' ;;
        raw) label='new key, raw fingerprint (the default)' ;;
        json) label='new key, `body=json` (canonical form)' ;;
        members) label='new key, `json=/amount json=/currency`' ;;
        esac
        printf '| %s | %d | %s | %s µs | %s |\n' "$label" "${ir_of[$cell]}" \
            "$([ "$cell" = plain ] && echo — || echo $((ir_of[$cell] - plain)))" "${us_of[$cell]}" "$alone"
    done
} > "$tmp/cost.md"
cat "$tmp/cost.md"

if [ "$docs" = 1 ]; then
    doc_block json-libraries "$tmp/libraries.md" \
        "\`scripts/fingerprint-cost.sh\`, $(wc -c < "$body_file") bytes of JSON, callgrind, CPU over $CPU_RUNS runs"
    doc_block fingerprint-cost "$tmp/cost.md" \
        "\`scripts/fingerprint-cost.sh\`, a $(wc -c < "$body_file")-byte JSON body, callgrind $N1 and $N2 requests, CPU over $CPU_REQUESTS (the least of $CPU_ROUNDS rounds)"
fi
