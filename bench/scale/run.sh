#!/usr/bin/env bash
# Scale curve: the operator at growing numbers of keys, Users and SharedSecrets, and one operator
# syncing growing numbers of virtual clusters (own control plane).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec node --no-node-snapshot --import tsx bench/scale/run.ts "$@"
