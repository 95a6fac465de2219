#!/usr/bin/env bash
# Issue 50.1 on the lab GPU: vkcopy's bench with the driver's floor per queue
# family beside it, CUDA's best path in the same lease, twice; the perf cases
# (copies_at_the_floor among them) with thresholds held.
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null 2>&1; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -e /work/main ] || { mkdir -p /work; ln -s "$PWD" /work/main; }
B=$PWD/.gl/vkcopy-suite
R=$OUT/r; mkdir -p $R
pack() { (cd $OUT && tar czf r.tgz r); }
log() { echo "$(date -u +%FT%TZ) t=${SECONDS}s $*" >> $R/log.txt; }
log start
nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv > $R/gpu.txt 2>&1
S="4KiB 16KiB 64KiB 256KiB 1MiB 16MiB 64MiB 256MiB 1GiB"
for i in 1 2; do
  timeout 90 python3 bench/cuda_reference.py --sizes $S --out $R/cuda$i.json > $R/cuda$i.txt 2>&1; log "cuda$i rc=$?"
  timeout 150 $B bench --sizes $S --out $R/bench$i.json --compare $R/cuda$i.json > $R/bench$i.txt 2>&1; log "bench$i rc=$?"; pack
done
timeout 150 $B run --filter 'perf::*' --speed hold --retries 1 --report-dir $R/perf > $R/perf.txt 2>&1; log "perf rc=$?"
log end; pack
