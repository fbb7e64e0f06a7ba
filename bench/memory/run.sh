#!/usr/bin/env bash
# Memory per cached object: our informers beside client-go's, the same objects (own control plane).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec node --no-node-snapshot --import tsx bench/memory/run.ts "$@"
