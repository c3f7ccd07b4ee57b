#!/usr/bin/env bash
# What `make test-aarch64` needs to cross-build ptn for aarch64 and run it under qemu user mode:
# Debian's cross compiler, qemu-user, and the arm64 builds of the libraries ptn links (through
# Debian multiarch: the arm64 architecture is added to dpkg once). Header-only dependencies
# (nlohmann-json, CLI11) are architecture-independent and come from `make deps`.
# Idempotent and quiet when everything is present.
set -euo pipefail
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
host_packages=(g++-aarch64-linux-gnu qemu-user)
arm64_packages=(libc6:arm64 libstdc++6:arm64 libpcre2-dev:arm64 libgtest-dev:arm64 libcpp-httplib-dev:arm64 libhiredis-dev:arm64)
missing=()
for p in "${host_packages[@]}" "${arm64_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing Debian packages for the aarch64 build: ${missing[*]}"
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
