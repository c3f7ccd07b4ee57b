#!/usr/bin/env bash
# Installs the npm packages the tests use (JavaScript clients and reference renderers),
# pinned in tests/js/package.json. Quiet when they are already installed.
set -euo pipefail
cd "$(dirname "$0")/../tests/js" 2>/dev/null || exit 0
[ -f package.json ] || exit 0
if [ ! -d node_modules ] || [ package.json -nt node_modules ]; then
  npm install --no-audit --no-fund --loglevel=error >/dev/null
  touch node_modules
fi
