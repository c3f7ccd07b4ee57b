#!/usr/bin/env bash
# Soak test of `ptn serve` (scripts/soak.py): mixed concurrent load on loopback, RSS and KV blocks
# sampled, checks at the end (every reply as expected, idle with no KV block held, no RSS growth).
#   scripts/soak.sh [MINUTES=30] [PTN=build/ptn]   (summary: build/soak-summary.json, or $SOAK_OUT)
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-30}
ptn=${2:-build/ptn}
[ -x "$ptn" ] || { echo "soak: $ptn not found (make build)" >&2; exit 1; }
exec python3 scripts/soak.py "$ptn" --minutes "$minutes" --out "${SOAK_OUT:-build/soak-summary.json}"
