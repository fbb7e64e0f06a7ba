# Sourced by the scripts that build a tool once into .cache/ (hack/health, hack/helm).
#
# reuse_cached_build <label> <binary>: when <binary> exists, prints its path on stdout and returns
# 0; so does it when a concurrent run built it while this one waited for the build lock (flock on
# the binary's folder, so parallel test files wait for one build instead of running two).
# Otherwise returns 1, holding the lock (fd 9) until the caller exits: the caller builds.
reuse_cached_build() {
  local label=$1 bin=$2
  local dir
  dir=$(dirname "$bin")
  if [[ -x "$bin" ]]; then
    echo "$label: cached at $bin" >&2
    echo "$bin"
    return 0
  fi
  mkdir -p "$dir"
  if command -v flock >/dev/null; then
    exec 9>"$dir/.lock"
    flock 9
    if [[ -x "$bin" ]]; then
      echo "$label: built by a concurrent run at $bin" >&2
      echo "$bin"
      return 0
    fi
  fi
  return 1
}
