#!/usr/bin/env bash
# Halide 19.0.0's own GPU correctness tests (from its sources, built against
# its wheel), run JIT on the default Vulkan device on each runtime: Halide
# 19.0.0's own, 19.0.0-fixed (the seed's readback fix), 19.0.0-repaired (the
# repairs that prove the causes of its failures) and vkcopy (its library of
# Halide's ABI). Their verdicts are held to
# reports/halide-tests/19.0.0.yaml.
#
#   scripts/halide-tests.sh            the copy tests: the seed's and those the cases mirror
#   scripts/halide-tests.sh --all      every GPU test of test/correctness (minutes more)
#   scripts/halide-tests.sh --table    also rewrites the table in cases/halide/README.md
#   scripts/halide-tests.sh device_crop gpu_large_alloc    these tests only
#
# Binaries and results.json go to target/halide/tests-19.0.0/; a built test is
# reused. The last line counts the verdicts as expected and not.
set -euo pipefail
cd "$(dirname "$0")/.."
version=19.0.0
source scripts/halide-common.sh
fixed=$(scripts/halide-runtime-module.sh "$version" "$version-fixed" "scripts/patches/halide-$version-readback-fix.patch")
# 19.0.0 with the repairs that prove the causes named in the expectations.
repaired=$(scripts/halide-runtime-module.sh "$version" "$version-repaired" \
  "scripts/patches/halide-$version-region-sizes.patch" "scripts/patches/halide-$version-entry-name.patch")
bridge=$(scripts/halide-runtime-module.sh "$version" vkcopy-jit halide-abi/jit/vulkan_bridge.cpp)
VKCOPY_HALIDE_JIT_LIBRARY=$(scripts/halide-runtime.sh vkcopy-jit)
export VKCOPY_HALIDE_JIT_LIBRARY
exec "$venv/bin/python" scripts/halide_tests.py --src "$src" --wheel "$wheel" \
  --out "target/halide/tests-$version" --cases cases \
  --expectations "reports/halide-tests/$version.yaml" \
  --runtime "$version=" --runtime "$version-fixed=$fixed" \
  --runtime "$version-repaired=$repaired" --runtime "vkcopy=$bridge" "${args[@]}"
