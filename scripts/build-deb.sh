#!/usr/bin/env bash
# Builds the Debian package libnginx-mod-http-idempotency (debian/) for the
# packaged nginx with dh-sequence-nginx (from nginx-dev), in a copy of the
# tree, so the repository stays clean:
#     scripts/build-deb.sh [OUT]        OUT defaults to build/deb
# The sources are copied to OUT/src, `dpkg-buildpackage -b -us -uc` runs
# there, and the .deb (with .buildinfo and .changes) lands in OUT. Installs
# the build dependencies first when any is missing. No -dbgsym package is
# built (DEB_BUILD_OPTIONS=noddebs), so OUT holds exactly one .deb.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-build/deb}

# debian/control's Build-Depends (dh-sequence-nginx is provided by nginx-dev),
# plus build-essential, which dpkg-checkbuilddeps requires implicitly.
scripts/install-deps.sh build-essential dpkg-dev debhelper nginx-dev libhiredis-dev libzstd-dev libsimdjson-dev libssl-dev

rm -rf "$out"
mkdir -p "$out/src"
cp -r config module debian README.md docs contrib "$out/src/"
mkdir -p "$out/src/scripts" && cp scripts/idempotency-admin scripts/train-dictionary.sh "$out/src/scripts/"

cd "$out/src"
# Not the jobserver of a calling make: debian/rules runs its own.
unset MAKEFLAGS MFLAGS MAKELEVEL
export DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:+$DEB_BUILD_OPTIONS }noddebs"
dpkg-buildpackage -b -us -uc -Jauto
cd ..
ls -l ./*.deb
