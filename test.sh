#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (packages, arm64 sysroot), then builds and
# runs the whole test suite: host (optimized), host with ASan+UBSan, the unit
# tests under ThreadSanitizer, and the
# aarch64 cross build under qemu-aarch64, including one boot of the firmware
# on the qemu-virt board under qemu-system-aarch64; then every libFuzzer
# target for a bounded time (KEEL_FUZZ_SECONDS, default 30 s each).
#   ./test.sh            everything
#   ./test.sh host asan  only those presets
set -euo pipefail
cd "$(dirname "$0")"
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(host asan tsan aarch64 fuzz)

if [[ " ${presets[*]} " == *" aarch64 "* ]]; then
  ./toolchains/setup.sh
else
  ./toolchains/setup.sh --host-only
fi

jobs=$(nproc)
failed=()
for p in "${presets[@]}"; do
  echo "=== preset $p: configure and build"
  if [ "$p" = fuzz ]; then
    cmake --preset fuzz -DKEEL_FUZZ_SECONDS="${KEEL_FUZZ_SECONDS:-30}"
    cmake --build --preset fuzz -j "$jobs" --target fuzz_all
  else
    cmake --preset "$p"
    cmake --build --preset "$p" -j "$jobs"
  fi
  echo "=== preset $p: test"
  if ! ctest --preset "$p" -j "$jobs"; then
    failed+=("$p")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "=== FAILED presets: ${failed[*]}"
  exit 1
fi
echo "=== all presets passed: ${presets[*]}"
