#!/usr/bin/env bash
# Syncer benchmark: syncing N Services with their Endpoints into the host vs writing the same host
# objects directly, and Endpoints change propagation latency (own control planes). Not a test.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec node --no-node-snapshot --import tsx bench/sync/run.ts "$@"
