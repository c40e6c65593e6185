#!/usr/bin/env bash
# Builds the module with AddressSanitizer and UndefinedBehaviorSanitizer:
# build/asan/ngx_http_idempotency_module.so, from its own copy of the
# nginx-dev tree configured like the Makefile's build/nginx/, with the
# sanitizer flags for the C++ sources and the generated modules file alike
# (configured again when config or the flags change; nginx's make rebuilds
# what changed in module/). Then checks that the build loads into nginx.
# Used by scripts/asan-suite.sh (make test-asan) and scripts/fuzz-gateway.pl
# (make fuzz-gateway); prints the module's path.
#
# This build alone passes -DIDEM_TEST_HOOKS: the test hooks of
# module/test_hooks.cpp (idempotency_test_store_raw) are in it, never in the
# Makefile's build, the package or the matrix.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
asan="$repo/build/asan"
src=${NGINX_SRC:-/usr/share/nginx/src}
so=ngx_http_idempotency_module.so

# -O1 and no _FORTIFY_SOURCE: the __*_chk functions it substitutes are not all
# checked by ASan's interceptors. -fsanitize-recover=address goes with
# halt_on_error=0: a process reports every error and carries on.
san="-fsanitize=address,undefined -fsanitize-recover=address -fno-omit-frame-pointer"
cc_opt="-g -O1 -fPIC $san -DIDEM_TEST_HOOKS"
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
[ -e "$asan_rt" ] || { echo "asan-build: $asan_rt not found (gcc's libasan)" >&2; exit 1; }

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
make -s -C "$asan/nginx" -f objs/Makefile modules >&2
cp "$asan/nginx/objs/$so" "$asan/$so.tmp" && mv -f "$asan/$so.tmp" "$asan/$so"  # a new inode
if nm -D --defined-only "$asan/$so" | grep __sanitizer_ >/dev/null \
   || readelf -d "$asan/$so" | grep 'NEEDED.*libubsan' >/dev/null; then
    echo "asan-build: $so shares or exports the UBSan runtime: its reports would be lost" >&2
    exit 1
fi
echo "load_module $asan/$so; events {}" > "$asan/load-check.conf"
ASAN_RUNTIME="$asan_rt" NGINX_BIN=${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)} \
ASAN_OPTIONS=log_path=stderr:atexit=0:detect_leaks=0 UBSAN_OPTIONS=log_path=stderr \
    "$repo/scripts/asan-nginx.sh" -t -q -p "$asan" -c "$asan/load-check.conf" \
    -g 'error_log stderr; pid /dev/null;' >&2
echo "$asan/$so"
