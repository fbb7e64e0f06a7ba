#!/usr/bin/env bash
# Builds bench/memory's client-go program once and caches it under .cache/bench-memory-clientgo/<hash>/,
# keyed by go.mod, go.sum and the Go sources (as hack/controlplane/build.sh caches the control plane).
# Prints the path of the binary on stdout as its last line; progress goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
cd "$here"

hash=$(cat go.mod go.sum ./*.go build.sh | sha256sum | cut -c1-16)
out_dir="$root/.cache/bench-memory-clientgo/$hash"
bin="$out_dir/clientgomemory"

if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$out_dir"
echo "bench/memory: building the client-go program (client-go $(awk '$1 == "k8s.io/client-go" {print $2}' go.mod))" >&2
start=$(date +%s)
tmp="$out_dir/clientgomemory.tmp"
if ! go build -trimpath -ldflags "-s -w" -o "$tmp" .; then
  echo "bench/memory: build of the client-go program failed" >&2
  rm -f "$tmp"
  exit 1
fi
mv "$tmp" "$bin"
echo "bench/memory: built the client-go program in $(( $(date +%s) - start ))s -> $bin" >&2
echo "$bin"
