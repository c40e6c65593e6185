#!/usr/bin/env bash
# Builds the Debian package libnginx-mod-http-idempotency (debian/) for
# Debian 13 (trixie), against trixie's nginx-dev, in a minimal trixie root
# made with debootstrap, and checks that it loads into trixie's nginx:
#     scripts/build-deb-trixie.sh [OUT]        OUT defaults to build/deb-trixie
#
# Needs root (chroot, mounts); re-runs itself with sudo when not root.
#
# The root lives outside the repository, in
#     ${XDG_CACHE_HOME:-$HOME/.cache}/nginx-idempotency/trixie-root
# (TRIXIE_ROOT overrides it) and is reused: only the first run debootstraps
# (checked against /usr/share/keyrings/debian-archive-keyring.gpg) and
# installs the build dependencies; later runs refresh its package lists and
# upgrade it once a week (TRIXIE_REFRESH=1: now). The machine's own /etc/apt
# and packages are never touched, except that debootstrap itself is installed
# when missing.
#
# In the root: the sources (config module debian README.md docs) are copied to
# /build/src, debian/changelog gets a trixie entry whose version is the
# Debian 12 one plus +deb13 (0.1.0-1 -> 0.1.0-1+deb13), so that the two
# packages never share a name and the trixie one is newer than the bookworm
# one, and `dpkg-buildpackage -b -us -uc` runs with DEB_BUILD_OPTIONS=noddebs.
# The .deb (with .buildinfo and .changes) is copied to OUT. Then the checks:
# Depends names trixie's nginx ABI (nginx-dev's nginx:abi, nginx-abi-1.26.*),
# which trixie's nginx provides; the package installs with apt in the root
# (a policy-rc.d keeps any service from starting); `nginx -t` with trixie's
# own nginx.conf loads it through modules-enabled/50-mod-http-idempotency.conf;
# and, with trixie's redis-server (hiredis 1.2 in the module), a POST is
# executed and its retry replayed.
# The package is purged from the root afterwards, so the cached root stays a
# build root.
#
# The root's machinery (debootstrap, mounts, chroot) is scripts/debian-root.sh's.
# /proc and /dev are mounted in the root only while the script runs and are
# unmounted on every exit. Every step that waits on the network or a build
# runs under `timeout`. Environment: DEBIAN_MIRROR and DEBIAN_SECURITY_MIRROR
# (by default the machine's own apt sources' .../debian and .../debian-security
# URIs, read, not changed), TRIXIE_ROOT, TRIXIE_REFRESH, DEB_SUFFIX (+deb13).
#
# Measured on 2 cores: the first run about 3 to 4.5 minutes (debootstrap 45-90 s,
# build dependencies 1-2 minutes, the build and the checks about 50 s), every
# later run about 1 minute; the cached root takes about 830 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

prog=build-deb-trixie
. scripts/debian-root.sh

suite=trixie
abi_prefix=nginx-abi-1.26.
root_mirrors
suffix=${DEB_SUFFIX:-+deb13}
pkg=libnginx-mod-http-idempotency
build_deps=(build-essential dpkg-dev debhelper nginx-dev libhiredis-dev libzstd-dev libsimdjson-dev libssl-dev)
check_deps=(redis-server curl)  # the check that the installed module answers requests

out=${1:-build/deb-trixie}
case $out in /*) ;; *) out=$repo/$out ;; esac

cache=${XDG_CACHE_HOME:-$HOME/.cache}/nginx-idempotency
root=${TRIXIE_ROOT:-$cache/$suite-root}

if [ "$(id -u)" -ne 0 ]; then
    echo "build-deb-trixie: not root, running again with sudo" >&2
    exec sudo env TRIXIE_ROOT="$root" TRIXIE_REFRESH="${TRIXIE_REFRESH:-}" \
        DEBIAN_MIRROR="$mirror" DEBIAN_SECURITY_MIRROR="$security_mirror" \
        DEB_SUFFIX="$suffix" SUDO_OWNER="$(id -u):$(id -g)" "$0" "$out"
fi

root_tools
root=$(root_path "$root")

# One run at a time per root.
exec 9>"$root.lock"
flock -w 1800 9 || die "another run holds $root.lock"

# /proc and /dev, unmounted on every exit.
trap 'root_unmount_all "$root"' EXIT
trap 'exit 130' INT TERM
apt_opts=("${root_apt_opts[@]}")

# --- the root ----------------------------------------------------------------

ready=$root/.nginx-idempotency-ready
if [ ! -e "$ready" ]; then
    root_debootstrap "$suite" "$root"
    rm -f "$root/.nginx-idempotency-refreshed"
fi

root_mount "$root"

refreshed=$root/.nginx-idempotency-refreshed
if [ -n "${TRIXIE_REFRESH:-}" ] || [ ! -e "$refreshed" ] || [ -n "$(find "$refreshed" -mtime +6)" ]; then
    step "apt-get update and upgrade in the root"
    in_root_logged apt-update 600 apt-get "${apt_opts[@]}" update
    in_root_logged apt-upgrade 1200 apt-get "${apt_opts[@]}" -y dist-upgrade
    touch "$refreshed"
fi
installed=$(in_root 60 dpkg-query -W -f='${Status}\n' "${build_deps[@]}" "${check_deps[@]}" 2>/dev/null | grep -c 'install ok installed' || true)
if [ "$installed" -ne $((${#build_deps[@]} + ${#check_deps[@]})) ]; then
    step "installing the build dependencies in the root: ${build_deps[*]} ${check_deps[*]}"
    in_root_logged apt-install 1200 apt-get "${apt_opts[@]}" -y install "${build_deps[@]}" "${check_deps[@]}"
    in_root_logged apt-clean 300 apt-get "${apt_opts[@]}" clean
fi
touch "$ready"

# A package left installed by an interrupted run.
in_root 120 dpkg --purge "$pkg" >/dev/null 2>&1 || true

# --- build -------------------------------------------------------------------

version=$(dpkg-parsechangelog -l debian/changelog -S Version)
maintainer=$(dpkg-parsechangelog -l debian/changelog -S Maintainer)
date=$(dpkg-parsechangelog -l debian/changelog -S Date)
trixie_version=$version$suffix
arch=$(in_root 60 dpkg --print-architecture)

step "copying the sources to $root/build/src (version $trixie_version)"
rm -rf --one-file-system "$root/build"
mkdir -p "$root/build/src"
cp -r config module debian README.md docs contrib "$root/build/src/"
mkdir -p "$root/build/src/scripts" && cp scripts/idempotency-admin scripts/train-dictionary.sh "$root/build/src/scripts/"
{
    printf '%s (%s) %s; urgency=medium\n\n' "$pkg" "$trixie_version" "$suite"
    printf '  * Build for Debian 13 (trixie), against its nginx-dev.\n\n'
    printf ' -- %s  %s\n\n' "$maintainer" "$date"
    cat debian/changelog
} > "$root/build/src/debian/changelog"

step "dpkg-buildpackage -b -us -uc in the root"
log=$root/build/build.log
if ! in_root 1200 sh -c 'cd /build/src && DEB_BUILD_OPTIONS=noddebs dpkg-buildpackage -b -us -uc -Jauto' > "$log" 2>&1; then
    tail -n 40 "$log" >&2
    die "dpkg-buildpackage failed (log: $log)"
fi

deb_name=${pkg}_${trixie_version}_${arch}.deb
[ -f "$root/build/$deb_name" ] || die "no $deb_name in $root/build"
rm -rf "$out"
mkdir -p "$out"
cp "$root/build/$deb_name" "$root/build/"*.buildinfo "$root/build/"*.changes "$out/"
cp "$log" "$out/build.log"
step "built $out/$deb_name"

# --- checks ------------------------------------------------------------------

free_port() {
    perl -MIO::Socket::INET -e 'print IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0, Listen => 1)->sockport'
}

# The installed package at work in the root: trixie's redis-server and nginx
# (on loopback ports), a POST and its retry with the same key. The first is
# executed (201 with its own request id), the retry gets the same bytes back
# with Idempotent-Replayed: true. Both servers are ended by their pids.
serve_and_replay() {
    local redis_port nginx_port upstream_port ok=1 first='' second=''
    redis_port=$(free_port) nginx_port=$(free_port) upstream_port=$(free_port)
    cat > "$root/build/serve.conf" <<EOF
include /etc/nginx/modules-enabled/*.conf;
error_log /build/serve-error.log info;
pid /build/serve-nginx.pid;
events {}
http {
    access_log off;
    idempotency_redis 127.0.0.1:$redis_port;
    idempotency_scope "";
    server {
        listen 127.0.0.1:$nginx_port;
        location / {
            idempotency on;
            proxy_pass http://127.0.0.1:$upstream_port;
        }
    }
    server {
        listen 127.0.0.1:$upstream_port;
        location / { return 201 "executed \$request_id\n"; }
    }
}
EOF
    rm -f "$root/build/serve-nginx.pid" "$root/build/serve-redis.pid"
    in_root 60 redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
        --daemonize yes --pidfile /build/serve-redis.pid --logfile /build/serve-redis.log || return 1
    for _ in $(seq 1 100); do  # until Redis answers (at most 10 s)
        [ "$(in_root 10 redis-cli -p "$redis_port" ping 2>/dev/null)" = PONG ] && break
        sleep 0.1
    done
    # nginx returns once its master listens (daemon on)
    if in_root 60 /usr/sbin/nginx -c /build/serve.conf; then
        post() {
            curl -sS -m 10 -D - -X POST -H 'Idempotency-Key: trixie-check' --data x \
                "http://127.0.0.1:$nginx_port/pay" | tr -d '\r'
        }
        first=$(post) && second=$(post) || ok=0
        grep -q '^HTTP/1.1 201' <<<"$first" || ok=0
        grep -q '^Idempotent-Replayed: true' <<<"$second" || ok=0
        [ -n "$(grep '^executed' <<<"$first")" ] || ok=0
        [ "$(grep '^executed' <<<"$first")" = "$(grep '^executed' <<<"$second")" ] || ok=0
        [ "$ok" -eq 1 ] || { printf -- '--- first:\n%s\n--- retry:\n%s\n' "$first" "$second"
                             tail -n 20 "$root/build/serve-error.log"; } >&2
        kill "$(cat "$root/build/serve-nginx.pid")" 2>/dev/null || true
    else
        ok=0
    fi
    kill "$(cat "$root/build/serve-redis.pid" 2>/dev/null)" 2>/dev/null || true
    [ "$ok" -eq 1 ]
}

fail=0
check() {  # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then echo "ok - $what"; else echo "not ok - $what"; fail=1; fi
}

depends=$(dpkg-deb -f "$out/$deb_name" Depends)
echo "Depends: $depends"
abi=$(in_root 60 sed -n 's/^nginx:abi=//p' /usr/share/nginx/src/debian/libnginx-mod.abisubstvars)
provides=$(in_root 60 dpkg-query -W -f='${Provides}' nginx)
nginx_version=$(in_root 60 dpkg-query -W -f='${Version}' nginx)
has() { tr ',' '\n' <<<"$1" | sed 's/ *(.*//; s/^ *//; s/ *$//' | grep -qxF "$2"; }
check "trixie's nginx-dev ABI is $abi ($abi_prefix*)" test "${abi#"$abi_prefix"}" != "$abi"
check "Depends names $abi" has "$depends" "$abi"
check "trixie's nginx $nginx_version provides $abi" has "$provides" "$abi"

cp "$out/$deb_name" "$root/build/check.deb"
if in_root 600 apt-get "${apt_opts[@]}" -y install /build/check.deb > "$root/build/install.log" 2>&1; then
    echo "ok - the package installs in the $suite root"
    check "modules-enabled/50-mod-http-idempotency.conf is linked" \
        test -L "$root/etc/nginx/modules-enabled/50-mod-http-idempotency.conf"
    check "nginx -t with $suite's nginx.conf (modules-enabled) loads the module" \
        sh -c "timeout 60 chroot '$root' /usr/sbin/nginx -T 2>&1 | tee '$root/build/nginx-T.log' |
               grep -q '^load_module modules/ngx_http_idempotency_module.so;' &&
               grep -q 'test is successful' '$root/build/nginx-T.log'"
    check "the module answers requests with $suite's nginx, hiredis and Redis: new, then replayed" serve_and_replay
else
    tail -n 20 "$root/build/install.log" >&2
    echo "not ok - the package installs in the $suite root"
    fail=1
fi
in_root 300 dpkg --purge "$pkg" >/dev/null 2>&1 || true

[ -z "${SUDO_OWNER:-}" ] || chown -R "$SUDO_OWNER" "$out"
ls -l "$out"/*.deb
step "done ($(du -sh --one-file-system "$root" | cut -f1) in $root)"
[ "$fail" -eq 0 ] || die "checks failed"
