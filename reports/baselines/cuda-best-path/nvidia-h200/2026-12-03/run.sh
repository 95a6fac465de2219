#!/usr/bin/env bash
# Session 14 (issue 35.1): CUDA's best path (non-blocking copy, one
# synchronize) and its blocking copy_, then vkcopy's bench with the same run
# counts (at least 200 up to 1 MiB), side by side, twice.
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=$PWD/.gl/vkcopy-suite
R=$OUT/r35; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt 2>&1
for i in 1 2; do
  timeout 150 python3 bench/cuda_reference.py --out $R/cuda$i.json > $R/cuda-reference$i.txt 2>&1
  timeout 200 $B bench --out $R/bench$i.json --compare $R/cuda$i.json > $R/bench$i.txt 2>&1
done
cd $OUT && tar czf r35.tgz r35 && rm -rf r35
