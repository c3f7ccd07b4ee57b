#!/usr/bin/env bash
# Installs the Debian packages named on the command line that are not installed yet.
# Idempotent and quiet when everything is present. Node.js and npm count as present when the
# `node` and `npm` commands exist (a machine may have them from elsewhere than Debian).
set -euo pipefail
missing=()
for p in "$@"; do
  case "$p" in
    nodejs) command -v node >/dev/null 2>&1 && continue ;;
    npm) command -v npm >/dev/null 2>&1 && continue ;;
  esac
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing Debian packages: ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
