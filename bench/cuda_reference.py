#!/usr/bin/env python3
"""CUDA reference for vkcopy's copy benchmark, measured with PyTorch.

Times host<->device, device<->device, round-trip and bidirectional copies with
the host clock (and, in separate runs, CUDA events) and writes JSON that
vkcopy's Rust side reads. Needs only python3 + torch; `--self-test` checks the
CUDA-free logic without importing torch. See bench/README.md, "CUDA reference".
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
UNITS = {"KiB": KIB, "MiB": MIB, "GiB": GIB}
DEFAULT_SIZES = "4KiB 64KiB 1MiB 16MiB 64MiB 256MiB 1GiB"
ALL_PATHS = ["readback", "upload", "device_to_device", "round_trip", "bidirectional"]
# For readback and upload. "pinned" is CUDA's best path: a non-blocking copy
# from pinned memory, then one synchronize; "pinned_blocking" is the blocking
# copy_ of the same memory (what this script timed before 2026-12-03).
HOST_KINDS = ["pinned", "pinned_blocking", "pageable", "unaligned"]
ROUND_TRIP_MAX = 64 * KIB  # a round trip is a latency measure: small sizes only
BIDIR_SIZE = 256 * MIB  # per direction
BIG, BIG_REPEAT = 256 * MIB, 3  # from 256 MiB on, at most 3 timed runs: each is long
# Up to 1 MiB, 200 timed runs unless --repeat says: a best of 10 there is not
# yet the best (vkcopy's bench counts its runs the same way).
SMALL, SMALL_REPEAT = MIB, 200
DEFAULT_REPEAT = 10
WARMUP = 2
UNALIGNED_OFFSET = 16  # glibc malloc's mmap'd big blocks start 16 bytes past a page


# ---- CUDA-free logic (tested by --self-test) ----

def parse_size(text):
    """'4KiB' -> 4096, '1GiB' -> 1 << 30; plain integers are bytes."""
    text = text.strip()
    unit = next((u for u in UNITS if text.endswith(u)), None)
    number, scale = (text[:-3], UNITS[unit]) if unit else (text, 1)
    try:
        value = int(number) * scale
    except ValueError:
        raise ValueError(f"bad size '{text}': expected e.g. 4096, 4KiB, 64MiB, 1GiB")
    if value <= 0:
        raise ValueError(f"bad size '{text}': must be positive")
    return value


def parse_sizes(items):
    """Sizes given space- or comma-separated: ['4KiB,1MiB', '1GiB']."""
    return [parse_size(s) for item in items for s in item.split(",") if s.strip()]


def format_size(n):
    for suffix, unit in sorted(UNITS.items(), key=lambda u: -u[1]):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {suffix}"
    return f"{n} B"


def repeats_for(size, repeat):
    """Timed runs at `size`: `repeat` as given (None: 10, and SMALL_REPEAT for
    small copies), at most BIG_REPEAT for big ones; as vkcopy's bench counts."""
    if repeat is None:
        repeat = SMALL_REPEAT if size <= SMALL else DEFAULT_REPEAT
    return min(repeat, BIG_REPEAT) if size >= BIG else repeat


def make_result(path, host_memory, nbytes, host_times, gpu_times):
    """One entry of "results": seconds, and GB/s (1e9 bytes/s) from the host clock."""
    best, median = min(host_times), statistics.median(host_times)
    return {"path": path, "host_memory": host_memory, "bytes": int(nbytes),
            "repeat": len(host_times), "best_seconds": best, "median_seconds": median,
            "best_gbps": nbytes / best / 1e9, "median_gbps": nbytes / median / 1e9,
            "gpu_best_seconds": min(gpu_times) if gpu_times else None,
            "gpu_median_seconds": statistics.median(gpu_times) if gpu_times else None}


def header(version, device, driver):
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"tool": "cuda-torch", "tool_version": version, "device": device,
            "driver": driver, "host": platform.node(), "time": now, "results": []}


def write_json(doc, out):
    tmp = out + ".tmp"  # no half-written file if interrupted
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, out)


def row(r=None):
    """One line of the stdout table; the heading without r."""
    if r is None:
        return (f"{'path':<17}{'host':<10}{'size':>9}{'n':>4}{'best GB/s':>11}"
                f"{'med GB/s':>10}{'best us':>11}{'gpu best us':>13}")
    gpu = r["gpu_best_seconds"]
    return (f"{r['path']:<17}{r['host_memory']:<10}{format_size(r['bytes']):>9}"
            f"{r['repeat']:>4}{r['best_gbps']:>11.2f}{r['median_gbps']:>10.2f}"
            f"{r['best_seconds'] * 1e6:>11.1f}"
            f"{'-' if gpu is None else format(gpu * 1e6, '.1f'):>13}")


def self_test():
    import tempfile
    assert parse_size("4KiB") == 4096 and parse_size("1GiB") == GIB and parse_size("123") == 123
    assert parse_sizes(["4KiB,64KiB", "1MiB", "1GiB"]) == [4 * KIB, 64 * KIB, MIB, GIB]
    for bad in ("4KB", "x", "0", "-1MiB", "KiB"):
        try:
            parse_size(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad}")
    assert (repeats_for(GIB, None), repeats_for(16 * MIB, None), repeats_for(GIB, 2)) == (3, 10, 2)
    assert (repeats_for(MIB, None), repeats_for(4 * KIB, 500), repeats_for(4 * KIB, 2)) \
        == (SMALL_REPEAT, 500, 2)
    assert [format_size(n) for n in (64 * KIB, GIB, 100)] == ["64 KiB", "1 GiB", "100 B"]
    r = make_result("upload", "pinned", GIB, [0.03, 0.02, 0.04], [])
    assert r["best_seconds"] == 0.02 and r["median_seconds"] == 0.03
    assert abs(r["best_gbps"] - GIB / 0.02 / 1e9) < 1e-9 and r["gpu_best_seconds"] is None
    r2 = make_result("readback", "unaligned", 4096, [1e-5, 2e-5], [5e-6, 7e-6])
    assert abs(r2["median_seconds"] - 1.5e-5) < 1e-12 and r2["gpu_best_seconds"] == 5e-6
    assert " ".join(r) == "path host_memory bytes repeat best_seconds median_seconds " \
        "best_gbps median_gbps gpu_best_seconds gpu_median_seconds"
    doc = dict(header("x / CUDA y", "dev", ""), results=[r, r2])
    with tempfile.TemporaryDirectory() as d:
        write_json(doc, os.path.join(d, "cuda.json"))
        with open(os.path.join(d, "cuda.json")) as f:
            assert json.load(f) == doc
    assert row(r2).split()[:3] == ["readback", "unaligned", "4"]
    assert "torch" not in sys.modules, "self-test must not import torch"
    print("self-test ok")


def driver_version():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.split("\n")[0].strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


# ---- measurements (torch is imported lazily, in main) ----

def measure(torch, op, runs):
    """Seconds per op: host clock around op + synchronize; CUDA events around op in
    separate, interleaved runs, so that recording events adds nothing to host times."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(WARMUP):  # first touches, lazy init, the pinned allocator's cache
        op()
    torch.cuda.synchronize()
    host, gpu = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        op()
        torch.cuda.synchronize()
        host.append(time.perf_counter() - t0)
        start.record()
        op()
        end.record()
        torch.cuda.synchronize()
        gpu.append(start.elapsed_time(end) / 1e3)  # ms -> s
    return host, gpu


def host_buffer(torch, n, kind):
    if kind in ("pinned", "pinned_blocking"):
        h = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    elif kind == "pageable":
        h = torch.empty(n, dtype=torch.uint8)
    else:  # unaligned: a view 16 bytes into a larger pageable tensor
        h = torch.empty(n + UNALIGNED_OFFSET, dtype=torch.uint8)[UNALIGNED_OFFSET:]
    return h.fill_(0x5A)  # fault the pages in now, not inside the timing


def free(torch):
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    host_empty = getattr(torch._C, "_host_emptyCache", None)  # cached pinned blocks
    if host_empty:
        host_empty()


def run_path(torch, path, sizes, repeat):
    """Yields one result per (host memory, size) of the path."""
    def dev(n):  # a device buffer
        return torch.empty(n, dtype=torch.uint8, device="cuda")

    if path in ("readback", "upload"):
        for kind in HOST_KINDS:
            for n in sizes:
                h, d = host_buffer(torch, n, kind), dev(n)
                nb = kind == "pinned"  # the best path: measure() synchronizes once
                op = ((lambda: h.copy_(d, non_blocking=nb)) if path == "readback"
                      else (lambda: d.copy_(h, non_blocking=nb)))
                yield make_result(path, kind, n, *measure(torch, op, repeats_for(n, repeat)))
                del h, d, op
            free(torch)
    elif path == "device_to_device":
        for n in sizes:
            a, b = dev(n), dev(n)
            yield make_result(path, "device", n,
                              *measure(torch, lambda: b.copy_(a), repeats_for(n, repeat)))
            del a, b
            free(torch)
    elif path == "round_trip":
        small = [n for n in sizes if n <= ROUND_TRIP_MAX]
        if not small:
            print(f"note: round_trip skipped: only sizes up to {format_size(ROUND_TRIP_MAX)}",
                  file=sys.stderr)
        for n in small:
            h, d = host_buffer(torch, n, "pinned"), dev(n)

            def op():  # a synchronous upload, then a synchronous readback
                d.copy_(h)
                h.copy_(d)
            yield make_result(path, "pinned", n, *measure(torch, op, repeats_for(n, repeat)))
            del h, d, op
        free(torch)
    elif path == "bidirectional":
        n = BIDIR_SIZE
        if n not in sizes:
            print(f"note: bidirectional skipped: it runs at {format_size(n)} only",
                  file=sys.stderr)
            return
        hr, hu = host_buffer(torch, n, "pinned"), host_buffer(torch, n, "pinned")
        dr, du = dev(n), dev(n)
        s1, s2, main = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.current_stream()

        def op():  # non_blocking, so that both copies are in flight at once
            s1.wait_stream(main)  # both copies after the start event
            s2.wait_stream(main)
            with torch.cuda.stream(s1):
                hr.copy_(dr, non_blocking=True)
            with torch.cuda.stream(s2):
                du.copy_(hu, non_blocking=True)
            main.wait_stream(s1)  # the end event after both copies
            main.wait_stream(s2)
        yield make_result(path, "pinned", 2 * n, *measure(torch, op, repeats_for(n, repeat)))
        del hr, hu, dr, du, op
        free(torch)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", nargs="+", default=DEFAULT_SIZES.split(),
                   help=f"sizes, space or comma separated (default: {DEFAULT_SIZES})")
    p.add_argument("--repeat", type=int, default=None,
                   help=f"timed runs per size (default {DEFAULT_REPEAT}, and {SMALL_REPEAT} up "
                        f"to 1 MiB; at most {BIG_REPEAT} from 256 MiB)")
    p.add_argument("--out", default="cuda.json", help="JSON output (default cuda.json)")
    p.add_argument("--paths", default=",".join(ALL_PATHS), help="comma list (default all)")
    p.add_argument("--self-test", action="store_true", help="test the CUDA-free logic only")
    args = p.parse_args(argv)
    if args.self_test:
        self_test()
        return 0
    try:
        sizes = parse_sizes(args.sizes)
    except ValueError as e:
        p.error(str(e))
    paths = [s.strip() for s in args.paths.split(",") if s.strip()]
    unknown = [s for s in paths if s not in ALL_PATHS]
    if unknown:
        p.error(f"unknown paths {unknown} (known: {', '.join(ALL_PATHS)})")
    if args.repeat is not None and args.repeat < 1:
        p.error("--repeat must be at least 1")
    try:
        import torch
    except ImportError:
        print("error: PyTorch is not installed (import torch failed)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("error: CUDA is not available to PyTorch (no NVIDIA GPU or driver?)", file=sys.stderr)
        return 2
    doc = header(f"{torch.__version__} / CUDA {torch.version.cuda}",
                 torch.cuda.get_device_name(), driver_version())
    print(f"{doc['device']}, driver {doc['driver'] or '?'}, torch {doc['tool_version']}")
    print(row())
    for path in paths:
        for r in run_path(torch, path, sizes, args.repeat):
            doc["results"].append(r)
            print(row(r), flush=True)
    write_json(doc, args.out)  # written once, at the end
    print(f"wrote {args.out} ({len(doc['results'])} results)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
