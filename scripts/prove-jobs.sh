#!/usr/bin/env bash
# scripts/prove-jobs.sh [PROVE_OPTION ...] [FILE_OR_DIR ...] — prove, run as
# PROVE_JOBS (default 1) processes at once over the Test::Nginx files: the
# files are dealt out in turn, each process has its own
# TEST_NGINX_SERVROOT (the one given, or t/servroot, with "-jN" added), and
# every file still starts its own fixtures on free ports. Each process's
# output is printed whole, one after the other, then one line saying how
# they went; the exit status is prove's, or 1 if any process failed.
# With PROVE_JOBS=1 it is prove itself. A directory stands for its *.t files
# (as prove -r would find them); options are passed to every process.
# Most of a file's time is spent waiting (nginx restarts, Redis, timers), so
# two processes on two cores take about 60 % of the time of one.
set -uo pipefail

jobs=${PROVE_JOBS:-1}
if ! [[ "$jobs" =~ ^[1-9][0-9]*$ ]]; then
    echo "prove-jobs: PROVE_JOBS must be a positive number, not \"$jobs\"" >&2
    exit 2
fi

opts=()
files=()
while [ $# -gt 0 ]; do
    case "$1" in
        -r) ;;                                   # directories are expanded below
        -I) opts+=("$1" "$2"); shift ;;
        -*) opts+=("$1") ;;
        *)  if [ -d "$1" ]; then
                while IFS= read -r f; do files+=("$f"); done < <(find "$1" -name '*.t' -type f | sort)
            else
                files+=("$1")
            fi ;;
    esac
    shift
done

if [ "$jobs" -eq 1 ] || [ ${#files[@]} -le 1 ]; then
    exec prove "${opts[@]}" "${files[@]}"
fi

root=${TEST_NGINX_SERVROOT:-$PWD/t/servroot}
out=$(mktemp -d "${TMPDIR:-/tmp}/prove-jobs.XXXXXX")
trap 'rm -rf "$out"' EXIT
pids=()
for ((j = 0; j < jobs; j++)); do
    mine=()
    for ((i = j; i < ${#files[@]}; i += jobs)); do
        mine+=("${files[i]}")
    done
    [ ${#mine[@]} -gt 0 ] || continue
    TEST_NGINX_SERVROOT="$root-j$j" prove "${opts[@]}" "${mine[@]}" > "$out/$j.log" 2>&1 &
    pids+=("$!")
done

status=0
failed=0
for j in "${!pids[@]}"; do
    wait "${pids[j]}"
    rc=$?
    echo "---- prove-jobs: process $((j + 1)) of ${#pids[@]}"
    cat "$out/$j.log"
    if [ "$rc" -ne 0 ]; then
        status=1
        failed=$((failed + 1))
    fi
done
echo "prove-jobs: ${#files[@]} files in ${#pids[@]} processes: $([ "$status" -eq 0 ] && echo "all passed" || echo "$failed FAILED")"
exit "$status"
