#!/usr/bin/env bash
# Runs every test: unit tests and every YAML case as its own test, on the
# default Vulkan device (lavapipe where there is no GPU), under the Khronos
# validation layer with synchronization validation. Under the layer, speed
# thresholds are reported and not held (its cost is part of every time), so the
# perf cases then run once more without it, thresholds held. Extra arguments go
# to `cargo test` (e.g. `scripts/test.sh -- halide::`); the perf run is left out
# when there are any. The runner is built with the runtime's fault hook, for its
# device_lost test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-vulkan.sh
export VKCOPY_VALIDATION="${VKCOPY_VALIDATION:-1}"
features=(--features vkcopy-suite/fault-injection)
cargo test --workspace "${features[@]}" "$@"
if [ $# -eq 0 ]; then
    echo "perf cases without the validation layer, speed thresholds held:"
    VKCOPY_VALIDATION=0 cargo run -q -p vkcopy-suite "${features[@]}" -- run --filter 'perf::*' --retries 2
fi
