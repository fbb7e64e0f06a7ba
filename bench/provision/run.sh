#!/usr/bin/env bash
# Provisioning benchmark: the processes provisioner's create to Ready, wake and idle memory, and the controller's create to Ready and a request through the access proxy to an asleep instance, beside the same control plane spawned by hand.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec node --no-node-snapshot --import tsx bench/provision/run.ts "$@"
