#!/usr/bin/env bash
# Installs the Debian packages the build, the tests and the demo need, when
# any is missing: one `apt-get update`, then one `apt-get install`.
set -euo pipefail

packages=(g++ make perl nginx nginx-dev libhiredis-dev libssl-dev redis-server libgtest-dev curl)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}"
sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
$sudo apt-get update
# policy-rc.d keeps the packaged nginx and redis services from starting
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
