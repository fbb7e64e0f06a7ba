#!/usr/bin/env bash
# Runs the admission latency benchmark against a control plane of its own.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec node --no-node-snapshot --import tsx bench/admission/run.ts "$@"
