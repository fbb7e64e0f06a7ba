#!/usr/bin/env bash
# Builds the multicall control-plane binary (etcd, kube-apiserver, kube-controller-manager, kubectl) once and caches it under .cache/controlplane/<hash>/,
# keyed by go.mod, go.sum and the Go sources, so a rebuild happens only when they change.
# Prints the path of the binary on stdout as its last line; progress goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$here"

k8s_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' go.mod)
hash=$(cat go.mod go.sum ./*.go build.sh | sha256sum | cut -c1-16)
out_dir="$root/.cache/controlplane/$hash"
bin="$out_dir/controlplane"

if [[ -x "$bin" ]]; then
  echo "controlplane: cached $k8s_version build at $bin" >&2
  echo "$bin"
  exit 0
fi

mkdir -p "$out_dir"
echo "controlplane: building etcd, kube-apiserver and kube-controller-manager $k8s_version (a cold build takes several minutes)" >&2

ldflags="-s -w"
for v in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $v.gitVersion=$k8s_version -X $v.gitTreeState=clean"
  ldflags+=" -X $v.gitMajor=$(echo "$k8s_version" | cut -d. -f1 | tr -d v)"
  ldflags+=" -X $v.gitMinor=$(echo "$k8s_version" | cut -d. -f2)"
done

start=$(date +%s)
# `go build -v` names each package as it compiles it; we turn that into a heartbeat line
# every 15 s with the count so far, so a user sees the build is alive without a flood.
tmp="$out_dir/controlplane.tmp"
set +e
go build -v -trimpath -ldflags "$ldflags" -o "$tmp" . 2>&1 | {
  n=0; last=$start
  while IFS= read -r line; do
    case "$line" in
      \#*|*.go:*) echo "$line" >&2 ;; # compiler diagnostics
      *) n=$((n + 1)) ;;
    esac
    now=$(date +%s)
    if (( now - last >= 15 )); then
      echo "controlplane: still building... $n packages compiled, $((now - start))s elapsed" >&2
      last=$now
    fi
  done
}
status=${PIPESTATUS[0]}
set -e
if [[ $status -ne 0 ]]; then
  echo "controlplane: build failed (exit $status)" >&2
  rm -f "$tmp"
  exit "$status"
fi
mv "$tmp" "$bin"
# Dispatch is on argv[0], so a `kubectl` link lets tests put this folder on PATH.
ln -sf controlplane "$out_dir/kubectl"
echo "controlplane: built $k8s_version in $(( $(date +%s) - start ))s -> $bin" >&2
echo "$bin"
