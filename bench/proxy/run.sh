#!/usr/bin/env bash
# Access proxy benchmark: GET, LIST and watch events into a connected cluster through the proxy vs directly, held watches' memory (own control plane).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec node --no-node-snapshot --import tsx bench/proxy/run.ts "$@"
