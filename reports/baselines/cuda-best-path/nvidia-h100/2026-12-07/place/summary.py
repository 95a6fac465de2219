import json, statistics, sys, glob, os
R = sys.argv[1]
def load(p): return json.load(open(p))["results"]
def key(r): return (r["path"], r["host_memory"], r["bytes"])
def sz(b): return f"{b>>20} MiB" if b >= 1<<20 else f"{b>>10} KiB"
tags = ["un", "local", "narrow"]  # the placements of run.sh on this machine (one NUMA node)
paths = [("readback","aligned","pinned"),("upload","aligned","pinned"),("device_to_device","device","device")]
sizes = [4096, 16384, 65536, 1<<20]
B = {t: [ {key(r): r for r in load(f"{R}/place/bench-{t}-{i}.json")} for i in (1,2,3)] for t in tags}
C = {t: {key(r): r for r in load(f"{R}/place/cuda-{t}.json")} for t in tags}
print("vkcopy, us: best of each run's best (run1/run2/run3) | median of each run's median (run1/run2/run3)")
print("| path | size | " + " | ".join(f"{t} best: min (r1/r2/r3)" for t in tags) + " | " + " | ".join(f"{t} median: med (r1/r2/r3)" for t in tags) + " |")
print("|---|---:|" + "---:|"*6)
for p,h,ch in paths:
    for s in sizes:
        cells=[]
        for t in tags:
            bs=[B[t][i][(p,h,s)]["best_seconds"]*1e6 for i in range(3)]
            cells.append(f"{min(bs):.1f} ({'/'.join(f'{x:.1f}' for x in bs)})")
        for t in tags:
            ms=[B[t][i][(p,h,s)]["median_seconds"]*1e6 for i in range(3)]
            cells.append(f"{statistics.median(ms):.1f} ({'/'.join(f'{x:.1f}' for x in ms)})")
        print(f"| {p} | {sz(s)} | " + " | ".join(cells) + " |")
print()
print("CUDA, us, once per placement: best / median")
print("| path | size | " + " | ".join(tags) + " |")
print("|---|---:|" + "---:|"*3)
for p,h,ch in paths:
    for s in sizes:
        print(f"| {p} | {sz(s)} | " + " | ".join(f"{C[t][(p,ch,s)]['best_seconds']*1e6:.1f} / {C[t][(p,ch,s)]['median_seconds']*1e6:.1f}" for t in tags) + " |")
print()
print("ratio CUDA best / vkcopy best, each run against its placement's CUDA run: r1/r2/r3")
print("| path | size | " + " | ".join(tags) + " |")
print("|---|---:|" + "---:|"*3)
for p,h,ch in paths:
    for s in sizes:
        cells=[]
        for t in tags:
            c=C[t][(p,ch,s)]["best_seconds"]
            cells.append("/".join(f"{c/B[t][i][(p,h,s)]['best_seconds']:.2f}" for i in range(3)))
        print(f"| {p} | {sz(s)} | " + " | ".join(cells) + " |")
