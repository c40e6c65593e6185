#!/usr/bin/env bash
# make test-newest-nginx: the Test::Nginx suite against the newest nginx the
# Debian archive serves, built here from Debian's source, with the module
# built against it as a dynamic module.
#
# Which nginx: the newest version among the source packages of the suites
# in NGINX_NEWEST_SUITES (default "sid trixie"; scripts/debian-archive.sh
# fetches their lists), the first of them, newest first, that can be
# downloaded: the whole source package (.dsc, orig tarball, Debian's
# debian.tar.xz; unpacked with dpkg-source, Debian's patches applied), or
# else the orig tarball alone (nginx.org's release as Debian took it in),
# verified by apt against the SHA256 of the suite's signed Sources index.
#
# How it is configured: like Debian's nginx binary. The conf_flags of the
# suite's nginx-dev of that version (Debian's configure arguments that
# matter to modules: --with-compat, --with-debug, ssl, http2, http3, ...),
# plus the static http modules Debian's `nginx -V` shows besides them
# (addition, flv, gunzip, ...); not the dynamic ones that need more
# libraries (perl, xslt, geoip, image_filter) nor mail and stream, which the
# suite does not use. Debian's paths (/etc/nginx, /var/lib/nginx, /run) are
# left out: nginx's defaults are relative to the prefix, which Test::Nginx
# sets to its server root with -p. An option this nginx's configure does not
# know (sid's --override-* are a Debian patch) is left out, and so is
# --with-http_v3_module if configure cannot build it.
#
# The nginx binary (configured without the module, so that nothing of this
# repository is in it) is built once per version and arguments in the cache
# directory ($NGINX_IDEM_CACHE/newest/build/). The module is built in
# build/newest/nginx, a copy of the same source configured the same way with
# --add-dynamic-module: configured again only when its arguments, config or
# the module's header list change; otherwise nginx's make rebuilds the
# module's objects that changed. Then prove runs the suite with that nginx
# and that module, its server root in build/newest/servroot.
#   NGINX_NEWEST_TESTS   the test files (default: -r t)
#   NGINX_NEWEST_JOBS    make -j (default: the number of CPUs)
#   --build-only         build, load the module, do not run the suite
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/scripts/debian-archive.sh"

build_only=; [ "${1:-}" = --build-only ] && build_only=1
read -r -a suites <<< "${NGINX_NEWEST_SUITES-sid trixie}"
jobs=${NGINX_NEWEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
cc_opt=${CC_OPT:--g -O2 -fstack-protector-strong -Wformat -Werror=format-security -fPIC -Wdate-time -D_FORTIFY_SOURCE=2}
ld_opt=${LD_OPT:--Wl,-z,relro -Wl,-z,now -fPIC}
# The static http modules of Debian's nginx binary that are not in
# conf_flags (its nginx -V, bookworm and trixie alike).
debian_static=(--with-http_addition_module --with-http_flv_module --with-http_gunzip_module
               --with-http_gzip_static_module --with-http_mp4_module --with-http_random_index_module
               --with-http_secure_link_module --with-http_sub_module)
unset MAKEFLAGS MFLAGS MAKELEVEL
work="$repo/build/newest"
cache="$idem_cache/newest"
so=ngx_http_idempotency_module.so
mkdir -p "$work" "$cache"
t0=$SECONDS
log() { say "test-newest-nginx: $*"; }

# ---- 1. the source: candidates newest first
cands=()    # "version suite"
index=""
for suite in "${suites[@]}"; do
    suite_update "$suite" || continue
    uris=$(suite_source_uris "$suite" nginx)
    version=$(sed -n 's/^[^ ]* nginx_\([^ ]*\)\.dsc .*/\1/p' <<< "$uris")
    [ -n "$version" ] || { log "Debian $suite: no nginx source package in its Sources index"; continue; }
    index+="$suite $uris"$'\n'
    log "Debian $suite serves nginx $version"
    # insertion by version, newest first
    placed=; new=()
    for c in "${cands[@]}"; do
        if [ -z "$placed" ] && dpkg --compare-versions "$version" gt "${c%% *}"; then
            new+=("$version $suite"); placed=1
        fi
        new+=("$c")
    done
    [ -n "$placed" ] || new+=("$version $suite")
    cands=("${new[@]}")
done
[ ${#cands[@]} -gt 0 ] || { log "no suite's Sources index could be read"; exit 1; }

# The choice is kept with the indexes it was made from: the same indexes
# mean the same choice, without asking the mirror again.
index_sum=$(sha256sum <<< "$index" | cut -c1-64)
selected=
if [ -f "$cache/selected" ] && [ "$(sed -n 1p "$cache/selected")" = "$index_sum" ]; then
    read -r sel_version sel_suite sel_kind sel_src < <(sed -n 2p "$cache/selected")
    [ -f "$sel_src/src/core/nginx.h" ] && selected=1
fi
if [ -z "$selected" ]; then
    for c in "${cands[@]}"; do
        version=${c%% *} suite=${c#* }
        dir="$cache/src/$suite-${version//:/%3a}"
        log "downloading Debian $suite's source package nginx $version"
        suite_source_tree "$suite" nginx "$version" "$dir" || continue
        sel_kind=$source_kind
        sel_version=$version sel_suite=$suite sel_src="$dir/tree"
        printf '%s\n%s %s %s %s\n' "$index_sum" "$sel_version" "$sel_suite" "$sel_kind" "$sel_src" > "$cache/selected"
        selected=1
        break
    done
fi
[ -n "$selected" ] || { log "no nginx source could be downloaded from: ${suites[*]}"; exit 1; }
# Sources of other versions are not needed any more.
find "$cache/src" -mindepth 1 -maxdepth 1 ! -path "${sel_src%/tree}" -exec rm -rf {} + 2>/dev/null
src=$sel_src
upstream=$(nginx_tree_version "$src")
case $sel_kind in
    source-package) what="Debian $sel_suite's source package nginx $sel_version" ;;
    *)              what="nginx $upstream, the orig tarball of Debian $sel_suite's nginx $sel_version" ;;
esac
log "nginx: $what"

# ---- 2. the configure arguments
dev=$(nginx_dev_tree "$sel_suite") || exit 1
dev_version=$(basename "${dev%/usr/share/nginx/src}")
[ "${dev_version//%3a/:}" = "$sel_version" ] \
    || log "note: the conf_flags are nginx-dev ${dev_version//%3a/:}'s, the source is $sel_version"
mapfile -d '' flags < <(cd "$src" && source_conf_flags "$dev/conf_flags")
[ ${#flags[@]} -gt 0 ] || { log "$dev/conf_flags gave no flags"; exit 1; }
args=(--with-cc-opt="$cc_opt" --with-ld-opt="$ld_opt")
dropped=()
for f in "${flags[@]}" "${debian_static[@]}"; do
    name=${f%%=*}
    case $name in
        --prefix|--conf-path|--http-log-path|--lock-path|--pid-path|--modules-path|--http-*-temp-path)
            continue ;;    # Debian's paths: nginx's relative defaults instead
    esac
    if ! grep -qF -- "$name" "$src/auto/options"; then dropped+=("$f"); continue; fi
    for a in "${args[@]}"; do [ "$a" = "$f" ] && continue 2; done
    args+=("$f")
done
[ ${#dropped[@]} -eq 0 ] || log "left out (this configure does not know them): ${dropped[*]}"

configure_tree() {    # DIR ARGS...: configure in DIR, log in DIR/configure.log
    local dir=$1; shift
    ( cd "$dir" && ./configure "$@" ) > "$dir/configure.log" 2>&1
}

# ---- 3. nginx itself, cached by version and arguments
gcc_version=$(${CC:-cc} -dumpfullversion -dumpversion 2>/dev/null | head -1)
key=$(printf '%s\n' "$sel_suite $sel_version $sel_kind $upstream cc $gcc_version" "${args[@]}" | sha256sum | cut -c1-12)
bdir="$cache/build/nginx-$upstream-$key"
nginx="$bdir/objs/nginx"
if [ -f "$bdir/built" ] && [ -x "$nginx" ]; then
    log "nginx $upstream: the build in $bdir"
    mapfile -t args < "$bdir/configure-args"
else
    start=$SECONDS
    rm -rf "$bdir" && mkdir -p "$bdir"
    cp -a "$src/." "$bdir/"
    log "nginx $upstream: configure (in $bdir)"
    if ! configure_tree "$bdir" "${args[@]}"; then
        if printf '%s\n' "${args[@]}" | grep -qx -- --with-http_v3_module; then
            log "configure failed with --with-http_v3_module; again without it:"
            tail -3 "$bdir/configure.log" >&2
            mapfile -t args < <(printf '%s\n' "${args[@]}" | grep -vx -- --with-http_v3_module)
            configure_tree "$bdir" "${args[@]}" || { tail -20 "$bdir/configure.log" >&2; exit 1; }
        else
            tail -20 "$bdir/configure.log" >&2; exit 1
        fi
    fi
    log "nginx $upstream: make -j$jobs (about 2 to 4 minutes on 2 CPUs)"
    if ! make -C "$bdir" -f objs/Makefile -j"$jobs" binary > "$bdir/make.log" 2>&1; then
        grep -E -B2 -A6 'error:|\*\*\*' "$bdir/make.log" | head -60 >&2
        log "nginx $upstream: make failed ($bdir/make.log)"; exit 1
    fi
    printf '%s\n' "${args[@]}" > "$bdir/configure-args"
    touch "$bdir/built"
    log "nginx $upstream: built in $((SECONDS - start)) s"
    # Builds of other versions or arguments are not needed any more.
    find "$cache/build" -mindepth 1 -maxdepth 1 ! -path "$bdir" -exec rm -rf {} +
fi
"$nginx" -V 2>&1 | sed 's/^/    /' >&2

# ---- 4. the module, in build/newest/nginx
mdir="$work/nginx"
stamp=$(printf '%s\n' "$bdir" "${args[@]}" "config $(sha256sum < "$repo/config")" \
        "headers $(cd "$repo" && ls module/*.hpp module/*/*.hpp 2>/dev/null | tr '\n' ' ')")
start=$SECONDS
if [ ! -f "$mdir/objs/Makefile" ] || [ "$(cat "$work/module-stamp" 2>/dev/null)" != "$stamp" ]; then
    log "module: configure (in build/newest/nginx)"
    rm -rf "$mdir" "$work/module-stamp" && mkdir -p "$mdir"
    cp -a "$src/." "$mdir/"
    configure_tree "$mdir" "${args[@]}" --add-dynamic-module="$repo" \
        || { tail -20 "$mdir/configure.log" >&2; exit 1; }
    printf '%s\n' "$stamp" > "$work/module-stamp"
fi
log "module: make modules"
if ! make -C "$mdir" -f objs/Makefile -j"$jobs" modules > "$mdir/make.log" 2>&1; then
    grep -E -B2 -A6 'error:|undefined reference|\*\*\*' "$mdir/make.log" | head -100 >&2
    log "module: make modules failed (build/newest/nginx/make.log)"; exit 1
fi
cp "$mdir/objs/$so" "$work/$so.tmp" && mv -f "$work/$so.tmp" "$work/$so"    # a new inode
log "module: built in $((SECONDS - start)) s"
echo "load_module $work/$so; events {}" > "$work/load-check.conf"
"$nginx" -t -q -p "$work" -c "$work/load-check.conf" -g 'error_log stderr; pid /dev/null;' \
    || { log "nginx $upstream does not load the module"; exit 1; }
build_secs=$((SECONDS - t0))
log "ready in $build_secs s: $nginx with build/newest/$so"
[ -z "$build_only" ] || exit 0

# ---- 5. the suite
inc=; perl -MTest::Nginx::Socket -e1 2>/dev/null || inc="-I $repo/t/standin"
rm -rf "$work"/servroot*
cd "$repo"
start=$SECONDS
TEST_NGINX_BINARY="$nginx" TEST_NGINX_MODULE="$work/$so" TEST_NGINX_SERVROOT="$work/servroot" \
    "$repo/scripts/prove-jobs.sh" $inc ${NGINX_NEWEST_TESTS:--r t} 2>&1 | tee "$work/prove.log"
rc=${PIPESTATUS[0]}
log "$what: the suite $( [ "$rc" = 0 ] && echo passed || echo FAILED) in $((SECONDS - start)) s (build $build_secs s); output in build/newest/prove.log"
exit "$rc"
