#!/usr/bin/env bash
# Build the arm64 sysroot the aarch64 preset links against:
#
#   toolchains/arm64-sysroot.sh [DIR]     (default: <repo>/build/arm64-sysroot)
#
# Downloads Debian's arm64 development packages (DPDK with its static
# librte_*.a, rdma-core's static libmlx5.a/libibverbs.a, libnl, libpcap,
# libnuma, libfdt, libbsd, libmd, libdbus, mbedTLS) plus the arch-independent
# header packages CLI11 and doctest, and unpacks them with `dpkg-deb -x` into
# DIR. The host's installed packages are never touched (libdpdk-dev:amd64 and
# :arm64 cannot be co-installed); the downloads go through toolchains/arm64-apt.sh
# (a private apt state) and are cached in <repo>/build/apt-arm64/debs.
#
# Idempotent: DIR/.keel-sysroot-stamp records the package versions; when they
# have not changed nothing is done. KEEL_SYSROOT_FORCE=1 rebuilds anyway.
# libc is not included: the cross toolchain (g++-aarch64-linux-gnu) brings its own.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
dir=${1:-$repo/build/arm64-sysroot}
mkdir -p "$(dirname "$dir")"
dir=$(cd "$(dirname "$dir")" && pwd)/$(basename "$dir")
apt_dir=${KEEL_APT_DIR:-$repo/build/apt-arm64}
export KEEL_APT_DIR=$apt_dir
debs=$apt_dir/debs
stamp=$dir/.keel-sysroot-stamp
apt() { "$here/arm64-apt.sh" "$@"; }

# Static libraries live in the -dev packages (libdpdk-dev carries every
# librte_*.a and the headers; the librte-*23 packages only have .so files).
packages=(
  libdpdk-dev
  libnuma-dev libfdt-dev libbsd-dev libmd-dev libpcap0.8-dev libdbus-1-dev
  libibverbs-dev libnl-3-dev libnl-route-3-dev
  libmbedtls-dev
  libcli11-dev doctest-dev
)
script_version=2

t0=$(date +%s)
# Versions the arm64 archive offers now.
want=$(
  apt apt-cache policy "${packages[@]}" | awk '
    /^[^ ].*:$/ { sub(":$", ""); pkg = $0 }
    /^  Candidate:/ { print pkg "=" $2 }'
)
n_want=$(wc -l <<<"$want")
if (( n_want != ${#packages[@]} )) || grep -q '=(none)$' <<<"$want"; then
  echo "arm64-sysroot: some packages are not available for arm64:" >&2
  echo "$want" >&2
  exit 1
fi
stamp_text=$(printf 'keel arm64 sysroot v%s\n%s\n' "$script_version" "$want")

if [[ -z ${KEEL_SYSROOT_FORCE:-} && -f $stamp && $(cat "$stamp") == "$stamp_text" ]]; then
  echo "arm64-sysroot: $dir is up to date"
  exit 0
fi

mkdir -p "$debs"
echo "arm64-sysroot: downloading ${#packages[@]} packages into $debs"
# Download only what the cache lacks. File names come from --print-uris, run
# in an empty directory (apt prints nothing for files already in the cwd).
empty=$(mktemp -d)
missing=()
files=()
while read -r url file size hash; do
  [[ -n $url ]] || continue
  files+=("$file")
  [[ -s $debs/$file ]] || missing+=("$url")
done < <(cd "$empty" && apt apt-get download --print-uris $want | tr -d "'")
rmdir "$empty"
if (( ${#files[@]} != ${#packages[@]} )); then
  echo "arm64-sysroot: expected ${#packages[@]} .debs, apt offered ${#files[@]}" >&2
  exit 1
fi
if (( ${#missing[@]} )); then
  (cd "$debs" && apt apt-get download $want)
fi

echo "arm64-sysroot: unpacking into $dir"
tmp=$dir.tmp.$$
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
for f in "${files[@]}"; do
  dpkg-deb -x "$debs/$f" "$tmp"
done

# Absolute symlinks would point into the host; make them relative to the sysroot.
while IFS= read -r -d '' link; do
  target=$(readlink "$link")
  [[ $target == /* ]] || continue
  ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$tmp$target")" "$link"
done < <(find "$tmp" -type l -print0)

# The .so development links point into runtime packages the sysroot doesn't
# have (everything links statically): drop them rather than leave them dangling.
find "$tmp" -xtype l -delete

# Debian keeps a few static libraries under /lib (e.g. libnl-3.a); give every
# library one home in usr/lib/aarch64-linux-gnu as well.
if [[ -d $tmp/lib/aarch64-linux-gnu ]]; then
  for a in "$tmp"/lib/aarch64-linux-gnu/*.a; do
    [[ -e $a ]] || continue
    ln -sfn "../../../lib/aarch64-linux-gnu/$(basename "$a")" "$tmp/usr/lib/aarch64-linux-gnu/$(basename "$a")"
  done
fi

for need in usr/lib/aarch64-linux-gnu/librte_eal.a usr/include/dpdk/rte_ethdev.h \
            usr/include/aarch64-linux-gnu/dpdk/rte_config.h usr/include/CLI/CLI.hpp \
            usr/include/doctest/doctest.h usr/lib/aarch64-linux-gnu/libmbedtls.a; do
  [[ -e $tmp/$need ]] || { echo "arm64-sysroot: $need missing after unpacking" >&2; exit 1; }
done

printf '%s\n' "$stamp_text" >"$tmp/.keel-sysroot-stamp"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "arm64-sysroot: $dir ready ($(du -sh "$dir" | cut -f1), $(( $(date +%s) - t0 )) s)"
