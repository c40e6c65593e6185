# bench-lib.sh — the process plumbing of the benchmark scripts (bench.sh,
# bench-zone-lock.sh, instructions.sh, fingerprint-cost.sh), sourced by them:
#   bench_options ARG... --quick and --no-docs: $quick (0/1), $docs (1/0)
#   bench_init NAME      a temp dir ($tmp), the EXIT/INT/TERM traps that stop
#                        everything started here, by pid
#   start_bg NAME LOG CMD...   a background process (sets $started_pid)
#   stop_pid PID [SIGNAL [S]]  SIGNAL (TERM), KILL after S (5) s; an nginx
#                        master's workers too if they outlive it
#   wait_for WHAT PID CMD...   until CMD succeeds ($WAIT_SECONDS, 10), while PID runs
#   free_ports N         $FREE_PORTS: N free loopback ports (scripts/fixture ports)
#   start_fixtures [--as P] WHAT...   Redis, TLS Redis, Redis Clusters and
#                        the test upstream from the test suite's fixtures
#                        (scripts/fixture serve), their ports and pids as
#                        shell variables (REDIS_PORT, REDIS_PID, ...; with
#                        --as P, P_REDIS_PORT, ...)
#   start_nginx NAME DIR nginx -t, then nginx -p DIR in the foreground
#   callgrind_requests DIR PORT CMD...   nginx -p DIR under callgrind, CMD
#                        once it listens on PORT, then stopped: $ir, the
#                        instructions it ran ($tmp/cg.out, its profile)
#   doc_block NAME FILE  FILE, with a line saying when and where it was
#                        measured, into docs/performance.md between the
#                        bench:begin/end NAME markers (scripts/bench-docs.pl)
# Everything listens on 127.0.0.1; only the processes started here are
# stopped, by pid. Callers set $repo, $NGINX_BIN and $keep (1: keep $tmp).

SCRIPT_NAME=${SCRIPT_NAME:-$(basename "$0")}
T0=$(date +%s.%N)
elapsed() { perl -e 'printf "%6.1fs", $ARGV[1] - $ARGV[0]' "$T0" "$(date +%s.%N)"; }
note() { echo "  [$(elapsed)] $*"; }
die() { echo "$SCRIPT_NAME: $*" >&2; exit 1; }

bench_options() {  # bench_options "$@": the options of a script that writes docs; usage and exit 2 on another
    quick=0 docs=1
    for a; do
        case $a in
        --quick) quick=1 ;;
        --no-docs) docs=0 ;;
        *) echo "usage: $0 [--quick] [--no-docs]" >&2; exit 2 ;;
        esac
    done
}

declare -a PIDS=()    # everything started here, stopped by pid at exit
declare -A PNAME=() STOPPED=()

bench_init() {  # bench_init NAME: $tmp, and the traps
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/idempotency-$1-XXXXXX")
    chmod 0755 "$tmp"     # nginx workers run as another user when we are root
    trap bench_cleanup EXIT
    trap 'echo; echo "$SCRIPT_NAME: interrupted, stopping what was started" >&2; exit 130' INT TERM
}

start_bg() {  # start_bg NAME LOG COMMAND...: sets $started_pid
    local name=$1 log=$2; shift 2
    "$@" </dev/null >>"$log" 2>&1 &
    started_pid=$!
    PIDS+=("$started_pid")
    PNAME[$started_pid]=$name
}

alive() { kill -0 "$1" 2>/dev/null; }

workers_of() {  # the worker processes of an nginx master
    ps -o pid= --ppid "$1" 2>/dev/null | tr -d ' ' || true
}

stop_pid() {  # stop_pid PID [SIGNAL [SECONDS]]: SIGNAL (TERM), then KILL after SECONDS (5)
    local pid=$1 sig=${2:-TERM} secs=${3:-5} w workers=""
    [ -z "${STOPPED[$pid]:-}" ] || return 0
    STOPPED[$pid]=1
    # an nginx master: its workers, in case it has to be killed and leaves them
    [[ "${PNAME[$pid]:-}" == nginx* ]] && workers=$(workers_of "$pid")
    if alive "$pid"; then
        kill -"$sig" "$pid" 2>/dev/null || true
        for _ in $(seq $((secs * 10))); do alive "$pid" || break; sleep 0.1; done
        if alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
    fi
    wait "$pid" 2>/dev/null || true
    for w in $workers; do
        alive "$w" && kill -KILL "$w" 2>/dev/null || true
    done
}

bench_cleanup() {
    local rc=$? i
    trap - EXIT INT TERM
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        stop_pid "${PIDS[$i]}" TERM
    done
    if [ -n "${tmp:-}" ]; then
        if [ "${keep:-0}" = 1 ] || [ "$rc" -ne 0 ]; then
            echo "temp dir kept: $tmp" >&2
        else
            rm -rf "$tmp"
        fi
    fi
    exit "$rc"
}

wait_for() {  # wait_for WHAT PID COMMAND...: up to $WAIT_SECONDS (10) s, while PID runs
    local what=$1 pid=$2; shift 2
    for _ in $(seq $((${WAIT_SECONDS:-10} * 10))); do
        alive "$pid" || die "$what exited at start; see $tmp"
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    die "$what did not come up; see $tmp"
}

free_ports() {  # free_ports N: sets FREE_PORTS, N distinct free ports on 127.0.0.1
    FREE_PORTS=$("$repo/scripts/fixture" ports "$1") || die "scripts/fixture ports $1 failed"
}

# start_fixtures [--as P] [--max-seconds S] WHAT...: scripts/fixture serve
# WHAT... in the background (stopped at exit with the rest); once it says
# "ready", its NAME=VALUE lines become shell variables. FIXTURE_PID: its
# pid. With --as P, a second set beside the first (another redis-server,
# TEST_REDIS_SERVER's): its own log, and its variables P_NAME (P_REDIS_PORT,
# ..., P_FIXTURE_PID).
start_fixtures() {
    local log="$tmp/fixture.log" k v prefix="" pid
    if [ "${1:-}" = --as ]; then prefix=${2:?}_ log="$tmp/fixture-$2.log"; shift 2; fi
    start_bg fixture "$log" "$repo/scripts/fixture" serve "$@"
    pid=$started_pid
    printf -v "${prefix}FIXTURE_PID" '%s' "$pid"
    for _ in $(seq 1200); do   # up to 120 s: certificates and three clusters on a loaded machine
        grep -qx ready "$log" 2>/dev/null && break
        alive "$pid" || { cat "$log" >&2; die "scripts/fixture serve $* failed"; }
        sleep 0.1
    done
    grep -qx ready "$log" || die "scripts/fixture serve $* did not get ready; see $log"
    while IFS='=' read -r k v; do
        [[ "$k" =~ ^[A-Z][A-Z0-9_]*$ ]] && printf -v "$prefix$k" '%s' "$v"
    done < <(sed -n '/^[A-Z][A-Z0-9_]*=/p' "$log")
}

start_nginx() {  # start_nginx NAME DIR [PREFIX...]: sets $started_pid (the master; daemon off)
    local name=$1 d=$2
    shift 2
    mkdir -p "$d/tmp"
    "$NGINX_BIN" -t -q -p "$d/" -c "$d/nginx.conf" -g 'daemon off;' 2>"$d/check.log" \
        || { cat "$d/check.log" >&2; die "nginx -t refused $d/nginx.conf"; }
    start_bg "nginx $name" "$d/stderr.log" "$@" "$NGINX_BIN" -p "$d/" -c "$d/nginx.conf" -g 'daemon off;'
}

callgrind_requests() {  # callgrind_requests DIR PORT COMMAND...: sets $ir (no subshell: it starts processes)
    local dir=$1 port=$2 vg
    shift 2
    start_bg "valgrind nginx" "$tmp/cg.log" valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" \
        "$NGINX_BIN" -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;'
    vg=$started_pid
    wait_for "nginx under callgrind" "$vg" bash -c "exec 3<>/dev/tcp/127.0.0.1/$port"
    "$@"
    # callgrind writes its profile on the way out; under it a QUIT can go
    # unseen (the worker sits on in epoll_wait), so it is sent again
    for _ in $(seq 24); do
        kill -QUIT "$vg" 2>/dev/null || break
        for _ in $(seq 50); do alive "$vg" || break 2; sleep 0.1; done
    done
    stop_pid "$vg" QUIT 5
    ir=$(awk '/^(summary|totals):/ {print $2; exit}' "$tmp/cg.out")
    [[ "$ir" =~ ^[0-9]+$ ]] || die "no instruction count in $tmp/cg.out"
}

# doc_block NAME FILE [HOW]: FILE into docs/performance.md (or $BENCH_DOC)
# between the markers of NAME, after a line with the date, the nginx
# version, the machine and HOW it was measured.
doc_block() {
    local name=$1 file=$2 how=${3:-} block="$tmp/doc-$1.md"
    {
        printf '_Measured %s with %s on %s CPUs (%s)%s._\n\n' "$(date -u '+%Y-%m-%d %H:%M UTC')" \
            "$("$NGINX_BIN" -v 2>&1 | sed 's/^nginx version: //')" "$(nproc)" \
            "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)" "${how:+, $how}"
        cat "$file"
    } >"$block"
    perl "$repo/scripts/bench-docs.pl" --doc "${BENCH_DOC:-$repo/docs/performance.md}" "$name" "$block" \
        || echo "$SCRIPT_NAME: could not write the $name block" >&2
}
