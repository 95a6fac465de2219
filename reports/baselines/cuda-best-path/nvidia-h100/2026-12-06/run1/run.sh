#!/usr/bin/env bash
# Session 19, run 1 (issue 35), on the code before c611a5f's last changes:
# the CPU's streaming reads of BAR memory against the GPU's readback
# (submit_latency), CUDA's best path beside vkcopy with mapped readbacks auto
# and never, and where the copies' time goes (bench --breakdown).
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null 2>&1; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=$PWD/.gl/vkcopy-suite
R=$OUT/r1; mkdir -p $R
pack() { (cd $OUT && tar czf r1.tgz r1); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt 2>&1
S="4KiB 16KiB 64KiB 256KiB 1MiB 4MiB 16MiB"
P=readback,upload,device_to_device
timeout 90 .gl/submit_latency 300 > $R/submit_latency.txt 2>&1; pack
timeout 60 python3 bench/cuda_reference.py --sizes $S --paths $P --out $R/cuda1.json > $R/cuda1.txt 2>&1; pack
timeout 80 $B bench --sizes $S --paths $P --out $R/auto1.json --compare $R/cuda1.json > $R/auto1.txt 2>&1; pack
VKCOPY_MAPPED_READBACK=never timeout 80 $B bench --sizes $S --paths $P --out $R/never1.json --compare $R/cuda1.json > $R/never1.txt 2>&1; pack
timeout 80 $B bench --breakdown --sizes 4KiB,64KiB,1MiB,4MiB,16MiB --repeat 300 --out $R/breakdown.json > $R/breakdown.txt 2>&1; pack
VKCOPY_MAPPED_READBACK=never timeout 60 $B bench --breakdown --sizes 4KiB,16KiB,64KiB,1MiB --repeat 300 --out $R/breakdown-never.json > $R/breakdown-never.txt 2>&1; pack
timeout 60 python3 bench/cuda_reference.py --sizes $S --paths $P --out $R/cuda2.json > $R/cuda2.txt 2>&1; pack
timeout 80 $B bench --sizes $S --paths $P --out $R/auto2.json --compare $R/cuda2.json > $R/auto2.txt 2>&1; pack
rm -rf $R
