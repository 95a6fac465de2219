#!/usr/bin/env bash
# Runs every test: unit tests and every YAML case as its own test, on the
# default Vulkan device (lavapipe where there is no GPU), under the Khronos
# validation layer with synchronization validation. Extra arguments go to
# `cargo test` (e.g. `scripts/test.sh -- halide::`). The runner is built with the
# runtime's fault hook, for its device_lost test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-vulkan.sh
export VKCOPY_VALIDATION="${VKCOPY_VALIDATION:-1}"
exec cargo test --workspace --features vkcopy-suite/fault-injection "$@"
