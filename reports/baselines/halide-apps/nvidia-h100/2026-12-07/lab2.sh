#!/usr/bin/env bash
# The apps the first call did not time, and conv_layer's kernels alone
# (RunGen's --benchmarks keeps inputs and outputs on the device).
set -u
for f in .gla/*.deb; do dpkg -x $f /; done; ldconfig
tar -C / -xJf .gla/vl.tar.xz
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
rm -rf /tmp/apps; mkdir -p /tmp/apps && tar -C /tmp/apps -xJf .gla/apps.tar.xz
timeout 300 python3 scripts/halide_apps.py --prebuilt --out /tmp/apps --settings .gla/apps.json \
  --runtime 19.0.0=$PWD/.gla/rt/19.0.0 --runtime 19.0.0-fixed=$PWD/.gla/rt/19.0.0-fixed \
  --runtime 19.0.0-repaired=$PWD/.gla/rt/19.0.0-repaired --runtime vkcopy=$PWD/.gla/rt/vkcopy \
  --jobs 4 --timeout 120 --time ${ITER:-10} "$@" > $OUT/apps2.log 2>&1
cp /tmp/apps/timings.json $OUT/timings2.json
for r in 19.0.0 19.0.0-fixed vkcopy; do
  for app in conv_layer camera_pipe; do
    args=(--estimate_all); [ $app = camera_pipe ] && args=(--default_input_buffers=random:0:estimate_then_auto --default_input_scalars=estimate 'input=random:0:[2592,1968]' '--output_extents=[2560,1920,3]')
    echo "== $r $app" >> $OUT/bench.log
    LD_LIBRARY_PATH=$PWD/.gla/rt/$r timeout 60 /tmp/apps/$app/gpu/run "${args[@]}" --benchmarks=all --benchmark_min_time=1 --parsable_output >> $OUT/bench.log 2>&1
  done
done
tail -30 $OUT/apps2.log; cat $OUT/bench.log | grep -v Warning
