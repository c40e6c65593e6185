#!/usr/bin/env bash
# Installs the Debian packages the build, the tests (libnss-wrapper: the
# Redis names of t/039), the demo, the Debian packages (make deb; make
# deb-trixie: debootstrap), make matrix (the archive's keyring) and make
# test-newest-nginx (nginx's own build dependencies), make verify (spin) and
# the monitoring checks (prometheus: t/063's server, promtool for make
# rules-check) need, when any is
# missing: one `apt-get update`, then one `apt-get install`. With arguments,
# installs those packages instead (when missing), e.g. scripts/build-deb.sh's
# build dependencies.
set -euo pipefail

packages=(g++ make perl nginx nginx-dev libhiredis-dev libzstd-dev libsimdjson-dev zstd libssl-dev openssl redis-server libgtest-dev curl wrk
          clang libclang-rt-dev
          build-essential dpkg-dev debhelper
          debian-archive-keyring libpcre2-dev zlib1g-dev
          libnss-wrapper debootstrap spin
          prometheus)
[ $# -eq 0 ] || packages=("$@")

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}"
sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
$sudo apt-get update
# A policy-rc.d keeps the packaged nginx and redis-server services from
# starting on install: the tests and the demo start their own, on loopback.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod +x "$policy"
    trap '$sudo rm -f "$policy"' EXIT
fi
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
