#!/usr/bin/env bash
# Builds the health checker (kstatus and Argo CD's Lua health checks over objects, see main.go)
# once and caches it under .cache/health/<hash>/health, keyed by go.mod, go.sum and the Go
# source, so a rebuild happens only when they change. Modules come from the Go module proxy.
# Prints the path of the binary on stdout as its last line; progress goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$here"

hash=$(cat go.mod go.sum ./*.go build.sh | sha256sum | cut -c1-16)
out_dir="$root/.cache/health/$hash"
bin="$out_dir/health"

# shellcheck source=../lib/cached-build.sh
source "$root/hack/lib/cached-build.sh"
reuse_cached_build health "$bin" && exit 0

# The module's go.mod may ask for a newer Go than the machine's; let the go command fetch it.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
echo "health: building the kstatus and Argo CD Lua health checker (a cold build takes a minute)" >&2
start=$(date +%s)
tmp="$out_dir/health.tmp"
if ! CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp" . >&2; then
  echo "health: build failed" >&2
  rm -f "$tmp"
  exit 1
fi
mv "$tmp" "$bin"
echo "health: built in $(( $(date +%s) - start ))s -> $bin" >&2
echo "$bin"
