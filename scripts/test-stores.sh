#!/usr/bin/env bash
# make test-stores: the Test::Nginx files that talk to Redis run against
# each store server users run besides Debian 12's Redis 7.0 (the one `make
# test` uses), one server after the other. For each name of STORES:
#   1. scripts/store-server.sh NAME: the server, built from the Debian
#      archive's source the first time and kept in the cache directory;
#   2. scripts/store-server.sh --check NAME: one line saying what it was
#      built from, what its --version claims, and how it answers
#      SET k w IFEQ x (a command the module is to use);
#   3. STORE_TESTS by scripts/prove-jobs.sh (PROVE_JOBS processes) with
#      TEST_REDIS_SERVER set to it: every Redis, Cluster node, sentinel and
#      TLS server the files start is that server, its Cluster made by its
#      own cli; servroot and prove's output in build/stores/NAME/.
# The builds that are missing run one after the other in the background,
# at a lower priority (nice), from the start: a file spends most of its time
# waiting, so the next server builds while the last one is tested (each
# build's output in build/stores/NAME/build.log). Then a table: per server,
# what it is, the seconds its build took (0: from the cache) and the files
# waited for it, the files' seconds, and how they went. Non-zero if any
# build, check or file failed; every server is run all the same.
#   STORES        names (default "valkey-8 valkey-9 redis-8")
#   STORE_TESTS   the files (the Makefile's list)
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
read -r -a stores <<< "${STORES:-valkey-8 valkey-9 redis-8}"
read -r -a tests <<< "${STORE_TESTS:?STORE_TESTS: the test files}"
inc=(); perl -MTest::Nginx::Socket -e1 2>/dev/null || inc=(-I "$repo/t/standin")
say() { printf 'test-stores: %s\n' "$*" >&2; }
t0=$SECONDS

for name in "${stores[@]}"; do
    rm -rf "$repo/build/stores/$name" && mkdir -p "$repo/build/stores/$name"
done
# The builds, in a session of their own so that they end with this script
# (store-server.sh takes a lock per name: asking for a server being built
# waits for it).
setsid nice -n 10 bash -c 'for name; do
        scripts/store-server.sh "$name" > /dev/null 2>> "build/stores/$name/build.log"
    done' builds "${stores[@]}" &
builds=$!
trap 'kill -- -"$builds" 2> /dev/null' EXIT
trap 'exit 130' INT TERM

rows=()
status=0
for name in "${stores[@]}"; do
    out="$repo/build/stores/$name"
    say "$name: the server (its build awaited)"
    start=$SECONDS
    bin=$("$repo/scripts/store-server.sh" "$name" 2>> "$out/build.log")
    rc=$?
    waited=$((SECONDS - start))
    build_secs=$(sed -n 's/.*: built in \([0-9]*\) s$/\1/p' "$out/build.log" | tail -1)
    sed 's/^/    /' "$out/build.log" >&2
    if [ "$rc" != 0 ]; then
        rows+=("$name | - | build FAILED after ${build_secs:-?} s | - | build/stores/$name/build.log")
        status=1
        continue
    fi
    check=$("$repo/scripts/store-server.sh" --check "$name") || status=1
    printf '%s\n' "$check"
    version=$("$bin" --version | sed -n 's/^\([A-Za-z]*\) server v=\([^ ]*\).*/\1 \2/p')
    say "$name ($bin): ${#tests[@]} files, PROVE_JOBS=${PROVE_JOBS:-1}"
    start=$SECONDS
    TEST_REDIS_SERVER="$bin" TEST_NGINX_SERVROOT="$out/servroot" \
        "$repo/scripts/prove-jobs.sh" "${inc[@]}" "${tests[@]}" 2>&1 | tee "$out/prove.log"
    rc=${PIPESTATUS[0]}
    suite_secs=$((SECONDS - start))
    if [ "$rc" = 0 ]; then
        result=passed
    else
        status=1
        failed=$(sed -n 's/^\(t\/[^ ]*\.t\) *(Wstat.*/\1/p' "$out/prove.log" | sort -u | tr '\n' ' ')
        result="FAILED: ${failed:-see build/stores/$name/prove.log}"
    fi
    rows+=("$name | $version | ${build_secs:-0} (waited $waited) | $suite_secs | $result")
done

printf '\n| store | server | build s | files s | result |\n|---|---|---|---|---|\n'
printf '| %s |\n' "${rows[@]}"
say "${#stores[@]} servers in $((SECONDS - t0)) s: $([ "$status" = 0 ] && echo "all passed" || echo FAILED)"
exit "$status"
