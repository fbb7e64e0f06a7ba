#!/usr/bin/env bash
# Access key benchmark: authentication vs a bare HMAC, and expiry lateness (own control plane).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec node --no-node-snapshot --import tsx bench/auth/run.ts "$@"
