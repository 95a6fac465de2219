#!/usr/bin/env bash
# Issue 50.5: slow processes. Short readback benches, each a process of its
# own: unpinned, pinned to one vCPU (taskset), and the build before; the
# vCPU each ran on, and the guest's NUMA view.
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null 2>&1; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -e /work/main ] || { mkdir -p /work; ln -s "$PWD" /work/main; }
R=$OUT/r; mkdir -p $R
mkdir -p /tmp/new && gunzip -c .gl/new-vkcopy-suite.gz > /tmp/new/vkcopy-suite && chmod +x /tmp/new/vkcopy-suite
NEW=/tmp/new/vkcopy-suite; OLD=$PWD/.gl/vkcopy-suite
one() { # label, then the command
  local l=$1; shift
  "$@" bench --paths readback --sizes 16KiB 1MiB --repeat 100 --out /tmp/x.json > /tmp/x.txt 2>&1
  echo "$l $(grep -E '^readback +aligned +(16 KiB|1 MiB)' /tmp/x.txt | awk '{printf "%s%s=%s ", $3,$4,$8}')" >> $R/slow.txt
}
(numactl -H; lscpu | grep -iE 'numa|socket|model name') > $R/numa.txt 2>&1
for i in $(seq 1 10); do one "plain$i" $NEW; done
for c in 0 5 10 15; do for i in 1 2 3; do one "cpu$c.$i" taskset -c $c $NEW; done; done
for c in 0-7 8-15; do for i in 1 2 3; do one "cpus$c.$i" taskset -c $c $NEW; done; done
for i in $(seq 1 6); do one "old$i" $OLD; done
cat $R/slow.txt
