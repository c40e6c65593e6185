#!/usr/bin/env bash
# bench-stall.sh — the Redis-stall cell of the benchmark (what `make bench`
# runs after the wake-up cell, through scripts/bench.sh; also runnable alone).
#
#   scripts/bench-stall.sh [--quick] [--rounds N] [--old MODULE.so] [--no-docs] [--keep]
#
# Runs scripts/bench-stall.pl (its header says what it measures and how):
# a thousand duplicates following one event stream while Redis stalls for
# 1.5 idempotency_redis_timeout, on a loaded machine; with --old, the same
# for another build of the module beside it. Its table goes to stdout and
# build/bench/stall.md, and into docs/performance.md between the
# bench:begin/end redis-stall markers (not with --no-docs, nor when the
# cell could not run: the exit status is then 1).
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
    *) echo "bench-stall.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

source "$repo/scripts/bench-lib.sh"
[ -f "${STRESS_MODULE:-$repo/build/ngx_http_idempotency_module.so}" ] || die "the module is missing: build it first (make module)"
bench_init stall
mkdir -p "$repo/build/bench"
status=0
perl "$repo/scripts/bench-stall.pl" "${args[@]}" --out "$tmp/stall.md" || status=$?
[ -s "$tmp/stall.md" ] && cp "$tmp/stall.md" "$repo/build/bench/stall.md"
if [ "$status" = 0 ] && [ "$docs" = 1 ]; then
    how="\`scripts/bench-stall.sh${args[*]:+ ${args[*]}}\`"
    doc_block redis-stall "$tmp/stall.md" "$how"
elif [ "$docs" = 1 ]; then
    echo "bench-stall.sh: the cell did not run as it should: docs/performance.md left alone" >&2
fi
exit "$status"
