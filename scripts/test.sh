#!/usr/bin/env bash
# Runs every test: unit tests and every YAML case as its own test, on the
# default Vulkan device (lavapipe where there is no GPU), under the Khronos
# validation layer with synchronization validation. Under the layer, speed
# thresholds are reported and not held (its cost is part of every time), so the
# perf cases then run once more without it, thresholds held on a GPU (on a CPU
# device such as lavapipe they are reported: its speed is the machine's load as
# much as the code's). Extra arguments go
# to `cargo test` (e.g. `scripts/test.sh -- halide::`); the perf run is left out
# when there are any, and so are the runs of every case on Halide's own Vulkan
# runtime (releases 19.0.0 and 21.0.0, from their PyPI wheels, and 19.0.0
# rebuilt from its sources with the seed's readback fix, and with the repairs
# that prove the causes of its failures) and on vkcopy's
# library of that ABI (halide-abi/, linked with 21.0.0's generic runtime); their
# known failures are reports/expectations/runtime-halide-<name>.yaml. Then
# real Halide pipelines run on both (scripts/halide-pipelines.sh), and Halide
# 19.0.0's own GPU tests on 19.0.0, 19.0.0-fixed, 19.0.0-repaired and vkcopy
# (scripts/halide-tests.sh), which also judge the cases that mirror them, and
# its GPU-scheduled apps on the same four (scripts/halide-apps.sh). The
# runtimes are still built first, since runner/tests/halide.rs uses them. The
# runs after `cargo test` use the suite binary it built (with the runtime's
# fault hook, which the runner's tests enable), so nothing is built twice. The
# last line sums it all up: the counts TESTING.md quotes.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-vulkan.sh
export VKCOPY_VALIDATION="${VKCOPY_VALIDATION:-1}"
suite="${CARGO_TARGET_DIR:-target}/debug/vkcopy-suite"
# Halide's runtimes first: runner/tests/halide.rs runs cases on 21.0.0.
built=$(scripts/halide-runtimes.sh)
mapfile -t halide_runtimes <<<"$built"
# Each part's count is kept for the closing line, the one place the docs quote.
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
cargo test --workspace "$@" 2>&1 | tee "$log/cargo"
summary="cargo test: $(awk '/^test result:/ {p += $4; f += $6; i += $8} END {printf "%d passed, %d failed, %d ignored", p, f, i}' "$log/cargo")"
# The closing line of a suite run (its counts and expected failures).
last() { grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1 | sed 's/ (listed.*//'; }
if [ $# -eq 0 ]; then
    echo "perf cases without the validation layer, speed thresholds held on a GPU (reported on a CPU device):"
    VKCOPY_VALIDATION=0 "$suite" run --filter 'perf::*' --retries 2 --speed auto 2>&1 | tee "$log/perf"
    summary+="; perf cases: $(last "$log/perf")"
    suites=()
    for runtime in "${halide_runtimes[@]}"; do
        name=$(basename "$(dirname "$runtime")")
        echo "every case on Halide's Vulkan runtime $runtime:"
        "$suite" run --runtime "halide:$runtime" 2>&1 | tee "$log/halide"
        summary+="; $name: $(last "$log/halide")"
        # Each run's results judge the mirrors of Halide's tests below.
        report=$(sed -n 's/^report: //p' "$log/halide" | tail -n 1)
        [ -n "$report" ] || { echo "scripts/test.sh: the run on $runtime printed no report folder" >&2; exit 1; }
        # Halide's tests run on 19.0.0, 19.0.0-fixed, 19.0.0-repaired and vkcopy (vkcopy-abi's runs judge it).
        case "$name" in
            19.0.0 | 19.0.0-fixed | 19.0.0-repaired) suites+=(--suite "$name=$report/results.json") ;;
            vkcopy-abi) suites+=(--suite "vkcopy=$report/results.json") ;;
        esac
    done
    echo "Halide pipelines compiled ahead of time, on Halide's runtime and on vkcopy's:"
    scripts/halide-pipelines.sh 2>&1 | tee "$log/pipelines"
    summary+="; pipelines: $(grep -c 'pass  ' "$log/pipelines" || true) passed, $(grep -c 'expected failure:' "$log/pipelines" || true) expected failures"
    echo "Halide 19.0.0's own GPU tests on Halide's runtime, the fixed one, the repaired one and vkcopy's, and the mirrors judged by them:"
    scripts/halide-tests.sh "${suites[@]}" 2>&1 | tee "$log/tests"
    summary+="; $(grep "^Halide's tests:" "$log/tests" | tail -n 1 | sed 's/ (.*//')"
    echo "Halide 19.0.0's own apps, built ahead of time, on Halide's runtime, the fixed one, the repaired one and vkcopy's:"
    scripts/halide-apps.sh 2>&1 | tee "$log/apps"
    summary+="; $(grep "^Halide's apps:" "$log/apps" | tail -n 1 | sed 's/ (.*//')"
fi
echo "scripts/test.sh: $summary"
