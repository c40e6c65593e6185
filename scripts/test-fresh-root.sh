#!/usr/bin/env bash
# The README's quick start on a fresh Debian: `make test` and `make run` in
# a root that holds nothing but a minimal Debian 13 (trixie) and a copy of
# the repository, so that a tool the tests use and scripts/install-deps.sh
# does not install fails here, not on a user's first run:
#     scripts/test-fresh-root.sh [OUT] [MAKE_ARG...]   OUT defaults to build/fresh-root
#
# Needs root (chroot, mounts, a network namespace); re-runs itself with sudo
# when not root.
#
# The root is an overlay of the pristine minbase trixie root that
# scripts/debian-root.sh keeps (${XDG_CACHE_HOME:-~/.cache}/nginx-idempotency/
# trixie-base, made once with debootstrap, upgraded weekly; netbase's
# /etc/hosts of a fresh install, where localhost is ::1 too), thrown away
# afterwards: every run starts fresh. The repository's files (those git
# tracks or would, from the working tree) are copied to /root/nginx-idempotency.
# There, as root: `apt-get install git make` (what the README asks for
# before its quick start), `make deps` (scripts/install-deps.sh, the first thing
# `make test` does: apt-get from the archive), then `make test MAKE_ARG...`
# in a network namespace of its own, whose only interface is loopback: the
# servers the tests start meet no one else's ports, and nothing the tests do
# reaches the network. CI passes PROVE_STORES=redis (make test-fresh-root):
# one Test::Nginx pass, on Redis (see the Makefile). Then, in the same
# namespace, the quick start's `make run`: the README's POST and its retry,
# replayed, then `make stop`.
#
# The output in OUT/prerequisites.log, deps.log, make-test.log and
# make-run.log; prove's summary is printed, or its failures and the log's
# tail. Downloaded .debs are kept in the cache (trixie-archives/fresh-root).
# Environment: PROVE_JOBS (passed on), DEBIAN_MIRROR, DEBIAN_SECURITY_MIRROR,
# ROOT_REFRESH.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
prog=test-fresh-root

out=${1:-build/fresh-root}
[ $# -eq 0 ] || shift
case $out in /*) ;; *) out=$repo/$out ;; esac
suite=trixie

if [ "$(id -u)" -ne 0 ]; then
    echo "$prog: not root, running again with sudo" >&2
    exec sudo env NGINX_IDEM_CACHE="${NGINX_IDEM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nginx-idempotency}" \
        ROOT_REFRESH="${ROOT_REFRESH:-}" DEBIAN_MIRROR="${DEBIAN_MIRROR:-}" \
        DEBIAN_SECURITY_MIRROR="${DEBIAN_SECURITY_MIRROR:-}" PROVE_JOBS="${PROVE_JOBS:-}" "$0" "$out" "$@"
fi

. scripts/debian-root.sh

overlay=$out/overlay
cleanup() {
    root_unmount_all "$overlay"
    [ -z "$(mounted_under "$overlay")" ] && rm -rf --one-file-system "$overlay"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

root_mirrors
root_tools
root_base "$suite"
archives=$idem_cache/$suite-archives/fresh-root
mkdir -p "$archives/partial"

cleanup
rm -rf --one-file-system "$out"
mkdir -p "$out"
root_overlay "$base" "$overlay"
root=$overlay/root
root_mount "$root"
mount --bind "$archives" "$root/var/cache/apt/archives"

step "copying the repository's files to $root/root/nginx-idempotency"
mkdir -p "$root/root/nginx-idempotency"
git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar -c --null -T - -f - | tar -x -C "$root/root/nginx-idempotency" -f -

# A command in the repository's copy, with the environment a login shell of
# root's would have; through "${wrap[@]}" when set.
wrap=()
in_repo() {
    local t=$1; shift
    "${wrap[@]}" timeout --foreground -k 10 "$t" chroot "$root" /usr/bin/env -i \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 TERM=dumb ${PROVE_JOBS:+PROVE_JOBS=$PROVE_JOBS} \
        sh -c 'cd /root/nginx-idempotency && exec "$@"' sh "$@"
}

# The quick start's prerequisites: a clone (git) and make.
step "apt-get install git make in the root (the README's prerequisites)"
if ! in_repo 1200 sh -c 'apt-get -q update && DEBIAN_FRONTEND=noninteractive apt-get -q install -y --no-install-recommends git make' \
        < /dev/null > "$out/prerequisites.log" 2>&1; then
    tail -n 30 "$out/prerequisites.log" >&2
    die "installing git and make failed (log: $out/prerequisites.log)"
fi

step "make deps in the root (scripts/install-deps.sh)"
if ! in_repo 1800 make deps < /dev/null > "$out/deps.log" 2>&1; then
    tail -n 30 "$out/deps.log" >&2
    die "make deps failed (log: $out/deps.log)"
fi
grep -m1 '^installing: ' "$out/deps.log" | cut -c1-300 || true

# A network namespace whose loopback is up and which has no other interface.
wrap=(unshare --net -- sh -c 'ip link set lo up && exec "$@"' sh)
if ! "${wrap[@]}" true 2>/dev/null; then
    echo "$prog: no network namespace here: the tests run on the machine's loopback" >&2
    wrap=()
fi

step "make test $* in the root, on loopback only"
rc=0
in_repo 3600 make test "$@" < /dev/null > "$out/make-test.log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then
    grep -E '^t/[^ ]+ +\(Wstat|^  Failed tests?:|^prove-jobs:' "$out/make-test.log" >&2 || true
    tail -n 15 "$out/make-test.log" >&2
    die "make test failed in the fresh $suite root (exit $rc; log: $out/make-test.log)"
fi
grep -E '^(Files=|Result:|prove-jobs:)' "$out/make-test.log" || true

# The quick start's other command: the demo, the README's first POST twice
# (the retry replayed, the same body), then make stop.
step "make run in the root: a POST and its retry, replayed; make stop"
if ! in_repo 300 sh -c '
        make run > build/make-run.log 2>&1 || { tail -n 20 build/make-run.log; exit 1; }
        post() {
            curl -sS -m 10 -D - -X POST -H "Idempotency-Key: k1" -d amount=100 \
                http://127.0.0.1:8080/v1/payments | tr -d "\r"
        }
        first=$(post); second=$(post)
        make stop > /dev/null 2>&1 || echo "make stop failed"
        printf "%s\n" "$second" | grep -q "^Idempotent-Replayed: true" &&
            [ "$(printf "%s\n" "$first" | sed "1,/^\$/d")" = "$(printf "%s\n" "$second" | sed "1,/^\$/d")" ] ||
            { printf -- "--- first:\n%s\n--- retry:\n%s\n" "$first" "$second"; exit 1; }' \
        < /dev/null > "$out/make-run.log" 2>&1; then
    cat "$out/make-run.log" >&2
    die "make run: the README's POST was not replayed in the fresh $suite root (log: $out/make-run.log)"
fi
step "done: make test and make run pass in a fresh $suite root"
