#!/bin/sh
# Expression patch throughput: our isolated-vm sandbox vs node:vm vs goja. Not a test.
set -eu
cd "$(dirname "$0")/../.."
exec node --no-node-snapshot --import tsx bench/patches/run.ts
