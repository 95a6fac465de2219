#!/usr/bin/env bash
# Runs the whole suite on the default Vulkan device (lavapipe where there is no
# GPU) and writes reports to reports/out/<device>/<start time>/. Extra arguments go to
# `vkcopy-suite run` (e.g. `scripts/suite.sh --filter 'halide::*' --policy halide-legacy`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-vulkan.sh
if [ ! -x "${CARGO_TARGET_DIR:-target}/release/vkcopy-suite" ]; then
    echo "building vkcopy-suite (release, first time: 3-4 minutes on 2 idle cores, up to 16 busy) ..." >&2
fi
cargo build --release -q -p vkcopy-suite
exec "${CARGO_TARGET_DIR:-target}/release/vkcopy-suite" run "$@"
