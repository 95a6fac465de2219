#!/usr/bin/env bash
# .gl holds vkcopy-suite (release) and submit_latency (release example), and
# the .deb files of the Vulkan loader and validation layer.
# 2026-12-07, issue 50 items 5 and 6: run2/run.sh of 2026-12-06 again (CUDA's
# best path and vkcopy's bench side by side twice, 4 KiB to 1 GiB; readbacks
# with the CPU's route off; 8 processes of one 4 KiB device copy; the perf
# cases with thresholds held; the suite under the validation layer, the last
# two only if time is left), plus:
#  - the machine's topology and each process's CPU list;
#  - submit_latency: the driver's floor per queue family;
#  - placement: the small-copy bench (4KiB,16KiB,64KiB,1MiB; readback, upload,
#    device_to_device) 3 times unpinned, 3 times pinned with taskset to the
#    GPU's NUMA-local CPUs, and 3 times pinned to another node's CPUs (or, on a
#    machine of one node, to 4 CPUs only: "narrow"); CUDA's reference once
#    with each placement, each bench compared with the CUDA run of its
#    placement. Runs are interleaved (un, local, other; un, local, other; ...).
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null 2>&1; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -e /work/main ] || { mkdir -p /work; ln -s "$PWD" /work/main; }
B=$PWD/.gl/vkcopy-suite
L=$PWD/.gl/submit_latency
R=$OUT/r; mkdir -p $R/topo $R/place
pack() { (cd $OUT && tar czf r.tgz r); }
log() { echo "$(date -u +%FT%TZ) t=${SECONDS}s $*" >> $R/log.txt; }
AFF=$R/affinity.txt
# run TAG CPUS CMD...: CMD in this very process (exec) after writing the CPU
# list the kernel lets it run on; pinned with taskset when CPUS is not empty.
run() {
  local tag=$1 cpus=$2; shift 2
  local rec='echo "$0: $(grep Cpus_allowed_list /proc/self/status | tr -s "\t " " ") pid $$" >> '"$AFF"'; exec "$@"'
  if [ -n "$cpus" ]; then taskset -c "$cpus" sh -c "$rec" "$tag" "$@"
  else sh -c "$rec" "$tag" "$@"; fi
}
log start

# ---- the machine and its topology
nvidia-smi --query-gpu=name,driver_version,pci.bus_id,vbios_version --format=csv > $R/gpu.txt 2>&1
nvidia-smi > $R/topo/nvidia-smi.txt 2>&1
nvidia-smi topo -m > $R/topo/nvidia-smi-topo-m.txt 2>&1
nvidia-smi -q > $R/topo/nvidia-smi-q.txt 2>&1
grep -i -A3 numa $R/topo/nvidia-smi-q.txt > $R/topo/nvidia-smi-q-numa.txt 2>&1
lscpu > $R/topo/lscpu.txt 2>&1
{ command -v numactl && numactl --hardware; } > $R/topo/numactl-hardware.txt 2>&1 || echo "numactl: not installed" >> $R/topo/numactl-hardware.txt
BUS=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1 | tr A-F a-f | tr -d ' ')
D=/sys/bus/pci/devices/${BUS:4}
[ -e "$D" ] || D=$(ls -d /sys/bus/pci/devices/*:"${BUS#*:}" 2>/dev/null | head -1)
{
  echo "nvidia-smi bus id: $BUS"; echo "sysfs: $D"
  for f in numa_node local_cpulist local_cpus current_link_speed current_link_width max_link_speed max_link_width; do
    echo "$f: $(cat $D/$f 2>&1)"; done
  echo "nodes:"; for n in /sys/devices/system/node/node[0-9]*; do echo "  $(basename $n) cpulist $(cat $n/cpulist) distance $(cat $n/distance 2>/dev/null)"; done
  echo "online: $(cat /sys/devices/system/cpu/online)"
  echo "nproc: $(nproc)"
  echo "cgroup cpuset.cpus.effective: $(cat /sys/fs/cgroup/cpuset.cpus.effective 2>&1)"
  echo "cgroup cpuset.mems.effective: $(cat /sys/fs/cgroup/cpuset.mems.effective 2>&1)"
  echo "this shell: $(grep -E 'Cpus_allowed_list|Mems_allowed_list' /proc/self/status | tr -s '\t ' ' ' | tr '\n' ' ')"
  echo "taskset -p \$\$: $(taskset -p $$ 2>&1)"
  echo "iommu groups: $(ls /sys/kernel/iommu_groups 2>/dev/null | wc -l); cmdline: $(cat /proc/cmdline)"
} > $R/topo/placement.txt 2>&1
# The CPU lists to pin to, within what this process may use.
eval "$(python3 - "$D" <<'EOF'
import glob, os, re, sys
def parse(s):
    out = set()
    for part in s.strip().split(","):
        if not part: continue
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out
def fmt(cs):
    return ",".join(str(c) for c in sorted(cs))
allowed = parse(re.search(r"Cpus_allowed_list:\s*(\S+)", open("/proc/self/status").read()).group(1))
d = sys.argv[1]
try: node = int(open(d + "/numa_node").read())
except Exception: node = -1
try: local = parse(open(d + "/local_cpulist").read())
except Exception: local = set(allowed)
nodes = {}
for p in sorted(glob.glob("/sys/devices/system/node/node[0-9]*")):
    nodes[int(p.rsplit("node", 1)[1])] = parse(open(p + "/cpulist").read())
if node < 0:
    # No NUMA node in sysfs: nvidia-smi topo -m's NUMA Affinity, if a number.
    import subprocess
    try:
        lines = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True).stdout.splitlines()
        lines = [re.sub(r"\x1b\[[0-9;]*m", "", l) for l in lines]
        head = [c.strip() for c in lines[0].split("\t")]
        row = next(l for l in lines if l.startswith("GPU0"))
        cells = [c.strip() for c in row.split("\t")]
        i = head.index("NUMA Affinity")
        node = int(cells[i if head[0] == "" else i + 1])
    except Exception:
        pass
localkind = "local"
if node < 0 and len(nodes) >= 2:
    node, localkind = min(nodes), "node%d" % min(nodes)
if node >= 0 and node in nodes:
    local = nodes[node] & local if nodes[node] & local else nodes[node]
local &= allowed
other, kind = set(), "narrow"
for n, cs in nodes.items():
    if n != node and cs & allowed and node >= 0:
        other, kind = cs & allowed, "remote_node%d" % n
        break
if not other:
    other = set(sorted(local)[:4])
print("GNODE=%d LOCAL=%s LOCALKIND=%s OTHER=%s OTHERKIND=%s NNODES=%d" % (node, fmt(local), localkind, fmt(other), kind, len(nodes)))
EOF
)"
: ${GNODE:=-1} ${LOCAL:=} ${LOCALKIND:=local} ${OTHER:=} ${OTHERKIND:=narrow} ${NNODES:=0}
echo "GNODE=$GNODE LOCAL=$LOCAL LOCALKIND=$LOCALKIND OTHER=$OTHER OTHERKIND=$OTHERKIND NNODES=$NNODES" >> $R/topo/placement.txt
log "topology done: $(tail -1 $R/topo/placement.txt)"; pack

# ---- the driver's floor per queue family
run submit_latency "" timeout 120 $L 300 > $R/submit_latency.txt 2>&1; log "submit_latency rc=$?"; pack

# ---- run2/run.sh's two rounds, unpinned
S="4KiB 16KiB 64KiB 256KiB 1MiB 16MiB 64MiB 256MiB 1GiB"
for i in 1 2; do
  run cuda$i "" timeout 60 python3 bench/cuda_reference.py --sizes $S --out $R/cuda$i.json > $R/cuda$i.txt 2>&1; log "cuda$i rc=$?"
  run bench$i "" timeout 100 $B bench --sizes $S --out $R/bench$i.json --compare $R/cuda$i.json > $R/bench$i.txt 2>&1; log "bench$i rc=$?"; pack
done

# ---- placement
declare -A CPUS=([un]="" [$LOCALKIND]="$LOCAL" [$OTHERKIND]="$OTHER")
TAGS="un $LOCALKIND $OTHERKIND"
SS="4KiB 16KiB 64KiB 1MiB"; P=readback,upload,device_to_device
P2=$R/place
for t in $TAGS; do
  run cuda-$t "${CPUS[$t]}" timeout 60 python3 bench/cuda_reference.py --sizes $SS --paths $P --out $P2/cuda-$t.json > $P2/cuda-$t.txt 2>&1; log "cuda-$t rc=$?"
done; pack
for i in 1 2 3; do for t in $TAGS; do
  run bench-$t-$i "${CPUS[$t]}" timeout 60 $B bench --sizes $SS --paths $P --out $P2/bench-$t-$i.json --compare $P2/cuda-$t.json > $P2/bench-$t-$i.txt 2>&1; log "bench-$t-$i rc=$?"
done; pack; done

# ---- the rest of run2/run.sh
VKCOPY_MAPPED_READBACK=never run never "" timeout 40 $B bench --sizes 4KiB,16KiB,64KiB --paths readback,round_trip --out $R/never.json --compare $R/cuda2.json > $R/never.txt 2>&1; log "never rc=$?"
for i in 1 2 3 4 5 6 7 8; do run probe$i "" timeout 20 $B bench --sizes 4KiB --paths device_to_device --repeat 50 --out $R/p$i.json 2>&1 | grep "^device_to_device"; done > $R/slow-probe.txt 2>&1; rm -f $R/p*.json; log "slow-probe done"; pack
if [ $SECONDS -lt 330 ]; then
  run perf "" timeout 120 $B run --filter 'perf::*' --speed hold --retries 1 --report-dir $R/perf > $R/perf.txt 2>&1; log "perf rc=$?"; pack
else log "perf skipped: no time"; fi
if [ $SECONDS -lt 300 ]; then
  VKCOPY_VALIDATION=1 run suite-layer "" timeout $((530 - SECONDS)) $B run --jobs 4 --report-dir $R/suite-layer > $R/suite-layer.txt 2>&1; log "suite-layer rc=$?"
else log "suite-layer skipped: no time"; fi
log end; pack
