#!/usr/bin/env bash
# Installs a pinned helm (v3) from the Go module proxy into .cache/helm/<version>/helm, once.
# `go install helm.sh/helm/v3/cmd/helm@<version>` with GOBIN pointing there; later runs find the
# binary and return at once. Prints the path of the binary on stdout as its last line; progress
# goes to stderr (a heartbeat every 15 s: a cold build takes a few minutes on 2 cores).
# See docs/adr/0007-helm-chart.md for the choice of version.
set -euo pipefail

# v3.21.4: the newest patch release of the helm line built on the Kubernetes 1.36 libraries
# (client-go v0.36.2), the minor our control plane runs (hack/controlplane: v1.36.3).
version=${HELM_VERSION:-v3.21.4}
k8s_major=1
k8s_minor=36

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out_dir="$root/.cache/helm/$version"
bin="$out_dir/helm"

# shellcheck source=../lib/cached-build.sh
source "$root/hack/lib/cached-build.sh"
reuse_cached_build "helm $version" "$bin" && exit 0

# The module's go.mod may ask for a newer Go than the machine's; let the go command fetch it.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
tmp=$(mktemp -d "$out_dir/.gobin.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "helm: building $version from the Go module proxy (a cold build takes a few minutes)" >&2

# The same version stamps as helm's own Makefile: `helm version`, and the Kubernetes version
# `helm template` and `helm lint` assume when no cluster is asked.
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=$k8s_major -X $pkg.k8sVersionMinor=$k8s_minor"
done

start=$(date +%s)
set +e
# `go install -v` names each package as it compiles it: a heartbeat line every 15 s with the
# count so far shows the build is alive without a flood.
GOBIN="$tmp" CGO_ENABLED=0 go install -v -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$version" 2>&1 | {
  n=0; last=$start
  while IFS= read -r line; do
    case "$line" in
      \#*|*.go:*) echo "$line" >&2 ;;           # compiler diagnostics
      "go: downloading "*) ;;                  # module downloads: the heartbeat covers them
      go:*) echo "$line" >&2 ;;                # the go command's own messages (toolchain, errors)
      *) n=$((n + 1)) ;;
    esac
    now=$(date +%s)
    if (( now - last >= 15 )); then
      echo "helm: still building... $n packages compiled, $((now - start))s elapsed" >&2
      last=$now
    fi
  done
}
status=${PIPESTATUS[0]}
set -e
if [[ $status -ne 0 || ! -x "$tmp/helm" ]]; then
  echo "helm: build failed (exit $status)" >&2
  exit 1
fi
mv "$tmp/helm" "$bin"
echo "helm: built $version in $(( $(date +%s) - start ))s -> $bin" >&2
echo "$bin"
