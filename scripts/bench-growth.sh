# bench-growth.sh — the growth set of scripts/bench.sh (`bench.sh --growth`),
# sourced by it: how the cost per request grows with the response size, the
# request body, the connections and the gateway's workers, and what
# duplicates waiting for one slow original cost Redis. Its cells run in a
# set of rounds of their own, interleaved like the default set, with their
# reference cells (plain of the same size, 1 worker) in the same rounds:
#   plain-200B ... replay-raw-256KB
#           responses of 200 B, 2 KB, 16 KB and 256 KB: static files of the
#           upstream (JSON made by scripts/Bodies.pm: an acknowledgement, a
#           payment object, lists of them), fetched with `proxy_method GET`
#           (nginx's static module refuses POST) from /size-plain/ (module
#           off), /size-idem/ (fresh keys, idempotency_ttl 2s so that Redis
#           holds only a few seconds of 256 KB records) and /size-replay/ (one
#           stored key per size), and the same with idempotency_compress off
#           (new-raw-, replay-raw-: the records as before compression);
#           per KB of response: (cost at 256 KB - cost at 200 B) / 255.8
#   plain-body256B ... new-body1MB
#           request bodies of 256 B, 64 KB and 1 MB (bench.lua builds them;
#           client_body_buffer_size 128k: 1 MB goes through a temp file)
#   plain-c512, new-c512, replay-c512
#           wrk -c512 instead of 32
#   new-w2, replay-w2, zone-new-w2, zone-replay-w2
#           a second gateway, gateway2, with worker_processes 2; then the
#           Redis connections each gateway worker holds (ss -tnp)
# and, after the rounds, 200 duplicates of one key sent while the original
# waits 3 s on a slow upstream (scripts/upstream.pl ?sleep=3, the
# test suite's, started with Redis by scripts/fixture) in a location
# with idempotency_wait: Redis commands per waiter, by INFO commandstats.
# It uses bench.sh's functions and variables (cell, run_rounds, report_table,
# $tmp, the ports).

GROWTH_CELLS=(plain new replay zone-new zone-replay)
SIZES=(200B 2KB 16KB 256KB)
declare -A SIZE_BYTES=([200B]=200 [2KB]=2048 [16KB]=16384 [256KB]=262144)
# the bodies (scripts/Bodies.pm): a JSON acknowledgement, a payment object, lists of them
declare -A SIZE_KIND=([200B]=ack [2KB]=payment [16KB]=list [256KB]=list)
for s in "${SIZES[@]}"; do
    cell "plain-$s" plain "/size-plain/$s/pay" ref="plain-$s"
    cell "new-$s" new "/size-idem/$s/pay" ref="plain-$s"
    cell "replay-$s" replay "/size-replay/$s/pay" ref="plain-$s"
    # the same, kept uncompressed (idempotency_compress off): the records as before compression
    cell "new-raw-$s" new "/size-idem-raw/$s/pay" ref="plain-$s"
    cell "replay-raw-$s" replay "/size-replay-raw/$s/pay" ref="plain-$s"
    GROWTH_CELLS+=("plain-$s" "new-$s" "replay-$s" "new-raw-$s" "replay-raw-$s")
done
declare -A BODY_BYTES=([256B]=256 [64KB]=65536 [1MB]=1048576)
for b in 256B 64KB 1MB; do
    cell "plain-body$b" plain /plain/pay body="${BODY_BYTES[$b]}" ref="plain-body$b"
    cell "new-body$b" new /idem/pay body="${BODY_BYTES[$b]}" ref="plain-body$b"
    GROWTH_CELLS+=("plain-body$b" "new-body$b")
done
cell plain-c512 plain /plain/pay conns=512 ref=plain-c512
cell new-c512 new /idem/pay conns=512 ref=plain-c512
cell replay-c512 replay /idem/pay conns=512 ref=plain-c512
cell new-w2 new /idem/pay gw=gateway2 ref=new
cell replay-w2 replay /idem/pay gw=gateway2 ref=replay
cell zone-new-w2 new /zone/pay gw=gateway2 ref=zone-new
cell zone-replay-w2 replay /zone-replay/pay gw=gateway2 ref=zone-replay
GROWTH_CELLS+=(plain-c512 new-c512 replay-c512 new-w2 replay-w2 zone-new-w2 zone-replay-w2)
WAITERS=200

write_static_files() {  # write_static_files DIR: DIR/static/SIZE/pay, readable by nginx's workers (nobody)
    local s
    for s in "${SIZES[@]}"; do
        mkdir -p "$1/static/$s"
        perl -I"$repo/scripts" -MBodies -e 'print +(Bodies::body($ARGV[0], $ARGV[1]))[0]' \
            "${SIZE_KIND[$s]}" "${SIZE_BYTES[$s]}" >"$1/static/$s/pay"
    done
    chmod -R a+rX "$1"
}

growth_locations() {  # the gateway's locations for the growth cells
    local size='idempotency_max_response_size 512k; proxy_method GET; proxy_pass http://backend/static/; proxy_buffers 32 16k;'
    cat <<EOF
        location /size-plain/  { idempotency off; proxy_method GET; proxy_pass http://backend/static/; proxy_buffers 32 16k; }
        location /size-idem/   { idempotency on; idempotency_ttl 2s; $size }
        location /size-replay/ { idempotency on; $size }
        location /size-idem-raw/   { idempotency on; idempotency_compress off; idempotency_ttl 2s; $size }
        location /size-replay-raw/ { idempotency on; idempotency_compress off; $size }
        location /wait/ { idempotency on; idempotency_wait 20s; proxy_read_timeout 30s; proxy_pass http://127.0.0.1:$SLOW_PORT; }
EOF
}

# 200 duplicates of one key, sent 0.5 s after the original, which the slow
# upstream answers after 3 s; Redis's commands between the duplicates' start
# and the last answer (the original's store included), per duplicate.
waiters_test() {
    local key="$RUN_ID-waiters" path="/wait/pay?sleep=3" orig
    start_bg "original request" "$tmp/waiters-original.log" post "$GW_PORT" "$path" "$key"
    orig=$started_pid
    sleep 0.5
    redis_snapshot >"$tmp/redis-before-waiters"
    perl -MIO::Socket::INET -MIO::Select -MTime::HiRes=time -e '
        my ($port, $path, $key, $body, $n) = @ARGV;
        alarm 30;   # bounded: a gateway that stops answering ends the test
        my $req = "POST $path HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                . "Idempotency-Key: $key\r\nContent-Length: " . length($body) . "\r\nConnection: close\r\n\r\n$body";
        my %buf;
        my $sel = IO::Select->new;
        for (1 .. $n) {
            my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $port) or die "connect: $!\n";
            print $s $req;
            $sel->add($s); $buf{$s} = "";
        }
        my $t0 = time;
        while ($sel->count) {
            for my $s ($sel->can_read(1)) {
                my $got = sysread $s, $buf{$s}, 65536, length $buf{$s};
                next if $got;
                $sel->remove($s); close $s;
            }
        }
        my %status;
        $status{ /^HTTP\/1\.1 (\d+)/ ? $1 : "none" }++ for values %buf;
        my $replayed = grep { /^Idempotent-Replayed: true/mi } values %buf;
        printf "%s; %d replayed; last answer after %.2f s\n",
            join(", ", map { "$status{$_} × $_" } sort keys %status), $replayed, time - $t0;
    ' "$GW_PORT" "$path" "$key" "$BODY" "$WAITERS" >"$tmp/waiters.log" || die "the waiters test failed; see $tmp/waiters.log"
    redis_snapshot >"$tmp/redis-after-waiters"
    wait "$orig" || die "the original request of the waiters test failed"
    STOPPED[$orig]=1
    WAITERS_ANSWERS=$(cat "$tmp/waiters.log")
    WAITERS_STATS=$(redis_per_request "$tmp/redis-before-waiters" "$tmp/redis-after-waiters" "$WAITERS")
    note "$WAITERS duplicates waiting: $WAITERS_ANSWERS; Redis commands per waiter $(cut -d'|' -f4 <<<"$WAITERS_STATS")"
}

redis_connections() {  # per worker of both gateways: its established connections to redis-server
    local gw pid n out=""
    for gw in gateway gateway2; do
        for pid in ${GW_WORKERS_OF[$gw]:-}; do
            n=$(ss -tnpH state established "( dport = :$REDIS_PORT )" 2>/dev/null | grep -c "pid=$pid," || true)
            out+="$gw worker $pid: $n; "
        done
    done
    echo "${out%; }"
}

run_growth() {
    start_gateway gateway2 2
    warm_up 1 "${GROWTH_CELLS[@]}"
    run_rounds growth "$growth_rounds" "$growth_duration" "${GROWTH_CELLS[@]}"
    REDIS_CONNECTIONS=$(redis_connections)
    note "Redis connections per gateway worker: $REDIS_CONNECTIONS"
    waiters_test
    stop_gateway gateway2
}

growth_report() {
    local c pairs=()
    growth_table() {  # growth_table CELL...: the CPU and throughput tables of those that ran
        local run=() c
        for c; do [[ " ${GROWTH_CELLS[*]} " == *" $c "* ]] && run+=("$c"); done
        [ ${#run[@]} -gt 0 ] || { echo "(not run)"; return; }
        report_table cpu growth "${run[@]}"
        echo
        report_table throughput growth "${run[@]}"
    }
    echo
    echo "## Growth"
    echo
    echo "A second set of rounds ($growth_rounds rounds of ${growth_duration}s per cell, order rotating; \`bench.sh --growth\`), with each cell's reference in the same rounds. Median (min–max) over the rounds; µs of CPU per request per process as above; \"machine × ref\" and \"× ref\" against the reference named."
    echo
    echo "### Response size"
    echo
    echo "Static JSON files of 200 B (an acknowledgement), 2 KB (a payment object), 16 KB and 256 KB (lists of them) from the upstream (\`proxy_method GET\`; scripts/Bodies.pm); \`new\` keys expire after 2 s (idempotency_ttl), \`replay\` replays one stored key per size; \`-raw\` cells with \`idempotency_compress off\` (records as before compression)."
    echo
    growth_table $(for s in "${SIZES[@]}"; do echo "plain-$s new-$s replay-$s new-raw-$s replay-raw-$s"; done)
    echo
    echo "Per KB of response, (cost at 256 KB − cost at 200 B) / 255.8, medians; targets: new at most 3 × plain per KB, replay at most 1.0 × (the last column: 1.5 ×):"
    echo
    perl "$repo/scripts/bench-report.pl" perkb "$RESULTS" growth plain-256KB@plain-200B new-256KB@new-200B replay-256KB@replay-200B \
        new-raw-256KB@new-raw-200B replay-raw-256KB@replay-raw-200B
    echo
    echo "### Request body size"
    echo
    echo "Bodies of 256 B, 64 KB and 1 MB; client_body_buffer_size 128k, so 1 MB goes through a temporary file (in the gateway, and the fingerprint reads it back)."
    echo
    growth_table plain-body256B new-body256B plain-body64KB new-body64KB plain-body1MB new-body1MB
    echo
    echo "### Connections: 32 and 512"
    echo
    growth_table plain new replay plain-c512 new-c512 replay-c512
    echo
    echo "### Gateway workers: 1 and 2"
    echo
    for c in new replay zone-new zone-replay; do pairs+=("$c-w2@$c"); done
    perl "$repo/scripts/bench-report.pl" workers "$RESULTS" growth "${pairs[@]}"
    echo
    echo "The gateway worker column of the -w2 cells sums both workers."
    echo
    growth_table new replay zone-new zone-replay new-w2 replay-w2 zone-new-w2 zone-replay-w2
    echo
    echo "Redis connections held by each gateway worker after the rounds (ss -tnp; target: one per worker): ${REDIS_CONNECTIONS:-not measured}."
    echo
    echo "### $WAITERS duplicates waiting for one slow original"
    echo
    echo "The original waits 3 s on a slow upstream; 0.5 s after it, $WAITERS duplicates of its key arrive at a location with \`idempotency_wait 20s\`. Answers: ${WAITERS_ANSWERS:-not run}."
    if [ -n "${WAITERS_STATS:-}" ]; then
        local n cmds sum total reads
        IFS='|' read -r n cmds sum total reads <<<"$WAITERS_STATS"
        echo
        echo "Redis commands per waiter (INFO commandstats over the duplicates' wait, the original's store included, ÷ $WAITERS): **$total** ($cmds); socket reads per waiter $reads. Target: at most 2 per waiter: $(perl -e 'print $ARGV[0] <= 2 ? "met" : "not met"' "$total")."
    fi
}
