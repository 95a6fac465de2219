#!/usr/bin/env bash
# On the lab machine: Halide 19.0.0's GPU tests on three runtimes under the
# validation layer, and a backtrace of 19.0.0 where unaligned_buffer_copy waits.
set -u
python3 -c "import tarfile; tarfile.open('.gl/rest.tar.xz').extractall('.gl')"
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
# The validation layer's deb, unpacked and recompressed to fit the carry.
tar -C / -xJf .gl/vl.tar.xz
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
{ command -v gdb || echo "no gdb"; nvidia-smi -L; nvidia-smi --query-gpu=driver_version,pci.bus_id --format=csv,noheader; nvidia-smi topo -m; cat /etc/os-release | head -2; nproc; } > $OUT/device.txt 2>&1
mkdir -p /tmp/hl
python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('.gl/libHalide.so.xz'), open('/tmp/hl/libHalide.so','wb'))"
export LD_LIBRARY_PATH=/tmp/hl
export VKCOPY_HALIDE_JIT_LIBRARY=$PWD/.gl/libvkcopy_halide_jit.so
nm -D .gl/libhalide_runtime_vulkan.so > /dev/null 2>&1
timeout 240 python3 scripts/halide_tests.py --prebuilt --src .gl/src --out .gl/tests --cases cases \
  --expectations reports/halide-tests/19.0.0.yaml --runtime 19.0.0= \
  --runtime 19.0.0-fixed=$PWD/.gl/fixed/libinitmod_vulkan.so \
  --runtime 19.0.0-repaired=$PWD/.gl/repaired/libinitmod_vulkan.so --runtime vkcopy=$PWD/.gl/bridge/libinitmod_vulkan.so \
  --all --validation --jobs 14 --timeout 60 > $OUT/tests.log 2>&1
cp .gl/tests/results.json $OUT/results.json
tail -5 $OUT/tests.log

# The hang: the probe finds the runtime where it was linked.
mkdir -p target/halide/19.0.0 && cp .gl/libhalide_runtime_vulkan.so target/halide/19.0.0/
LD_PRELOAD=$PWD/.gl/backtrace-preload.so BACKTRACE_DIR=$OUT timeout 45 .gl/ubc > $OUT/ubc.log 2>&1 &
pid=$!
sleep 20
if kill -0 $pid 2>/dev/null; then
  command -v gdb >/dev/null && gdb -batch -p $(pgrep -n ubc) -ex 'thread apply all bt' > $OUT/ubc-gdb.txt 2>&1
  cat /proc/$(pgrep -n ubc)/wchan > $OUT/ubc-wchan.txt 2>&1
  for t in /proc/$(pgrep -n ubc)/task/*; do echo "$t $(cat $t/comm) $(cat $t/wchan)"; done >> $OUT/ubc-wchan.txt 2>&1
  for t in /proc/$(pgrep -n ubc)/task/*; do kill -USR1 ${t##*/}; sleep 0.5; done; sleep 2; pkill -9 -n ubc
fi
wait
cat $OUT/ubc.log
