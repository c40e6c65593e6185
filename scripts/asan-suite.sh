#!/usr/bin/env bash
# Builds the module with AddressSanitizer and UndefinedBehaviorSanitizer in
# build/asan/ (its own copy of the nginx-dev tree, configured like the
# Makefile's build/nginx/, with the sanitizer flags for the C++ sources and
# the generated modules file alike), then runs the Test::Nginx suite with
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

# -O1 and no _FORTIFY_SOURCE: the __*_chk functions it substitutes are not all
# checked by ASan's interceptors. -fsanitize-recover=address goes with
# halt_on_error=0: a process reports every error and carries on.
san="-fsanitize=address,undefined -fsanitize-recover=address -fno-omit-frame-pointer"
cc_opt="-g -O1 -fPIC $san"
# -z nodelete: nginx dlclose()s its modules when it destroys the cycle at exit,
# before the leak check; kept mapped, the module's frames stay symbolized and
# its globals are still scanned for pointers.
# -static-libubsan: with gcc 12's libubsan.so beside the preloaded libasan.so,
# libubsan's own call to __sanitizer_set_report_path binds to libasan's copy,
# so UBSan's reports go to stderr, which nginx has pointed at its error log,
# and ASan's follow UBSAN_OPTIONS' log_path. Linked into the module and kept
# local by module/exports.map, the UBSan runtime logs where it is told to.
ld_opt="-Wl,-z,relro -Wl,-z,now -Wl,-z,nodelete -fPIC $san -static-libubsan"

asan_rt=$(gcc -print-file-name=libasan.so)
[ -e "$asan_rt" ] || { echo "asan-suite: $asan_rt not found (gcc's libasan)" >&2; exit 1; }
export ASAN_RUNTIME="$asan_rt" NGINX_BIN="$nginx_bin"

# ---- build: nginx's configure on a private copy of the nginx-dev tree (again
# when config or the flags change), then nginx's make, which rebuilds what
# changed in module/.
set -e
stamp="$asan/nginx/asan-flags"
if [ ! -f "$asan/nginx/objs/Makefile" ] || [ "$repo/config" -nt "$asan/nginx/objs/Makefile" ] \
   || [ "$(cat "$stamp" 2>/dev/null)" != "$cc_opt|$ld_opt" ]; then
    rm -rf "$asan/nginx"
    mkdir -p "$asan"
    cp -r "$src" "$asan/nginx"
    (
        cd "$asan/nginx"
        if [ -f conf_flags ]; then . ./conf_flags; else NGX_CONF_FLAGS=(--with-compat); fi
        ./configure --with-cc-opt="$cc_opt" --with-ld-opt="$ld_opt" "${NGX_CONF_FLAGS[@]}" \
            --add-dynamic-module="$repo" > configure.log || { cat configure.log; exit 1; }
    )
    echo "$cc_opt|$ld_opt" > "$stamp"
fi
make -s -C "$asan/nginx" -f objs/Makefile modules
cp "$asan/nginx/objs/$so" "$asan/$so.tmp" && mv -f "$asan/$so.tmp" "$asan/$so"  # a new inode
if nm -D --defined-only "$asan/$so" | grep __sanitizer_ >/dev/null \
   || readelf -d "$asan/$so" | grep 'NEEDED.*libubsan' >/dev/null; then
    echo "asan-suite: $so shares or exports the UBSan runtime: its reports would be lost" >&2
    exit 1
fi
echo "load_module $asan/$so; events {}" > "$asan/load-check.conf"
ASAN_OPTIONS=log_path=stderr:atexit=0:detect_leaks=0 UBSAN_OPTIONS=log_path=stderr \
    "$repo/scripts/asan-nginx.sh" -t -q -p "$asan" -c "$asan/load-check.conf" \
    -g 'error_log stderr; pid /dev/null;'
set +e

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
