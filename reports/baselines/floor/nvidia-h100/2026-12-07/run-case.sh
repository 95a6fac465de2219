#!/usr/bin/env bash
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null 2>&1; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -e /work/main ] || { mkdir -p /work; ln -s "$PWD" /work/main; }
B=$PWD/.gl/vkcopy-suite
for i in 1 2 3 4 5; do
  timeout 60 $B run --filter 'perf::gpu::copies_at_the_floor' --speed hold --report-dir $OUT/p$i 2>&1 | grep -E "^(pass|FAIL)|floor \(" | cut -c1-220
done
