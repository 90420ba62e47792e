#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (packages, arm64 sysroot), then builds and
# runs the whole test suite: host (optimized), host with ASan+UBSan, the unit
# tests under ThreadSanitizer, and the
# aarch64 cross build under qemu-aarch64, including one boot of the firmware
# on the qemu-virt board under qemu-system-aarch64; then every libFuzzer
# target for a bounded time (KEEL_FUZZ_SECONDS, default 30 s each).
#   ./test.sh            everything
#   ./test.sh host asan  only those presets
# At the end (also after a failure) it prints each stage's wall time and the
# total, as a table.
set -euo pipefail
cd "$(dirname "$0")"
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(host asan tsan aarch64 fuzz)

# --- stage timing: stage NAME CMD... runs CMD, records its wall time and result.
stage_names=() stage_secs=() stage_results=()
t_start=$(date +%s)
stage() {
  local name=$1 t0 rc=0
  shift
  echo "=== $name"
  t0=$(date +%s)
  "$@" || rc=$?
  stage_names+=("$name")
  stage_secs+=($(( $(date +%s) - t0 )))
  stage_results+=("$([ $rc = 0 ] && echo ok || echo "FAILED ($rc)")")
  return $rc
}
print_stages() {
  local i total=$(( $(date +%s) - t_start ))
  echo
  echo "=== stage times (wall, $(nproc) cores)"
  printf '%-28s %9s  %s\n' stage 'm:ss' result
  for i in "${!stage_names[@]}"; do
    printf '%-28s %6d:%02d  %s\n' "${stage_names[$i]}" \
      $(( stage_secs[i] / 60 )) $(( stage_secs[i] % 60 )) "${stage_results[$i]}"
  done
  printf '%-28s %6d:%02d\n' total $(( total / 60 )) $(( total % 60 ))
}
trap print_stages EXIT

if [[ " ${presets[*]} " == *" aarch64 "* ]]; then
  stage setup ./toolchains/setup.sh
else
  stage setup ./toolchains/setup.sh --host-only
fi

jobs=$(nproc)
failed=()
build() {
  local p=$1
  if [ "$p" = fuzz ]; then
    cmake --preset fuzz -DKEEL_FUZZ_SECONDS="${KEEL_FUZZ_SECONDS:-30}" &&
      cmake --build --preset fuzz -j "$jobs" --target fuzz_all
  else
    cmake --preset "$p" && cmake --build --preset "$p" -j "$jobs"
  fi
}
for p in "${presets[@]}"; do
  if ! stage "$p: configure+build" build "$p"; then
    failed+=("$p")
    continue
  fi
  stage "$p: test" ctest --preset "$p" -j "$jobs" || failed+=("$p")
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "=== FAILED presets: ${failed[*]}"
  exit 1
fi
echo "=== all presets passed: ${presets[*]}"
