#!/usr/bin/env bash
# bench-live.sh — the live-join cell of the benchmark (what `make bench` runs
# after its other cells, through scripts/bench.sh; also runnable alone).
#
#   scripts/bench-live.sh [--quick] [--rounds N] [--pad B] [--no-docs] [--keep]
#
# Runs scripts/bench-live.pl (its header says what it measures and how):
# the lag of a joiner behind the original client per event, the CPU per
# joiner per KB against a replay's with 1, 100 and 1000 joiners, Redis
# commands per joiner per second at two stream lengths, and the workers'
# memory while long streams run with joiners. Its tables go to stdout and
# build/bench/live.md, and into docs/performance.md between the
# bench:begin/end live-join markers (not with --no-docs, nor when a request
# was not answered as it should have been: the exit status is then 1).
# Raises its soft limit of open files to 4096 if it is lower (1000 joiners
# on each of two gateways, each a socket of the client).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
NGINX_BIN=${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}
export NGINX_BIN
keep=0 docs=1
args=()
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) args+=(--quick) ;;
    --rounds) args+=(--rounds "${2:?}"); shift ;;
    --pad) args+=(--pad "${2:?}"); shift ;;
    --no-docs) docs=0 ;;
    --keep) keep=1; args+=(--keep) ;;
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    *) echo "bench-live.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

source "$repo/scripts/bench-lib.sh"
[ -f "$repo/build/ngx_http_idempotency_module.so" ] || die "build/ngx_http_idempotency_module.so is missing: build it first (make module)"
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 4096 ]; then
    ulimit -n 4096 2>/dev/null || die "open files: soft limit $(ulimit -n), and 4096 is above the hard limit $(ulimit -Hn)"
fi
bench_init live
mkdir -p "$repo/build/bench"
status=0
perl "$repo/scripts/bench-live.pl" "${args[@]}" --out "$tmp/live.md" || status=$?
[ -s "$tmp/live.md" ] && cp "$tmp/live.md" "$repo/build/bench/live.md"
if [ "$status" = 0 ] && [ "$docs" = 1 ]; then
    how="\`scripts/bench-live.sh${args[*]:+ ${args[*]}}\`"
    doc_block live-join "$tmp/live.md" "$how"
elif [ "$docs" = 1 ]; then
    echo "bench-live.sh: the cell did not run as it should: docs/performance.md left alone" >&2
fi
exit "$status"
