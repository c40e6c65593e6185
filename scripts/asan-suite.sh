#!/usr/bin/env bash
# Builds the module with AddressSanitizer and UndefinedBehaviorSanitizer in
# build/asan/ (scripts/asan-build.sh: its own copy of the nginx-dev tree,
# configured like the Makefile's build/nginx/, with the sanitizer flags for
# the C++ sources and the generated modules file alike), then runs the Test::Nginx suite with
# every nginx under scripts/asan-nginx.sh, loading that build. Fails if a
# sanitizer reported anything about the module, or if prove fails.
# ASAN_TESTS="t/037-tls.t t/038-tls-cluster.t" runs only those files.
#
# What counts as a report: every ASan memory error and every UBSan runtime
# error, wherever it is; a leak when its allocation stack goes through the
# module. Leaks with no module frame are nginx's own by design (the init
# cycle's pool of a configuration that fails to load, the connection and event
# arrays of a process that exits): counted and kept in build/asan/logs, not
# fatal.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
asan="$repo/build/asan"
logs="$asan/logs"
src=${NGINX_SRC:-/usr/share/nginx/src}
nginx_bin=${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}
so=ngx_http_idempotency_module.so

asan_rt=$(gcc -print-file-name=libasan.so)
[ -e "$asan_rt" ] || { echo "asan-suite: $asan_rt not found (gcc's libasan)" >&2; exit 1; }
export ASAN_RUNTIME="$asan_rt" NGINX_BIN="$nginx_bin"

# ---- build (scripts/asan-build.sh: build/asan/, the flags and why)
NGINX_SRC="$src" "$repo/scripts/asan-build.sh" > /dev/null || exit 1

# ---- the suite
rm -rf "$logs" "$asan"/servroot* && mkdir -p "$logs"
inc=; perl -MTest::Nginx::Socket -e1 2>/dev/null || inc="-I $repo/t/standin"
cd "$repo"
start=$SECONDS
ASAN_LOG_DIR="$logs" TEST_NGINX_BINARY="$repo/scripts/asan-nginx.sh" \
    TEST_NGINX_SERVROOT="$asan/servroot" TEST_NGINX_MODULE="$asan/$so" \
    "$repo/scripts/prove-jobs.sh" $inc ${ASAN_TESTS:--r t} > "$logs/prove.log" 2>&1
prove_rc=$?
echo "prove under ASan+UBSan ($((SECONDS - start)) s): $(grep -E '^(Result|Files=)' "$logs/prove.log" | tr '\n' ' ')"
grep -E '^t/.*(Failed|Wstat)' "$logs/prove.log" || true

# ---- the verdict: a file is a report by the crash sentinel's rule
# (t/lib/Idem/CrashSentinel.pm, sanitizer_findings: which is also how it
# fails the block during which a report was written): what is left of it
# but for ASan's exit statistics, unless that is only leaks with no module
# frame.
summary=$(perl -I"$repo/t/lib" -MIdem::CrashSentinel -e '
    my (%pid, @reports, @nginx_leaks);
    for my $f (@ARGV) {
        $pid{$1} = 1 if $f =~ /\.(\d+)$/;
        open my $fh, "<", $f or next;
        my $text = do { local $/; <$fh> } // "";
        if (my @found = Idem::CrashSentinel::sanitizer_findings($text, 1)) { push @reports, $f }
        elsif (Idem::CrashSentinel::without_exit_stats($text) =~ /\S/) { push @nginx_leaks, $f }
    }
    print scalar(keys %pid), " ", scalar(@nginx_leaks), "\n", map { "$_\n" } @reports;
' $(find "$logs" -type f \( -name 'asan.*' -o -name 'ubsan.*' \) | sort))
read -r procs nginx_leaks <<< "$(head -1 <<< "$summary")"
reports=$(tail -n +2 <<< "$summary")
echo "nginx processes checked: $procs; with sanitizer reports: $(grep -c . <<< "$reports")" \
     "(and $nginx_leaks with only nginx's own leaks, not counted)"
status=0
if [ -n "$reports" ]; then
    for f in $reports; do
        echo "--- $f"
        sed '/^AddressSanitizer exit stats:/,/^Global quarantine stats:/d' "$f" | head -80
    done | head -400
    status=1
fi
[ "$prove_rc" -eq 0 ] || status=1
exit $status
