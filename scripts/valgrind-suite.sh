#!/usr/bin/env bash
# Runs the Test::Nginx suite with every nginx process under valgrind memcheck
# and fails if valgrind reported anything. Test failures under valgrind are
# shown but not fatal: its slowdown trips the blocks with tight Redis timeouts.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
logs="$repo/build/valgrind"
rm -rf "$logs" && mkdir -p "$logs"
inc=; perl -MTest::Nginx::Socket -e1 2>/dev/null || inc="-I $repo/t/standin"
cd "$repo"
VALGRIND_LOG_DIR="$logs" NGINX_BIN="${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}" \
    TEST_NGINX_BINARY="$repo/scripts/valgrind-nginx.sh" TEST_NGINX_SERVROOT="$repo/build/valgrind-servroot" \
    prove $inc -r t > "$logs/prove.log" 2>&1
echo "prove under valgrind: $(grep -E '^(Result|Files=)' "$logs/prove.log" | tr '\n' ' ')"
grep -E '^t/.*(Failed|Wstat)' "$logs/prove.log" || true
reports=$(find "$logs" -name 'vg.*.log' -size +0 | wc -l)
echo "nginx processes checked: $(find "$logs" -name 'vg.*.log' | wc -l); with valgrind reports: $reports"
if [ "$reports" -ne 0 ]; then
    find "$logs" -name 'vg.*.log' -size +0 -exec cat {} + | head -100
    exit 1
fi
