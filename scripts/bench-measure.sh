# bench-measure.sh — the measurements of scripts/bench.sh, sourced by it:
# wrk runs (bench.lua), the CPU time of each process per request, Redis's
# commands per request (INFO commandstats, a MONITOR sample), the rounds
# with their order rotating, the pinned cells (taskset), and the memory run.
# One line per cell per round goes to $RESULTS, which bench-report.pl reads.
# It uses bench.sh's variables ($tmp, the ports, the cells, the options).

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

# Snapshot of Redis counters: commandstats calls and total_commands_processed,
# of the redis-server on PORT (default: the fixtures' one).
redis_snapshot() {  # [PORT]
    "$REDIS_CLI" -h 127.0.0.1 -p "${1:-$REDIS_PORT}" INFO all | tr -d '\r' | perl -ne '
        print "total $1\n" if /^total_commands_processed:(\d+)/;
        print "reads $1\n" if /^total_reads_processed:(\d+)/;
        print "$1 $2 $3\n" if /^cmdstat_(\S+?):calls=(\d+),usec=(\d+)/;'
}

# Commands per request between two snapshots; prints a line for the summary
# (requests|calls per request × µs per call, by command|commands|
# total_commands_processed|socket reads|µs of command time, all per
# request). Our own INFO calls are left out. The command time leaves EXEC's
# out: Redis counts in it the commands the transaction ran, which are
# counted as themselves (a script's time includes the commands it runs too,
# but a script is mostly its own work: it stays, and they with it).
redis_per_request() {  # BEFORE AFTER REQUESTS
    perl -e '
        my ($bf, $af, $n) = @ARGV;
        my (%b, %a);
        for my $f ([$bf, \%b], [$af, \%a]) { open my $fh, "<", $f->[0] or die; while (<$fh>) { my ($k, $v, $us) = split; $f->[1]{$k} = $v; $f->[1]{"usec:$k"} = $us // 0 } }
        my $ours = ($a{info} // 0) - ($b{info} // 0);
        my $total = $a{total} - $b{total} - $ours;
        my (@cmds, $sum, $usec);
        for my $k (sort { ($a{$b} - ($b{$b} // 0)) <=> ($a{$a} - ($b{$a} // 0)) || $a cmp $b } keys %a) {
            next if $k eq "total" || $k eq "info" || $k eq "reads" || $k =~ /^usec:/;
            my $d = $a{$k} - ($b{$k} // 0);
            next unless $d;
            $sum += $d;
            $usec += $a{"usec:$k"} - ($b{"usec:$k"} // 0) unless $k eq "exec";   # its time is the commands it ran
            push @cmds, sprintf("%s %.2f × %.2f µs", uc $k, $d / $n, ($a{"usec:$k"} - ($b{"usec:$k"} // 0)) / $d);
        }
        my $reads = ($a{reads} // 0) - ($b{reads} // 0) - $ours;
        printf "%d|%s|%.2f|%.2f|%.2f|%.2f\n", $n, join(", ", @cmds) || "none", ($sum // 0) / $n, $total / $n, $reads / $n,
            ($usec // 0) / $n;
    ' "$1" "$2" "$3"
}

# The commands the gateway itself sends per request (not those a Lua script
# runs inside Redis): a MONITOR sample of 1 s of wrk -c4. Round trips per
# request: the commands outside a transaction, and each MULTI ... EXEC as
# one (the gateway writes a transaction in one go and waits once, for
# EXEC's reply).
monitor_sample() {  # CELL: sets MON (REQUESTS|SENT_PER_REQUEST|BREAKDOWN|ROUND_TRIPS_PER_REQUEST)
    local cell=$1 log="$tmp/monitor-$1.log" mpid before after
    start_bg "redis-cli monitor" "$log" "$REDIS_CLI" -h 127.0.0.1 -p "$(redis_port_of "$cell")" monitor
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
        my (%c, $sum, %in_multi, $trips);
        while (<$fh>) {
            next unless /^\d+\.\d+ \[\d+ ([^\]]+)\] "([^"]+)"/;
            my ($client, $cmd) = ($1, uc $2);
            next if $client eq "lua" || $cmd =~ /^(INFO|PING|CLIENT|MONITOR|COMMAND)$/;
            $c{$cmd}++; $sum++;
            if ($cmd eq "MULTI") { $in_multi{$client} = 1; $trips++ }
            elsif ($cmd eq "EXEC" || $cmd eq "DISCARD") { $in_multi{$client} = 0 }
            elsif (!$in_multi{$client}) { $trips++ }
        }
        $sum //= 0; $trips //= 0;
        printf "%d|%.2f|%s|%.2f\n", $n, $n ? $sum / $n : 0,
            join(", ", map { sprintf "%s %.2f", $_, $c{$_} / ($n || 1) } sort { $c{$b} <=> $c{$a} } keys %c) || "none",
            $n ? $trips / $n : 0;
    ' "$log" $((after - before - 1)))
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
    new-s[0-9]* | replay-s[0-9]*) total=$(proc_ns "${STORE_PID[${1##*-s}]}") ;;
    *-tls) total=$(proc_ns "$TLS_PID") ;;
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

MISSED=()    # cell runs in which no request completed
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
    if [ "$req" -eq 0 ]; then   # a round too short for the machine's load: left out of the medians, and said so
        MISSED+=("$cell ($phase round $r)")
        round_line+=" $cell no request completed;"
        return 0
    fi
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
# counts Redis's commands per request (STATS), on the cell's redis-server
# (new-sN and replay-sN: MORE_REDIS_SERVERS's).
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
            if [ "$phase" = default ] && [ "$r" = 1 ] && [[ "$cell" =~ ^(new|replay)(-s[0-9]+)?$ ]]; then
                redis_snapshot "$(redis_port_of "$cell")" >"$tmp/redis-before-$cell"
                req_before=$(stub_requests "$GW_PORT")
                measure_cell "$phase" "$r" "$cell" "$secs"
                sleep 0.3   # requests still in flight when wrk stopped finish their Redis work
                req_after=$(stub_requests "$GW_PORT")
                redis_snapshot "$(redis_port_of "$cell")" >"$tmp/redis-after-$cell"
                [ $((req_after - req_before - 1)) -le 0 ] ||
                    STATS[$cell]=$(redis_per_request "$tmp/redis-before-$cell" "$tmp/redis-after-$cell" \
                                   $((req_after - req_before - 1)))
            else
                measure_cell "$phase" "$r" "$cell" "$secs"
            fi
        done
        note "${round_line%;}"
    done
}

# The memory run: a fresh gateway, the mix of 40 % new keys, 40 % replays of
# POOL stored keys and 20 % without a key; the worker's VmRSS as the request
# count passes each checkpoint (RSS_LINES); bounded by $rss_requests requests
# and $rss_seconds seconds.
rss_run() {
    local i base rss0 cp cps poller l n rss t done_n last_cp
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
        my ($port, $worker, $wrk, $limit, $base, @cps) = @ARGV;
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
        while (@cps && kill(0, $wrk) && time - $t0 < $limit) {   # bounded: by wrk running, and by a limit of its own
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
    ' "$RSS_PORT" "$GW_WORKER" "$WRK_PID" $((rss_seconds + 40)) "$base" "${cps[@]}"
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
}
