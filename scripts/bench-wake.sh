#!/usr/bin/env bash
# bench-wake.sh — the wake-up cell of the benchmark (what `make bench` runs
# after the live-join cell, through scripts/bench.sh; also runnable alone).
#
#   scripts/bench-wake.sh [--quick] [--rounds N] [--old MODULE.so] [--no-docs] [--keep]
#
# Runs scripts/bench-wake.pl (its header says what it measures and how):
# how late a duplicate waiting for its original is answered after the
# original's end, in the original's worker and in the other one, on Redis
# and on the zone store; with --old, the same for another build of the
# module beside it. Its table goes to stdout and build/bench/wake.md, and
# into docs/performance.md between the bench:begin/end wake-up markers (not
# with --no-docs, nor when a request was not answered as it should have
# been: the exit status is then 1).
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
    --old) args+=(--old "${2:?}"); shift ;;
    --no-docs) docs=0 ;;
    --keep) keep=1; args+=(--keep) ;;
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    *) echo "bench-wake.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

source "$repo/scripts/bench-lib.sh"
[ -f "${STRESS_MODULE:-$repo/build/ngx_http_idempotency_module.so}" ] || die "the module is missing: build it first (make module)"
bench_init wake
mkdir -p "$repo/build/bench"
status=0
perl "$repo/scripts/bench-wake.pl" "${args[@]}" --out "$tmp/wake.md" || status=$?
[ -s "$tmp/wake.md" ] && cp "$tmp/wake.md" "$repo/build/bench/wake.md"
if [ "$status" = 0 ] && [ "$docs" = 1 ]; then
    how="\`scripts/bench-wake.sh${args[*]:+ ${args[*]}}\`"
    doc_block wake-up "$tmp/wake.md" "$how"
elif [ "$docs" = 1 ]; then
    echo "bench-wake.sh: the cell did not run as it should: docs/performance.md left alone" >&2
fi
exit "$status"
