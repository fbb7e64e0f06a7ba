#!/usr/bin/env bash
# Kubeconfig and direct token benchmark: each endpoint beside the raw cost of its main step (own control plane).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec node --no-node-snapshot --import tsx bench/kubeconfig/run.ts "$@"
