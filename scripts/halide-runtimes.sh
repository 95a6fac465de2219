#!/usr/bin/env bash
# Builds every Halide runtime the tests use, each by scripts/halide-runtime.sh,
# and prints their library paths, one a line: Halide 19.0.0 and 21.0.0 from
# their wheels, 19.0.0 rebuilt with the seed's readback fix and with the
# repairs, and vkcopy's library of the ABI. The wheels come with them
# (halide-ffi's header test reads theirs).
set -euo pipefail
cd "$(dirname "$0")/.."
for version in 19.0.0 19.0.0-fixed 19.0.0-repaired 21.0.0 vkcopy-abi; do
    scripts/halide-runtime.sh "$version"
done
