#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (packages, arm64 sysroot), then builds and
# runs the whole test suite, one preset at a time:
#   host     optimized native build: unit + integration tests
#   asan     clang with ASan+UBSan: unit + integration tests, then every
#            libFuzzer target for KEEL_FUZZ_SECONDS (default 12) each
#   tsan     ThreadSanitizer: the unit tests that run threads
#   tidy     clang-tidy over firmware/ and hal/ (tests/clang-tidy, .clang-tidy)
#            on the host preset's compile_commands.json: any finding fails
#   aarch64  the static cross build: every test under qemu-aarch64, and one
#            boot of the firmware on the qemu-virt board under qemu-system-aarch64
#   ./test.sh              everything
#   ./test.sh host asan    only those presets (fuzz: only asan's fuzz targets;
#                          tidy: only clang-tidy, the host preset configured
#                          but not built)
# At the end (also after a failure) it prints each stage's wall time and the
# total, as a table.
set -euo pipefail
cd "$(dirname "$0")"
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(host tidy asan tsan aarch64)
for p in "${presets[@]}"; do
  case $p in
    host | asan | tsan | aarch64 | fuzz | tidy) ;;
    *) echo "test.sh: unknown preset $p (host, tidy, asan, tsan, aarch64, fuzz)" >&2; exit 2 ;;
  esac
done

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
# Tests wait on keel, on threads and on the kernel more than they compute, and
# none depends on the load, so twice as many run at once as there are cores.
# The fuzz targets compute for a fixed time each: one per core.
test_jobs=$(( 2 * jobs ))
fuzz_seconds=${KEEL_FUZZ_SECONDS:-12}
failed=()
build() {
  local p=$1 args=() target=()
  if [ "$p" = fuzz ]; then
    p=asan
    target=(--target fuzz_all)
  fi
  [ "$p" = asan ] && args=(-DKEEL_FUZZ_SECONDS="$fuzz_seconds")
  cmake --preset "$p" "${args[@]}" && cmake --build --preset "$p" -j "$jobs" "${target[@]}"
}
for p in "${presets[@]}"; do
  if [ "$p" = tidy ]; then
    # Needs only the host preset's compile_commands.json (configure, no build).
    stage "tidy: configure" cmake --preset host || { failed+=("$p"); continue; }
    stage "tidy: clang-tidy firmware/ hal/" tests/clang-tidy --jobs "$jobs" || failed+=("$p")
    continue
  fi
  if ! stage "$p: configure+build" build "$p"; then
    failed+=("$p")
    continue
  fi
  case $p in
    fuzz) stage "fuzz: ${fuzz_seconds} s a target" ctest --preset fuzz -j "$jobs" || failed+=("$p") ;;
    asan)
      stage "asan: test" ctest --preset asan -j "$test_jobs" || failed+=("$p")
      stage "asan: fuzz, ${fuzz_seconds} s a target" ctest --preset fuzz -j "$jobs" || failed+=("$p") ;;
    *) stage "$p: test" ctest --preset "$p" -j "$test_jobs" || failed+=("$p") ;;
  esac
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "=== FAILED presets: ${failed[*]}"
  exit 1
fi
echo "=== all presets passed: ${presets[*]}"
