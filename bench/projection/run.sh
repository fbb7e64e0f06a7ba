#!/usr/bin/env bash
# Projection benchmark: operator vs raw writes of the same Roles/RoleBindings (own control plane).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec node --no-node-snapshot --import tsx bench/projection/run.ts "$@"
