#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (packages), builds keel for this host and
# boots it: with no arguments the default host-sim board and its console.
# Arguments are passed to keel (e.g. ./run.sh --list-boards).
set -euo pipefail
cd "$(dirname "$0")"
./toolchains/setup.sh --host-only >&2
cmake --preset host >/dev/null
cmake --build --preset host --target keel >&2
exec build/host/firmware/keel "$@"
