#!/usr/bin/env bash
# Halide 19.0.0's own apps (apps/ of its sources) with GPU schedules, built
# ahead of time by its wheel for Vulkan and for the CPU, run through Halide's
# RunGen on each runtime: Halide 19.0.0's own, 19.0.0-fixed (the seed's
# readback fix), 19.0.0-repaired (the repairs that prove the causes of its
# failures) and vkcopy (its library of Halide's ABI, with 19.0.0's generic
# runtime, under the validation layer). Each output is held to the CPU's
# (halide-abi/apps/apps.yaml says where a tolerance applies, and why); the
# verdicts are held to reports/halide-apps/19.0.0.yaml.
#
#   scripts/halide-apps.sh                 every app
#   scripts/halide-apps.sh camera_pipe     these apps only
#   scripts/halide-apps.sh --table         also rewrites the table in cases/halide/README.md
#
# Builds, outputs and results.json go to target/halide/apps-19.0.0/; what is
# built is reused. The last line counts the verdicts as expected and not.
set -euo pipefail
cd "$(dirname "$0")/.."
version=19.0.0
source scripts/halide-common.sh
scripts/halide-runtime.sh "$version-fixed" >/dev/null
scripts/halide-runtime.sh "$version-repaired" >/dev/null
jit=$(scripts/halide-runtime.sh vkcopy-jit)
root="$PWD/target/halide"
# vkcopy's library with 19.0.0's generic runtime, under the name the apps link.
mkdir -p "$root/vkcopy-19.0.0"
ln -sf "$jit" "$root/vkcopy-19.0.0/libhalide_runtime_vulkan.so"
exec "$venv/bin/python" scripts/halide_apps.py --src "$src" --wheel "$wheel" \
  --out "$root/apps-$version" --settings halide-abi/apps/apps.yaml \
  --expectations "reports/halide-apps/$version.yaml" \
  --cpu-runtime "$root/$version/halide_runtime_x86-64-linux.o" \
  --runtime "$version=$root/$version" --runtime "$version-fixed=$root/$version-fixed" \
  --runtime "$version-repaired=$root/$version-repaired" \
  --runtime "vkcopy=$root/vkcopy-19.0.0" --layer vkcopy "${args[@]}"
