#!/usr/bin/env bash
# Finds or brings the browser the login tests drive and prints its path on stdout as its last line
# (progress on stderr): CHROMIUM_PATH when set, else the machine's chromium, else a pinned headless
# Chromium from the npm registry's @sparticuz/chromium package (the browser ships inside the
# package; nothing is downloaded from elsewhere), checked against the integrity pinned here before
# anything is unpacked, and cached under .cache/chromium/<version>/ with the shared libraries and
# fonts its package ships. PLATFORM_PINNED_CHROMIUM=1 takes the pinned one even where the machine
# has a chromium. Logic: hack/chromium/install.ts and pinned.ts (run on Node 24, found or brought
# by hack/node/install.sh). See docs/adr/0018-test-browser-from-the-npm-registry.md.
set -euo pipefail

# The registry's dist.integrity of @sparticuz/chromium@153.0.0's tarball (`npm view
# @sparticuz/chromium@153.0.0 dist.integrity`).
version=153.0.0
integrity='sha512-jiGWqSvPMdu4+P9TilYqAR7yEGPEHINx+lCvE/NqNO/EHYzF/x1hUiI5T6ioVIt7dEy7n88byyT0vk+dnsgQwA=='

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cache_dir="$root/.cache/chromium"

node_bin=$(bash "$root/hack/node/install.sh")
export PATH="$node_bin:$PATH"

mkdir -p "$cache_dir"
# Parallel callers (test files, make's prerequisites) wait for one fetch instead of racing; node
# inherits the locked descriptor, so the lock is held until it exits.
exec 9>"$cache_dir/.lock"
if command -v flock >/dev/null; then flock 9; fi
exec node "$here/install.ts" "$version" "$integrity" "$cache_dir"
