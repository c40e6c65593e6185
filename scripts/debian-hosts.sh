#!/usr/bin/env bash
# Runs a command as on a standard Debian install, whose /etc/hosts names
# `localhost` for ::1 as well as for 127.0.0.1 (getaddrinfo then gives ::1
# first): in a private mount namespace, over which that file is mounted on
# /etc/hosts. The machine's own /etc/hosts is neither read nor changed, and
# nothing outside the command sees the other one.
#     scripts/debian-hosts.sh make prove
# Needs unshare(1) (util-linux) and root: as any other user it runs the
# command through sudo. Where no mount namespace can be made (a container
# without CAP_SYS_ADMIN), it says so and runs the command as it is.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARG...]" >&2; exit 2; }

hosts=$(mktemp "${TMPDIR:-/tmp}/debian-hosts.XXXXXX")
trap 'rm -f "$hosts"' EXIT
# netbase's /etc/hosts on a fresh Debian, with the names Debian's installer
# adds for IPv6
cat > "$hosts" <<'EOF'
127.0.0.1	localhost
::1		localhost ip6-localhost ip6-loopback
ff02::1		ip6-allnodes
ff02::2		ip6-allrouters
EOF
chmod 644 "$hosts"

sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
if ! $sudo unshare --mount --propagation private -- mount --bind "$hosts" /etc/hosts 2>/dev/null; then
    # t/039 tries several addresses per name with nss_wrapper all the same
    echo "debian-hosts: no private mount namespace here: running with the machine's /etc/hosts" >&2
    exec "$@"
fi
$sudo unshare --mount --propagation private -- sh -c '
    mount --bind "$1" /etc/hosts || exit 125
    shift
    first=$(getent ahosts localhost | head -n 1 | cut -d" " -f1)
    echo "debian-hosts: localhost resolves to $first first"
    exec "$@"' sh "$hosts" "$@"
