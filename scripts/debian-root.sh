# Sourced by scripts/build-deb-trixie.sh, scripts/docker-steps.sh and
# scripts/test-fresh-root.sh: Debian roots made with debootstrap, kept under
# the cache directory, and commands run in them with chroot. Needs root.
# The machine's own /etc/apt and packages are never touched.
#
# The caller sets `prog` (the name its messages start with) and `root` (the
# root the in_root functions run in), then calls root_mirrors.
#
#   root_mirrors                 sets mirror and security_mirror: DEBIAN_MIRROR
#                                and DEBIAN_SECURITY_MIRROR, else the machine's
#                                apt sources' .../debian and .../debian-security
#   root_debootstrap SUITE DIR   a minbase root (in place of an unfinished DIR),
#                                the release's signature checked
#                                against the archive keyring, its apt sources
#                                SUITE, SUITE-updates and SUITE-security, a
#                                policy-rc.d that keeps every service from starting
#   root_mount DIR               /proc and /dev in DIR (root_unmount_all DIR undoes)
#   root_overlay BASE DIR        a writable view of BASE at DIR/root (an overlay
#                                mount, else a copy); BASE is never written
#   root_base SUITE              the pristine minbase root that overlays are made
#                                of ($idem_cache/SUITE-base), held with a shared lock
#   in_root T CMD...             CMD in $root with a clean environment, under
#                                `timeout T`
#   in_root_logged NAME T CMD... the same, its output in $root.logs/NAME.log,
#                                whose tail is shown when it fails
#   step MESSAGE, die MESSAGE

idem_cache=${NGINX_IDEM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nginx-idempotency}
root_start=$SECONDS
step() { printf '[%s %4ds] %s\n' "$prog" $((SECONDS - root_start)) "$*"; }
die()  { echo "$prog: $*" >&2; exit 1; }

debian_keyring=/usr/share/keyrings/debian-archive-keyring.gpg
root_apt_opts=(-o Acquire::Retries=3 -o Acquire::http::Timeout=60 -o APT::Install-Recommends=false
               -o Dpkg::Use-Pty=false -q)

# The first URI of the machine's apt sources whose path ends in /$1.
host_mirror() {
    {
        sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | tr -s ' \t' '\n\n'
        sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\{0,1\}\([^[:space:]]\+\).*/\2/p' \
            /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null
    } | sed 's:/*$::' | grep -m1 "/$1\$" || true
}

root_mirrors() {
    mirror=${DEBIAN_MIRROR:-$(host_mirror debian)}
    [ -n "$mirror" ] || die "no .../debian URI in the apt sources: set DEBIAN_MIRROR"
    security_mirror=${DEBIAN_SECURITY_MIRROR:-$(host_mirror debian-security)}
    security_mirror=${security_mirror:-${mirror%/debian}/debian-security}
}

# Installs debootstrap and the archive keyring on the machine when missing.
root_tools() {
    command -v debootstrap >/dev/null || scripts/install-deps.sh debootstrap
    [ -r "$debian_keyring" ] || scripts/install-deps.sh debian-archive-keyring
}

# An absolute path for $1, refusing / and other short paths.
root_path() {
    local p
    mkdir -p "$(dirname "$1")"
    p=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
    if [ "$p" = / ] || [ "${#p}" -le 8 ]; then die "refusing root directory '$p'"; fi
    printf '%s\n' "$p"
}

mounted_under() {  # the mount points at or below $1, deepest first
    awk -v r="$1" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/self/mounts | sort -r
}
root_unmount_all() {
    local m
    for m in $(mounted_under "$1"); do
        umount "$m" 2>/dev/null || umount -l "$m" || echo "$prog: could not unmount $m" >&2
    done
}
root_mount() {
    mountpoint -q "$1/proc" || mount -t proc proc "$1/proc"
    mountpoint -q "$1/dev"  || mount --bind /dev "$1/dev"
}

root_debootstrap() {
    local suite=$1 dir=$2 logs=$2.logs
    if [ -e "$dir" ]; then
        step "removing the unfinished root $dir"
        root_unmount_all "$dir"
        [ -z "$(mounted_under "$dir")" ] || die "something is still mounted under $dir"
        rm -rf --one-file-system "$dir"
    fi
    step "debootstrap --variant=minbase $suite $dir $mirror"
    mkdir -p "$logs"
    timeout --foreground -k 10 1200 debootstrap --variant=minbase --keyring="$debian_keyring" \
        "$suite" "$dir" "$mirror" > "$logs/debootstrap.log" 2>&1 ||
        { tail -n 30 "$logs/debootstrap.log" >&2; die "debootstrap failed (log: $logs/debootstrap.log)"; }
    grep '^I: Valid Release signature' "$logs/debootstrap.log" || die "debootstrap did not check the Release signature"
    root_unmount_all "$dir"  # anything debootstrap left mounted

    rm -f "$dir/etc/apt/sources.list"
    cat > "$dir/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security_mirror
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    # No service ever starts in the root.
    printf '#!/bin/sh\nexit 101\n' > "$dir/usr/sbin/policy-rc.d"
    chmod 755 "$dir/usr/sbin/policy-rc.d"
}

# DIR/root: BASE seen through an overlay whose changes go to DIR/upper, or,
# where the kernel has no overlayfs, a copy of BASE.
root_overlay() {
    local base=$1 dir=$2
    mkdir -p "$dir/upper" "$dir/work" "$dir/root"
    if ! mount -t overlay overlay -o "lowerdir=$base,upperdir=$dir/upper,workdir=$dir/work" "$dir/root" 2>/dev/null; then
        cp -a --one-file-system "$base/." "$dir/root/"
    fi
}

# Runs a command in the root with a clean environment.
in_root() {
    local t=$1; shift
    timeout --foreground -k 10 "$t" chroot "$root" /usr/bin/env -i \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}
in_root_logged() {
    local name=$1 logs=$root.logs; shift
    mkdir -p "$logs"
    in_root "$@" > "$logs/$name.log" 2>&1 ||
        { tail -n 30 "$logs/$name.log" >&2; die "$name failed (log: $logs/$name.log)"; }
}

# The pristine minbase root of SUITE, $idem_cache/SUITE-base, that
# root_overlay views are made of: made once, its packages upgraded when a
# week old (ROOT_REFRESH=1: now), with netbase's /etc/hosts of a fresh
# Debian install. Sets base. It is held with a shared lock (fd 8) for as long
# as the caller runs, so that no one upgrades it under an overlay.
root_base() {
    local suite=$1 ready refreshed
    base=$(root_path "$idem_cache/$suite-base")
    exec 8>"$base.lock"
    flock -w 1800 8 || die "another run holds $base.lock"
    ready=$base/.nginx-idempotency-ready
    if [ ! -e "$ready" ]; then
        root_debootstrap "$suite" "$base"
        printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\nff02::1\t\tip6-allnodes\nff02::2\t\tip6-allrouters\n' \
            > "$base/etc/hosts"
        rm -f "$base/.nginx-idempotency-refreshed"
    fi
    refreshed=$base/.nginx-idempotency-refreshed
    if [ -n "${ROOT_REFRESH:-}" ] || [ ! -e "$refreshed" ] || [ -n "$(find "$refreshed" -mtime +6)" ]; then
        step "apt-get update and upgrade in $base"
        local root=$base
        root_mount "$base"
        in_root_logged apt-update 600 apt-get "${root_apt_opts[@]}" update
        in_root_logged apt-upgrade 1200 apt-get "${root_apt_opts[@]}" -y dist-upgrade
        in_root_logged apt-clean 300 apt-get "${root_apt_opts[@]}" clean
        root_unmount_all "$base"
        touch "$refreshed"
    fi
    touch "$ready"
    flock -s 8
}
