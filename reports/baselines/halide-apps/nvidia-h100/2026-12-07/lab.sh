#!/usr/bin/env bash
# On the lab machine: Halide 19.0.0's apps on four runtimes (vkcopy under the
# validation layer), outputs held to the CPU's, then each timed.
set -u
for f in .gla/*.deb; do dpkg -x $f /; done; ldconfig
tar -C / -xJf .gla/vl.tar.xz
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version,pci.bus_id --format=csv,noheader; nvidia-smi topo -m; head -2 /etc/os-release; nproc; python3 -c "import numpy; print('numpy', numpy.__version__)"; } > $OUT/device.txt 2>&1
mkdir -p /tmp/apps && tar -C /tmp/apps -xJf .gla/apps.tar.xz
timeout ${BUDGET:-420} python3 scripts/halide_apps.py --prebuilt --out /tmp/apps --settings .gla/apps.json \
  --runtime 19.0.0=$PWD/.gla/rt/19.0.0 --runtime 19.0.0-fixed=$PWD/.gla/rt/19.0.0-fixed \
  --runtime 19.0.0-repaired=$PWD/.gla/rt/19.0.0-repaired --runtime vkcopy=$PWD/.gla/rt/vkcopy \
  --layer vkcopy --jobs 4 --timeout 120 --time ${ITER:-20} "$@" > $OUT/apps.log 2>&1
cp /tmp/apps/results.json /tmp/apps/timings.json $OUT/ 2>/dev/null
tail -45 $OUT/apps.log
# Where Halide's runtime crashes at the end of a run.
mkdir -p $OUT/bt
for r in 19.0.0 19.0.0-repaired; do
  LD_PRELOAD=$PWD/.gla/bt2.so BACKTRACE_DIR=$OUT/bt LD_LIBRARY_PATH=$PWD/.gla/rt/$r timeout 60 /tmp/apps/blur/gpu/run \
    --default_input_buffers=random:0:estimate_then_auto --default_input_scalars=estimate \
    'input=random:0:[2568,1922]' '--output_extents=[2560,1920]' --track_memory blur_y=/tmp/b.npy > $OUT/bt/$r.log 2>&1
  echo "exit $?" >> $OUT/bt/$r.log
  HL_DEBUG_CODEGEN=0 LD_LIBRARY_PATH=$PWD/.gla/rt/$r timeout 60 /tmp/apps/blur/gpu/time 3 'input=[2568,1922]' 'blur_y=[2560,1920]' > $OUT/bt/$r-time.log 2>&1; echo "exit $?" >> $OUT/bt/$r-time.log
done
tar -C $OUT -czf $OUT/bt.tgz bt && rm -rf $OUT/bt
