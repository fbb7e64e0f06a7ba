#!/usr/bin/env bash
# Gateway benchmark: GET and LIST of SharedSecrets through the gateway vs directly (own control plane).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec node --no-node-snapshot --import tsx bench/gateway/run.ts "$@"
