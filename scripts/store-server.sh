#!/usr/bin/env bash
# scripts/store-server.sh NAME — the server binary of a store users run
# besides the machine's own Redis, built here from the Debian archive's
# source and kept in the cache directory; prints its path (valkey-server or
# redis-server; the cli and sentinel beside it), building it when missing.
# The fixtures take it as TEST_REDIS_SERVER (t/lib/Idem/Redis.pm), which
# `make prove`, `make stress` and `make test-stores` set from STORE_SERVER.
#
#   NAME       Debian suite and source package   versions accepted
#   valkey-8   trixie valkey                     8.*   (Debian 13's Valkey)
#   valkey-9   sid valkey                        9.*
#   redis-8    trixie redis                      8.*   (Debian 13's Redis)
#
# The source: the version the suite's signed Sources index names (lists
# fetched by scripts/debian-archive.sh, a day old at most), downloaded as
# the whole source package or else its orig tarball checked against the
# index (suite_source_tree). A version outside the name's range (the suite
# moved on to another major release) is refused: that is a new name. Built
# with `make BUILD_TLS=yes MALLOC=libc` against the machine's OpenSSL (the
# archive's .deb binaries need a newer glibc than Debian 12's; libc's
# malloc spares building jemalloc), installed with its PREFIX into
# $NGINX_IDEM_CACHE/stores/NAME/VERSION-KEY/bin (KEY: the suite, the kind
# of source, the make arguments and the compiler's version), the build tree
# removed; builds of other versions of NAME removed too. About 2 minutes a
# server on 2 idle cores; a few milliseconds once built. When the archive
# cannot be read and a build of NAME is in the cache, that one is used,
# with a warning.
#
#   scripts/store-server.sh NAME           the path
#   scripts/store-server.sh --check NAME   one line to stdout: the path, what
#                                          it was built from, its --version,
#                                          and its answers to SET ... IFEQ
#                                          (started on a private Unix socket,
#                                          no TCP port); non-zero if the
#                                          binary is not the version it
#                                          claims, or if NAME must answer
#                                          IFEQ and does not
#   STORE_SERVER_JOBS   make -j (default: the number of CPUs)
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/scripts/debian-archive.sh"

check=; [ "${1:-}" = --check ] && { check=1; shift; }
name=${1:-}
# NAME: suite, source package, accepted upstream versions (a glob), the
# server's binary, whether SET ... IFEQ must work
case $name in
    valkey-8) suite=trixie pkg=valkey range='8.*' server=valkey-server ifeq=yes ;;
    valkey-9) suite=sid    pkg=valkey range='9.*' server=valkey-server ifeq=yes ;;
    redis-8)  suite=trixie pkg=redis  range='8.*' server=redis-server  ifeq=no  ;;
    *) say "usage: $0 [--check] valkey-8|valkey-9|redis-8"; exit 2 ;;
esac
jobs=${STORE_SERVER_JOBS:-$(nproc 2>/dev/null || echo 2)}
make_args=(BUILD_TLS=yes MALLOC=libc)
unset MAKEFLAGS MFLAGS MAKELEVEL
cache="$idem_cache/stores/$name"
log() { say "store-server $name: $*"; }
mkdir -p "$cache"

# One build of a name at a time (two make targets at once, or CI beside a
# developer): the second waits for the first's result.
exec 9> "$cache.lock"
flock -w 1200 9 || { log "another build of $name still holds $cache.lock after 20 minutes"; exit 1; }

# The newest build in the cache, for when the archive cannot be read.
cached_build() {
    local b
    b=$(ls -dt "$cache"/*/built 2>/dev/null | head -1)
    [ -n "$b" ] && printf '%s\n' "${b%/built}"
}

# ---- 1. which version
version=
if suite_update "$suite"; then
    version=$(suite_source_version "$suite" "$pkg")
fi
if [ -z "$version" ]; then
    bdir=$(cached_build) || { log "Debian $suite's Sources index names no $pkg, and none is built"; exit 1; }
    log "WARNING: Debian $suite's Sources index could not be read: the build in $bdir"
else
    upstream=${version#*:}; upstream=${upstream%-*}; upstream=${upstream%%+*}
    # shellcheck disable=SC2254
    case $upstream in
        $range) ;;
        *) log "Debian $suite serves $pkg $version, not $range: a store of its own name is due"; exit 1 ;;
    esac
    gcc_version=$(${CC:-cc} -dumpfullversion -dumpversion 2>/dev/null | head -1)
    key=$(printf '%s\n' "$suite $pkg $version cc $gcc_version" "${make_args[@]}" | sha256sum | cut -c1-12)
    bdir="$cache/${version//:/%3a}-$key"
fi

# ---- 2. the build, once per version and arguments
if [ ! -f "$bdir/built" ]; then
    start=$SECONDS
    rm -rf "$bdir" && mkdir -p "$bdir"
    log "downloading Debian $suite's source package $pkg $version"
    suite_source_tree "$suite" "$pkg" "$version" "$bdir/src" || exit 1
    log "make -j$jobs ${make_args[*]} (about 2 minutes on 2 idle CPUs)"
    if ! make -C "$bdir/src/tree" -j"$jobs" "${make_args[@]}" > "$bdir/make.log" 2>&1 \
       || ! make -C "$bdir/src/tree" "${make_args[@]}" PREFIX="$bdir" install > "$bdir/install.log" 2>&1; then
        grep -E -B2 -A6 'error:|\*\*\*' "$bdir/make.log" "$bdir/install.log" | head -60 >&2
        log "the build failed ($bdir/make.log)"; exit 1
    fi
    [ -x "$bdir/bin/$server" ] || { log "the build made no bin/$server"; exit 1; }
    printf '%s\n' "$upstream" > "$bdir/upstream-version"
    printf '%s\n' "Debian $suite's $pkg $version ($source_kind), make ${make_args[*]}" > "$bdir/built"
    rm -rf "$bdir/src/tree"
    log "built in $((SECONDS - start)) s"
    # Builds of other versions are not needed any more.
    find "$cache" -mindepth 1 -maxdepth 1 ! -path "$bdir" -exec rm -rf {} +
fi
bin="$bdir/bin/$server"
[ -n "$check" ] || { printf '%s\n' "$bin"; exit 0; }

# ---- 3. --check: the version it claims, and SET ... IFEQ
built_from=$(cat "$bdir/built")
claimed=$("$bin" --version 2>&1 | head -1)
want=$(cat "$bdir/upstream-version")
ok=1
[[ "$claimed" == *" v=$want "* ]] || { ok=; claimed+=" (NOT v=$want)"; }
sock_dir=$(mktemp -d "${TMPDIR:-/tmp}/store-check.XXXXXX")
"$bin" --port 0 --unixsocket "$sock_dir/s" --save '' --appendonly no --dir "$sock_dir" --daemonize no \
    > "$sock_dir/log" 2>&1 &
pid=$!
cli() { "${bin%-server}-cli" -s "$sock_dir/s" "$@" 2>&1; }
up=
for _ in $(seq 100); do    # 10 s at most
    [ "$(cli PING)" = PONG ] && { up=1; break; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
if [ -n "$up" ]; then
    cli SET k v > /dev/null
    miss=$(cli SET k w IFEQ x); hit=$(cli SET k w IFEQ v); now=$(cli GET k)
    answers="SET k v, then SET k w IFEQ x: ${miss:-(nil)}, IFEQ v: $hit, GET k: $now"
    if [ "$ifeq" = yes ] && { [ -n "$miss" ] || [ "$hit" != OK ] || [ "$now" != w ]; }; then
        answers+=" (IFEQ NOT ANSWERED AS REQUIRED)"; ok=
    fi
else
    answers="the server did not answer PING: $(tail -3 "$sock_dir/log" | tr '\n' ' ')"
    ok=
fi
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
rm -rf "$sock_dir"
printf '%s: %s; %s; %s\n' "$name" "$built_from" "$claimed" "$answers"
[ -n "$ok" ]
