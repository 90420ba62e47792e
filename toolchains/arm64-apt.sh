#!/usr/bin/env bash
# Run apt-get / apt-cache against Debian's arm64 archive without touching the
# host's package state.
#
#   toolchains/arm64-apt.sh apt-get download libdpdk-dev
#   toolchains/arm64-apt.sh apt-cache policy libdpdk-dev
#   toolchains/arm64-apt.sh update          # refresh the arm64 indexes now
#
# A private apt state (indexes, an empty dpkg status, cache) lives under
# $KEEL_APT_DIR (default: <repo>/build/apt-arm64). The host's sources
# (/etc/apt/sources.list{,.d}), keyrings, proxies and other apt.conf settings
# are reused, with the architecture switched to arm64, so nothing needs
# `dpkg --add-architecture` and root is not required. Indexes are refreshed
# when missing or older than $KEEL_APT_MAX_AGE seconds (default one day).
#
# KEEL_APT_SOURCES=FILE uses FILE (one-line or deb822 style, named *.list or
# *.sources) instead of the host's sources, e.g. when those pin [arch=amd64].
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
apt_dir=${KEEL_APT_DIR:-$repo/build/apt-arm64}
max_age=${KEEL_APT_MAX_AGE:-86400}

mkdir -p "$apt_dir/state/lists/partial" "$apt_dir/cache/archives/partial"
[[ -e $apt_dir/status ]] || : >"$apt_dir/status"

opts=(
  -o "Dir::State=$apt_dir/state"
  -o "Dir::State::status=$apt_dir/status"
  -o "Dir::Cache=$apt_dir/cache"
  -o "APT::Architecture=arm64"
  -o "APT::Architectures::=arm64"
  -o "Debug::NoLocking=1"
)
if [[ -n ${KEEL_APT_SOURCES:-} ]]; then
  src_dir="$apt_dir/sources.list.d"
  rm -rf "$src_dir" && mkdir -p "$src_dir"
  cp "$KEEL_APT_SOURCES" "$src_dir/"
  opts+=(-o "Dir::Etc::sourcelist=/dev/null" -o "Dir::Etc::sourceparts=$src_dir")
fi
if [[ $(id -u) == 0 ]]; then
  # The private directories belong to root; apt's _apt sandbox user could not
  # write into them.
  opts+=(-o "APT::Sandbox::User=root")
fi

do_update() {
  echo "arm64-apt: updating the arm64 package indexes in $apt_dir" >&2
  if ! apt-get -q "${opts[@]}" update >"$apt_dir/update.log" 2>&1; then
    cat "$apt_dir/update.log" >&2
    return 1
  fi
  touch "$apt_dir/updated.stamp"
}

ensure_fresh() {
  local stamp="$apt_dir/updated.stamp" now age
  if [[ -e $stamp ]]; then
    now=$(date +%s)
    age=$(( now - $(stat -c %Y "$stamp") ))
    (( age < max_age )) && return 0
    # Stale but usable: refresh, and carry on with the old indexes offline.
    do_update || echo "arm64-apt: update failed; using the indexes from $(date -r "$stamp")" >&2
    return 0
  fi
  do_update
}

cmd=${1:-}
case $cmd in
  update)
    do_update ;;
  apt-get|apt-cache)
    shift
    ensure_fresh
    exec "$cmd" -q "${opts[@]}" "$@" ;;
  *)
    echo "usage: $0 update | apt-get ARGS... | apt-cache ARGS..." >&2
    exit 2 ;;
esac
