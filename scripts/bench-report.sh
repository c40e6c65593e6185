# bench-report.sh — the report of scripts/bench.sh, sourced by it:
# write_report builds build/bench/results.md (every table, the commands and
# the configurations); write_doc_blocks puts the measured tables into
# docs/performance.md, each between its markers (bench-docs.pl):
#   cpu          CPU per request per process: plain new replay nokey new-tls replay-tls
#   throughput   requests/s and latency of the same cells
#   redis        Redis round trips, commands and command time per request (new,
#                replay, nokey), and new and replay on each of MORE_REDIS_SERVERS
#   targets      the targets, met or not
#   zone         CPU and throughput: plain zone-new zone-replay
#   cluster      CPU and throughput: plain new cluster-1 cluster-2 cluster-3
#   pinned       CPU and throughput: plain-pinned new-pinned replay-pinned
#   growth       the growth set (--growth): sizes, bodies, connections,
#                workers, waiting duplicates
#   memory       the worker's VmRSS over the memory run
# Two more blocks come from other scripts: instructions (scripts/instructions.sh,
# which bench.sh --instructions runs) and zone-lock (scripts/bench-zone-lock.sh).
# A block is written only when all its cells ran (not after a --cells run
# that left some out). The tables come from bench-report.pl over $RESULTS.

report_table() {  # report_table TABLE PHASE CELL...: a table of bench-report.pl, each cell against its reference
    local table=$1 phase=$2 c
    shift 2
    perl "$repo/scripts/bench-report.pl" "$table" "$RESULTS" "$phase" $(for c; do printf '%s@%s ' "$c" "${CELL_REF[$c]}"; done)
}

redis_table() {  # Redis commands per request of new, replay and nokey, one set of rows per server
    local cell n cmds sum total reads usec port
    echo "| server | cell | round trips (MONITOR sample; a MULTI ... EXEC counts as one) | sent by the gateway (MONITOR sample) | Redis commands per request (INFO commandstats, round 1) | Redis command time per request, µs (INFO commandstats usec) | by command: calls per request × µs per call (includes the commands Lua scripts run inside Redis; EVALSHA's time includes theirs) | total_commands_processed | Redis socket reads (total_reads_processed) |"
    echo "|---|---|---|---|---:|---:|---|---:|---:|"
    for cell in $(selected new replay nokey) "${STORE_CELLS[@]}"; do
        port=$(redis_port_of "$cell")
        if [ -n "${STATS[$cell]:-}" ]; then
            IFS='|' read -r n cmds sum total reads usec <<<"${STATS[$cell]}"
            echo "| ${SERVER_LABEL[$port]} | $cell | ${ROUND_TRIPS[$cell]:-} | ${SENT[$cell]} (${SENT_BREAKDOWN[$cell]}) | **$sum** | **$usec** | $cmds; $n requests | $total | $reads |"
        else
            echo "| ${SERVER_LABEL[$port]} | $cell | ${ROUND_TRIPS[$cell]:-} | ${SENT[$cell]} (${SENT_BREAKDOWN[$cell]}) | — | — | — | — | — |"
        fi
    done
}

targets_list() {  # the targets, met or not
    report_table ratio default "${CELLS[@]}" | perl -e '
        my ($new_trips, $replay_trips, $servers) = @ARGV;
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
            # round trips: the claim, then the store (within the lease, one
            # transaction written in one go: MULTI PEXPIRETIME SET EXEC)
            ["new: 2 Redis round trips per request",   $new_trips,    sub { abs($_[0] - 2) < 0.05 }, "%.2f"],
            ["replay: 1 Redis round trip per request", $replay_trips, sub { abs($_[0] - 1) < 0.05 }, "%.2f"],
        );
        # Redis commands per request by INFO commandstats, each server: a new
        # key 2 where the server writes conditionally (SET NX claim, SET IFEQ
        # store) in at most 3 µs of command time, else 5 (the store within
        # the lease); a replay 1
        for (split /;/, $servers) {
            my ($label, $cond, $new, $new_us, $replay) = split /\|/;
            my $n = $cond ? 2 : 5;
            push @t, ["new, $label: $n commands per request", $new, sub { $_[0] <= $n + 0.05 }, "%.2f"];
            push @t, ["new, $label: at most 3 µs of command time", $new_us, sub { $_[0] <= 3 }, "%.2f µs"] if $cond;
            push @t, ["replay, $label: 1 command per request", $replay, sub { abs($_[0] - 1) < 0.05 }, "%.2f"];
        }
        for my $t (@t) {
            my ($what, $v, $ok, $fmt) = @$t;
            next unless defined $v && length $v;
            printf "- %-50s %-12s %s\n", $what . ":", sprintf($fmt, $v), $ok->($v) ? "met" : "NOT met";
        }
    ' "${ROUND_TRIPS[new]:-}" "${ROUND_TRIPS[replay]:-}" "$(server_figures)"
}

# server_figures: per server whose new and replay cells were counted,
# "label|conditional|new commands|new µs|replay commands", ";" between
server_figures() {
    local out=() new replay port
    for new in $(selected new) "${STORE_CELLS[@]}"; do
        [[ "$new" == new* ]] || continue
        replay=replay${new#new} port=$(redis_port_of "$new")
        [ -n "${STATS[$new]:-}" ] && [ -n "${STATS[$replay]:-}" ] || continue
        out+=("${SERVER_LABEL[$port]}|${SERVER_COND[$port]}|$(cut -d'|' -f3 <<<"${STATS[$new]}")|$(cut -d'|' -f6 <<<"${STATS[$new]}")|$(cut -d'|' -f3 <<<"${STATS[$replay]}")")
    done
    local IFS=';'
    echo "${out[*]}"
}

memory_table() {  # the memory run
    local first="" l cp n rss t
    echo "One worker, a fresh gateway, wrk -t$threads -c$conns, 40% new keys / 40% replays of $POOL stored keys / 20% without a key; VmRSS read from /proc/PID/status under load as the request count (stub_status) passes each checkpoint; bounded by $rss_requests requests and ${rss_seconds}s."
    echo
    echo "| checkpoint | requests done | VmRSS kB | change from the first checkpoint | seconds |"
    echo "|---|---:|---:|---:|---:|"
    for l in "${RSS_LINES[@]}"; do
        IFS='|' read -r cp n rss t <<<"$l"
        if [ "$cp" = start ]; then echo "| start (idle) | 0 | $rss | | |"; continue; fi
        [ -n "$first" ] || first=$rss
        echo "| $cp | $n | $rss | $(perl -e 'printf "%+.1f %%", 100 * ($ARGV[1] - $ARGV[0]) / $ARGV[0]' "$first" "$rss") | $t |"
    done
    [ -z "$RSS_NOTE" ] || { echo; echo "Stopped early: $RSS_NOTE."; }
}

missed_note() {  # the cell runs in which no request completed, if any
    [ ${#MISSED[@]} -eq 0 ] || { echo; echo "No request completed within these runs, left out of the medians (too short for the machine's load): ${MISSED[*]}."; }
}

write_report() {  # write_report FILE
    local cell c l listed gw_conf f
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
            echo "## Redis round trips and commands per request"
            echo
            redis_table
            echo
            echo "## Targets (informational)"
            echo
            targets_list
        fi
        [ ${#GROWTH_CELLS[@]} -eq 0 ] || growth_report
        if [ "$do_rss" = 1 ]; then
            echo
            echo "## Gateway worker memory (VmRSS)"
            echo
            memory_table
        fi
        missed_note
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
        echo "redis-server --bind 127.0.0.1 --port REDIS_PORT --save '' --appendonly no   # scripts/fixture serve redis tls cluster 1 cluster 2 cluster 3"
        for n in "${!STORE_PORT[@]}"; do
            echo "TEST_REDIS_SERVER=${MORE_SERVERS[$((n - 2))]} scripts/fixture serve redis   # server $n (MORE_REDIS_SERVERS): ${SERVER_LABEL[${STORE_PORT[$n]}]}, cells new-s$n replay-s$n"
        done
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
    } >"$1"
}

# cells_block NAME CELL...: the CPU and throughput tables of CELLs into block NAME, when they all ran
ran_all() { local c; for c; do [[ " ${CELLS[*]} " == *" $c "* ]] || return 1; done; }
cells_block() {
    local name=$1
    shift
    ran_all "$@" || { note "docs: $name not written (not all of $* ran)"; return 0; }
    {
        report_table cpu default "$@"
        echo
        report_table throughput default "$@"
    } >"$tmp/table-$name.md"
    doc_block "$name" "$tmp/table-$name.md" "$DOC_HOW"
}

write_doc_blocks() {
    local t=$tmp/table
    DOC_HOW="\`scripts/bench.sh$ARGS_GIVEN\`, $rounds rounds of ${duration}s per cell"
    if [ "$do_cells" = 1 ] && [ ${#CELLS[@]} -gt 0 ]; then
        if ran_all plain new replay nokey; then
            report_table cpu default $(selected plain new replay nokey new-tls replay-tls) >"$t-cpu.md"
            doc_block cpu "$t-cpu.md" "$DOC_HOW"
            report_table throughput default $(selected plain new replay nokey new-tls replay-tls) >"$t-throughput.md"
            doc_block throughput "$t-throughput.md" "$DOC_HOW"
            redis_table >"$t-redis.md"
            doc_block redis "$t-redis.md" "$DOC_HOW"
            targets_list >"$t-targets.md"
            doc_block targets "$t-targets.md" "$DOC_HOW"
        else
            note "docs: cpu, throughput, redis and targets not written (not all of plain new replay nokey ran)"
        fi
        cells_block zone plain zone-new zone-replay
        cells_block cluster plain new cluster-1 cluster-2 cluster-3
        if [ -n "$PIN_NOTE" ]; then
            echo "$PIN_NOTE." >"$t-pinned.md"
            doc_block pinned "$t-pinned.md" "$DOC_HOW"
        else
            cells_block pinned plain-pinned new-pinned replay-pinned
        fi
    fi
    if [ ${#GROWTH_CELLS[@]} -gt 0 ]; then
        # its ### headings as bold lines: the block sits under a heading of the page
        { growth_report; missed_note; } | sed '/^## Growth$/d; s/^### \(.*\)$/**\1.**/' | sed '/./,$!d' >"$t-growth.md"
        doc_block growth "$t-growth.md" "\`scripts/bench.sh$ARGS_GIVEN\`, $growth_rounds rounds of ${growth_duration}s per cell"
    fi
    if [ "$do_rss" = 1 ]; then
        memory_table >"$t-memory.md"
        doc_block memory "$t-memory.md" "\`scripts/bench.sh$ARGS_GIVEN\`"
    fi
}
