#!/usr/bin/env bash
# Install everything keel's builds and tests need on Debian 12 (bookworm), then
# build the arm64 sysroot for the aarch64 preset.
#
#   toolchains/setup.sh [--host-only]
#
#   --host-only   only the host packages; skip toolchains/arm64-sysroot.sh
#
# Idempotent and quick when everything is there: packages are checked with
# dpkg-query and apt runs only for missing ones. Package installation needs
# root (sudo is used when not root); the sysroot is built as the calling user
# and never touches the host's packages.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
host_only=0
for a in "$@"; do
  case $a in
    --host-only) host_only=1 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument $a (usage: $0 [--host-only])" >&2; exit 2 ;;
  esac
done

packages=(
  # build
  build-essential cmake ninja-build pkg-config git python3 file g++-12
  # libFuzzer (tests/fuzz); clang-tidy-14 (tests/clang-tidy, .clang-tidy)
  clang libclang-rt-14-dev clang-tidy
  # libraries
  libdpdk-dev libmbedtls-dev libcli11-dev doctest-dev libbenchmark-dev libpcap-dev libibverbs-dev
  # test tools; Open vSwitch 3.1 is the oracle of tests/conformance
  python3-scapy openvswitch-switch python3-openvswitch python3-netaddr
  # tunnels (issue 15): tshark decodes keel's VXLAN/GENEVE/GRE output
  # (test_tnl_decoders.py), ping drives the kernel-VXLAN interop (tests/e2e)
  tshark iputils-ping
  # benchmarks (tests/bench): OVS-DPDK for run_scenarios.py --ovs, cachegrind for instructions.py
  openvswitch-switch-dpdk valgrind
  # SSH (issue 17, tests/e2e/test_ssh_*.py, tests/bench/bench_ssh.py): real
  # clients (OpenSSH, paramiko), ssh-audit, and the two servers of the
  # benchmark (dropbear, sshd: run privately on free ports, never as services;
  # see the policy-rc.d guard below)
  openssh-client python3-paramiko ssh-audit dropbear-bin openssh-server
  # aarch64: cross compiler, qemu-aarch64 (user mode), qemu-system-aarch64
  g++-aarch64-linux-gnu qemu-user qemu-system-arm
)

# One dpkg-query for all: "name status" per installed (or known) package.
installed=$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${packages[@]}" 2>/dev/null || true)
missing=()
for p in "${packages[@]}"; do
  grep -qE "^${p//+/\\+} ii" <<<"$installed" || missing+=("$p")
done

if (( ${#missing[@]} )); then
  if [[ $(id -u) == 0 ]]; then
    as_root=()
  elif command -v sudo >/dev/null; then
    as_root=(sudo)
  else
    echo "setup.sh: not root and no sudo; install as root: ${missing[*]}" >&2
    exit 1
  fi
  echo "setup.sh: installing ${missing[*]}"
  # openssh-server's (and dropbear's) maintainer scripts start a system SSH
  # service: a temporary policy-rc.d that answers 101 ("action forbidden")
  # keeps every service stopped during this install. Only when none exists
  # (a container's own policy-rc.d stays as it was), removed afterwards even
  # when apt fails.
  policy=/usr/sbin/policy-rc.d
  own_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\n# toolchains/setup.sh: no service starts during its apt-get\nexit 101\n' |
      "${as_root[@]}" tee "$policy" >/dev/null
    "${as_root[@]}" chmod 755 "$policy"
    own_policy=1
    trap '"${as_root[@]}" rm -f "$policy"' EXIT
  fi
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
  if (( own_policy )); then
    "${as_root[@]}" rm -f "$policy"
    trap - EXIT
  fi
else
  echo "setup.sh: all ${#packages[@]} host packages present"
fi

if (( ! host_only )); then
  "$here/arm64-sysroot.sh"
fi
