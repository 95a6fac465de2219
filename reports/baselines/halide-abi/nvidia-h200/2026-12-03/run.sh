#!/usr/bin/env bash
# Session 14 on the H200: bench through vkcopy's Halide ABI against vkcopy's
# own API, the export chain on the three runtimes, and the suite's Halide
# cases on vkcopy's ABI under the validation layer.
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
for v in 21.0.0 21.0.0-fixed vkcopy-abi; do mkdir -p target/halide/$v; cp .gl/halide-$v.so target/halide/$v/libhalide_runtime_vulkan.so; done
B=$PWD/.gl/vkcopy-suite
R=$OUT/r14; mkdir -p $R
# second session: the ABI keeps its host views (and imports) between copies
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt 2>&1
S=4KiB,64KiB,1MiB,16MiB,64MiB,256MiB
# ABI against native, twice each, interleaved.
for i in 1 2; do
  timeout 120 $B bench --sizes $S --paths readback,upload,device_to_device --out $R/native$i.json > $R/native$i.txt 2>&1
  timeout 120 $B bench --sizes $S --runtime halide:vkcopy-abi > $R/abi$i.txt 2>&1
done
for v in 21.0.0-fixed 21.0.0; do timeout 150 $B bench --sizes $S --repeat 3 --runtime halide:$v > $R/bench-$v.txt 2>&1; done
# The export: 24 MP, after a warm-up; 21.0.0 reads back at 0.04 GB/s, so one export.
for v in vkcopy-abi 21.0.0-fixed vkcopy-abi 21.0.0-fixed 21.0.0; do
  n=5; [ $v = 21.0.0 ] && n=1
  i=$(ls $R | grep -c "export-$v-") || true
  LD_LIBRARY_PATH=$PWD/target/halide/$v EXPORT_STAGE_SUMS=1 timeout 200 .gl/export 6000 4000 $n > $R/export-$v-$i.json 2> $R/export-$v-$i.err
  echo "rc=$?" >> $R/export-$v-$i.err
done
export VKCOPY_VALIDATION=1
s=$(date +%s); timeout 150 $B run --runtime halide:vkcopy-abi --timeout 30 --report-dir $R/valabi > $R/valabi.txt 2>&1; echo "rc=$? $(( $(date +%s)-s ))s" >> $R/valabi.txt
cd $OUT && tar czf r14.tgz r14 && rm -rf r14
