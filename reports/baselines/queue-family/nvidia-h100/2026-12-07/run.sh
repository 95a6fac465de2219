#!/usr/bin/env bash
# Issue 50 baseline: CUDA's best path and vkcopy's bench (queue family chosen
# per path and size, timed recordings kept, one barrier per submission) twice,
# the build before (685ba79) once, --breakdown, the perf cases held, the floor
# case at 16 KiB to 1 MiB three times, and the allocator's tests under the
# validation layer.
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null 2>&1; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -e /work/main ] || { mkdir -p /work; ln -s "$PWD" /work/main; }
R=$OUT/r; mkdir -p $R
mkdir -p /tmp/new && gunzip -c .gl/new-vkcopy-suite.gz > /tmp/new/vkcopy-suite && chmod +x /tmp/new/vkcopy-suite
NEW=/tmp/new/vkcopy-suite; OLD=$PWD/.gl/vkcopy-suite
pack() { (cd $OUT && tar czf r.tgz r); }
log() { echo "$(date -u +%FT%TZ) t=${SECONDS}s $*" >> $R/log.txt; }
log start
nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv > $R/gpu.txt 2>&1
nvidia-smi topo -m > $R/topo.txt 2>&1
S="4KiB 16KiB 64KiB 256KiB 1MiB 4MiB 16MiB 64MiB 256MiB 1GiB"
for i in 1 2; do
  timeout 90 python3 bench/cuda_reference.py --sizes $S --out $R/cuda$i.json > $R/cuda$i.txt 2>&1; log "cuda$i rc=$?"
  timeout 150 $NEW bench --sizes $S --out $R/bench$i.json --compare $R/cuda$i.json > $R/bench$i.txt 2>&1; log "bench$i rc=$?"; pack
done
timeout 150 $OLD bench --sizes $S --out $R/old1.json --compare $R/cuda2.json > $R/old1.txt 2>&1; log "old1 rc=$?"
timeout 60 $NEW bench --breakdown --sizes 16KiB 256KiB 1MiB 4MiB > $R/breakdown.txt 2>&1; log "bd rc=$?"
timeout 150 $NEW run --filter 'perf::*' --speed hold --retries 1 --report-dir $R/perf > $R/perf.txt 2>&1; log "perf rc=$?"
pack
mkdir -p /tmp/fc/perf/gpu
for sz in 1048576 262144 65536 16384; do sed "s/16777216/$sz/g" cases/perf/gpu/copies_at_the_floor.yaml > /tmp/fc/perf/gpu/floor_$sz.yaml; done
for i in 1 2 3; do timeout 60 $NEW run --cases /tmp/fc --speed hold --report-dir $R/fc$i > $R/fc$i.txt 2>&1; log "fc$i rc=$?"; done
pack
[ -e .gl/tests.tgz ] && mkdir -p /tmp/tb && tar xzf .gl/tests.tgz -C /tmp/tb
for t in $(ls /tmp/tb 2>/dev/null); do
  VKCOPY_VALIDATION=1 timeout 60 /tmp/tb/$t --test-threads 2 > $R/test-$t.txt 2>&1; log "test $t rc=$?"
done
log end; pack
