#!/usr/bin/env bash
# Session 19, run 3 (issue 35): the final code. CUDA's best path and vkcopy's
# bench side by side twice (mapped readbacks auto), once with them never; the
# perf cases with thresholds held; the suite and the allocator's copy tests
# under the validation layer; a probe of the slow processes (8 processes of
# the same 4 KiB device copy).
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null 2>&1; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -e /work/main ] || { mkdir -p /work; ln -s "$PWD" /work/main; }
B=$PWD/.gl/vkcopy-suite
R=$OUT/r3; mkdir -p $R
pack() { (cd $OUT && tar czf r3.tgz r3); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt 2>&1
S="4KiB 16KiB 64KiB 256KiB 1MiB 16MiB 64MiB 256MiB 1GiB"
for i in 1 2; do
  timeout 60 python3 bench/cuda_reference.py --sizes $S --out $R/cuda$i.json > $R/cuda$i.txt 2>&1
  timeout 100 $B bench --sizes $S --out $R/bench$i.json --compare $R/cuda$i.json > $R/bench$i.txt 2>&1; pack
done
VKCOPY_MAPPED_READBACK=never timeout 40 $B bench --sizes 4KiB,16KiB,64KiB --paths readback,round_trip --out $R/never.json --compare $R/cuda2.json > $R/never.txt 2>&1
for i in 1 2 3 4 5 6 7 8; do timeout 20 $B bench --sizes 4KiB --paths device_to_device --repeat 50 --out $R/p$i.json 2>&1 | grep "^device_to_device"; done > $R/slow-probe.txt 2>&1; rm -f $R/p*.json; pack
timeout 120 $B run --filter 'perf::*' --speed hold --retries 1 --report-dir $R/perf > $R/perf.txt 2>&1; pack
VKCOPY_VALIDATION=1 timeout 200 $B run --jobs 4 --report-dir $R/suite-layer > $R/suite-layer.txt 2>&1; pack
( for t in .gl/tests/*; do echo "== $t"; VKCOPY_VALIDATION=1 timeout 60 $t 2>&1 | grep -E "^test |test result|panicked"; done ) > $R/tests.txt 2>&1
pack; rm -rf $R
