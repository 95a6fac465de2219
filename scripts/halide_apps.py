"""Halide's own apps, built ahead of time by a Halide wheel and run on each
Vulkan runtime, their outputs held to the CPU's. scripts/halide-apps.sh sets
up what this needs (the sources, the wheel, the runtimes) and calls it.

Every app of the sources' apps/ whose generator has a GPU schedule is built
twice from its generator: for the Vulkan target (with `no_runtime`) and for
the CPU. Each is linked into Halide's generic runner, RunGen, and run on the
same fixed inputs (seeded random buffers, the scalars' estimates, the
outputs' estimated extents, or what halide-abi/apps/apps.yaml gives). The
Vulkan build is linked once against `libhalide_runtime_vulkan.so` and run on
each runtime by putting that runtime's folder first on LD_LIBRARY_PATH.

A verdict is pass (every output equals the CPU's: exactly, or within the
app's tolerance in apps.yaml, which says why), differ (it ran, and an output
does not), fail (non-zero exit or abort, as Halide's errors do), crash
(another signal), timeout, or unbuilt (Halide's compiler refuses the app for
Vulkan; the reason is its message). The verdicts are held to an expectations
file, as scripts/halide_tests.py holds the tests'.
"""

import argparse
import ast
import concurrent.futures
import json
import os
import re
import signal
import struct
import subprocess
import sys
import time

import numpy as np

try:
    import yaml
except ImportError:  # a lab machine without PyYAML reads the settings as JSON
    yaml = None

from halide_tests import expectations, table, write_table

VERDICTS = ("pass", "differ", "fail", "crash", "timeout", "unbuilt")
SCHEDULE = re.compile(r"has_gpu_feature|gpu_tile|gpu_blocks")


def gpu_apps(src):
    """{app: generator source} for every app with a GPU schedule."""
    apps = {}
    root = os.path.join(src, "apps")
    for app in sorted(os.listdir(root)):
        folder = os.path.join(root, app)
        if not os.path.isdir(folder):
            continue
        for f in sorted(os.listdir(folder)):
            path = os.path.join(folder, f)
            if f.endswith(".cpp") and os.path.isfile(path):
                text = open(path, errors="replace").read()
                if "HALIDE_REGISTER_GENERATOR" in text and SCHEDULE.search(text):
                    apps[app] = path
    return apps


def sh(cmd, out, cwd=None, env=None):
    """Runs a build step whose product is `out`, unless `out` is newer than
    its inputs and was made by the same command line. Returns the error text
    or None."""
    stamp = out + ".cmd"
    line = " ".join(cmd)
    inputs = [c for c in cmd if os.path.isfile(c) and c != out]
    if (os.path.exists(out) and os.path.exists(stamp) and open(stamp).read() == line
            and all(os.path.getmtime(out) >= os.path.getmtime(i) for i in inputs)):
        return None
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
    if r.returncode != 0:
        return (r.stderr or r.stdout)[-3000:]
    with open(stamp, "w") as f:
        f.write(line)
    return None


def generator_error(text):
    """The compiler's own words from a generator's failure."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for l in lines:
        if "Error" in l or "error" in l:
            i = lines.index(l)
            return " ".join(lines[i:i + 3])[:400]
    return lines[-1][:400] if lines else "no output"


class Build:
    """One app's generator, its two pipelines and their runners."""

    def __init__(self, a, app, source, settings):
        self.a, self.app, self.source = a, app, source
        self.settings = settings
        self.dir = os.path.join(a.out, app)
        self.gpu = os.path.join(self.dir, "gpu")
        self.cpu = os.path.join(self.dir, "cpu")
        self.error = None      # the build failed: the run fails with this
        self.unbuilt = None    # Halide refuses it for Vulkan: its reason

    def target(self, base, cpu):
        """The generator's arguments after its outputs: plugin, target, params."""
        params = dict(self.settings.get("params") or {})
        if cpu:
            params.update(self.settings.get("cpu_params") or {})
        plugin = []
        if "autoscheduler" in params:
            lib = os.path.join(self.a.wheel, "lib64", f"libautoschedule_{params['autoscheduler'].lower()}.so")
            plugin = ["-p", lib]
        return plugin + [f"target={base}"] + [f"{k}={v}" for k, v in params.items()]

    def run(self):
        a = self.a
        os.makedirs(self.dir, exist_ok=True)
        inc = os.path.join(a.wheel, "include")
        tools = os.path.join(a.wheel, "share", "tools")
        lib = os.path.join(a.wheel, "lib64")
        obj = os.path.join(self.dir, "generator.o")
        source = self.source
        if self.settings.get("patch"):
            # A variant of an app: its generator patched, in its build folder;
            # its own folder stays on the include path.
            source = os.path.join(self.dir, os.path.basename(self.source))
            err = sh(["patch", "-s", "-o", source, self.source, os.path.abspath(self.settings["patch"])], source)
            if err:
                self.error = f"{self.settings['patch']} does not apply: {err}"
                return self
        err = sh(["c++", "-std=c++17", "-fno-rtti", "-O1", "-w", "-I", inc, "-I", tools,
                  "-I", os.path.dirname(self.source),
                  "-I", os.path.join(a.src, "tools"), "-I", os.path.join(a.src, "apps", "support"),
                  "-c", source, "-o", obj], obj)
        if err:
            self.error = f"generator does not compile: {err}"
            return self
        gengen = os.path.join(self.dir, "generator")
        err = sh(["c++", obj, "-Wl,--whole-archive", os.path.join(lib, "libHalide_GenGen.a"),
                  "-Wl,--no-whole-archive", "-L", lib, "-lHalide", "-Wl,-rpath," + lib,
                  "-ldl", "-lpthread", "-o", gengen], gengen)
        if err:
            self.error = f"generator does not link: {err}"
            return self
        name = self.settings.get("generator") or re.search(
            r"HALIDE_REGISTER_GENERATOR\(\s*\w+\s*,\s*(\w+)", open(source).read()).group(1)
        for folder, target, fn in ((self.gpu, self.a.target, self.app), (self.cpu, self.a.cpu_target, self.app + "_cpu")):
            os.makedirs(folder, exist_ok=True)
            lib_a = os.path.join(folder, fn + ".a")
            err = sh([gengen, "-g", name, "-o", folder, "-e", "static_library,h,registration", "-f", fn]
                     + self.target(target, folder == self.cpu), lib_a)
            if err:
                if folder == self.gpu:
                    self.unbuilt = generator_error(err)
                    return self
                self.error = f"the CPU pipeline does not build: {generator_error(err)}"
                return self
            runner = os.path.join(folder, "run")
            reg = os.path.join(folder, fn + ".registration.cpp")
            runtime = (["-L", a.vulkan_link, "-lhalide_runtime_vulkan"] if folder == self.gpu
                       else [a.cpu_runtime])
            err = sh(["c++", "-std=c++17", "-I", inc, reg, a.rungen, lib_a] + runtime
                     + ["-ldl", "-lpthread", "-o", runner], runner)
            if err:
                self.error = f"RunGen does not link: {err}"
                return self
            if folder == self.gpu:
                timer = os.path.join(folder, "time")
                err = sh(["c++", "-std=c++17", "-I", inc, reg, a.timer, lib_a] + runtime
                         + ["-ldl", "-lpthread", "-o", timer], timer)
                if err:
                    self.error = f"time_app does not link: {err}"
                    return self
        return self

    def args(self):
        """RunGen's arguments: the fixed inputs and output extents."""
        s = self.settings
        out = [f"--default_input_buffers={s.get('buffers', 'random:0:estimate_then_auto')}",
               "--default_input_scalars=estimate",
               f"--output_extents={s.get('output_extents', 'estimate')}",
               "--track_memory"]
        out += [f"{k}={v}" for k, v in (s.get("inputs") or {}).items()]
        return out


def outputs(runner):
    """RunGen's --describe: [(name, type)] of the outputs."""
    r = subprocess.run([runner, "--describe"], capture_output=True, text=True, timeout=60)
    return re.findall(r'Output "(\w+)" is of type Buffer<(\w+)>', r.stdout + r.stderr)


def run(runner, args, outs, folder, timeout, env):
    """Runs one runner; returns (verdict or None when it ran, seconds, detail)."""
    os.makedirs(folder, exist_ok=True)
    files = [f"{n}={os.path.join(folder, n + '.npy')}" for n, _ in outs]
    for n, _ in outs:
        if os.path.exists(os.path.join(folder, n + ".npy")):
            os.remove(os.path.join(folder, n + ".npy"))
    start = time.monotonic()
    try:
        p = subprocess.run(["stdbuf", "-o0", "-e0", runner] + args + files, env=env, capture_output=True,
                           timeout=timeout, start_new_session=True)
    except subprocess.TimeoutExpired:
        return "timeout", timeout, f"killed after {timeout} s"
    took = time.monotonic() - start
    text = (p.stdout + p.stderr).decode(errors="replace")
    said = len(re.findall(r"Validation (?:Error|Warning)", text))
    lines = [l for l in text.splitlines() if l.strip() and not l.startswith("Warning: Image for Output")]
    if p.returncode < 0 and -p.returncode != signal.SIGABRT:
        try:
            sig = signal.Signals(-p.returncode).name
        except ValueError:
            sig = f"signal {-p.returncode}"
        return "crash", took, f"{sig}: " + (lines[-1] if lines else "")
    if p.returncode != 0:
        errors = [l for l in lines if re.search(r"error|Error|failed|abort", l)]
        return "fail", took, (errors[0] if errors else lines[-1] if lines else f"exit {p.returncode}")[:300]
    if said:
        first = next(l for l in text.splitlines() if "Validation" in l)
        return "fail", took, f"{said} validation messages: {first[:240]}"
    return None, took, ""


def load(path):
    """An .npy of Halide's image_io, whose header (padded with new lines
    before its spaces) numpy 2 refuses: read by hand."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError(f"{path}: not an .npy file")
    size, start = (struct.unpack("<H", data[8:10])[0], 10) if data[6] == 1 else (struct.unpack("<I", data[8:12])[0], 12)
    header = ast.literal_eval(data[start:start + size].decode("latin1").strip())
    arr = np.frombuffer(data, dtype=np.dtype(header["descr"]), offset=start + size)
    order = "F" if header["fortran_order"] else "C"
    return arr.reshape(header["shape"], order=order)


def compare(cpu, gpu, outs, tolerance, float_ulps):
    """None when every output matches, else what differs. A float output
    without an app's own tolerance may be off by `float_ulps` ULP of its
    largest magnitude."""
    for n, _ in outs:
        want, got = load(os.path.join(cpu, n + ".npy")), load(os.path.join(gpu, n + ".npy"))
        if want.shape != got.shape:
            return f"{n}: shape {got.shape}, the CPU's {want.shape}"
        t = tolerance
        if t is None and np.issubdtype(want.dtype, np.floating) and want.size:
            scale = float(np.nanmax(np.abs(want.astype(np.float64))))
            t = {"abs": float_ulps * float(np.finfo(want.dtype).eps) * scale}
        t = t or {}
        w, g = want.astype(np.float64), got.astype(np.float64)
        bad = ~(np.abs(g - w) <= float(t.get("abs", 0)) + float(t.get("rel", 0)) * np.abs(w))
        bad &= ~(np.isnan(g) & np.isnan(w))
        if bad.sum() > float(t.get("beyond", 0)) * bad.size:
            i = np.unravel_index(np.argmax(bad), bad.shape)
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
            return (f"{n}: {int(bad.sum())} of {bad.size} elements differ beyond the tolerance "
                    f"(max |diff| {np.nanmax(diff):.4g}); "
                    f"first at {tuple(int(x) for x in i)}: {got[i]} against the CPU's {want[i]}")
    return None


def time_sizes(b):
    """time_app's NAME=[...] arguments: apps.yaml's `time:`, else the sizes of the check."""
    s = b.settings
    if "time" in s:
        return [f"{k}={v}" for k, v in (s["time"] or {}).items()]
    out = []
    for k, v in (s.get("inputs") or {}).items():
        m = re.search(r"\[[\d,]+\]", v)
        if m:
            out.append(f"{k}={m.group(0)}")
    if str(s.get("output_extents", "estimate")).startswith("["):
        out += [f"{n}={s['output_extents']}" for n, _ in b.outs]
    return out


def time_all(a, builds, runtimes, results):
    """Times each app that ran on each runtime, one at a time; a Markdown
    table of medians (and bests) to stdout, every figure to timings.json."""
    rows = []
    figures = []
    for b in builds:
        if not getattr(b, "outs", None):
            continue
        cells = []
        for name, folder in runtimes:
            if results[(b.app, name)][0] not in ("pass", "differ", "crash"):
                cells.append(results[(b.app, name)][0])
                continue
            env = dict(os.environ, LD_LIBRARY_PATH=folder + os.pathsep + os.environ.get("LD_LIBRARY_PATH", ""))
            env.pop("LD_PRELOAD", None)
            cmd = [os.path.join(b.gpu, "time"), str(a.time)] + time_sizes(b)
            try:
                p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
                m = re.search(r"best ([\d.]+) ms median ([\d.]+) ms", p.stdout)
            except subprocess.TimeoutExpired:
                p, m = None, None
            if not m:
                why = "timeout" if p is None else (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
                cells.append(f"fail: {why[:80]}")
                continue
            best, median = float(m.group(1)), float(m.group(2))
            figures.append({"app": b.app, "runtime": name, "best_ms": best, "median_ms": median,
                            "iterations": a.time, "sizes": time_sizes(b)})
            cells.append(f"{median:.2f} ({best:.2f})")
            print(f"time {name:16} {b.app:26} median {median:9.3f} ms, best {best:9.3f} ms", flush=True)
        rows.append(f"| {b.app} | " + " | ".join(cells) + " |")
    with open(os.path.join(a.out, "timings.json"), "w") as f:
        json.dump(figures, f, indent=1)
    print(f"\nms per run, inputs uploaded and outputs read back: median (best) of {a.time}")
    print("| app | " + " | ".join(n for n, _ in runtimes) + " |")
    print("|---|" + "---:|" * len(runtimes))
    print("\n".join(rows), flush=True)


def build_all(a, apps, available, per_app, runtimes):
    """Builds RunGen's main and time_app once, then each app (or takes them built)."""
    started = time.monotonic()
    a.vulkan_link = runtimes[0][1]
    a.cpu_runtime = os.path.abspath(a.cpu_runtime)
    inc = os.path.join(a.wheel, "include")
    tools = os.path.join(a.wheel, "share", "tools")
    a.rungen = os.path.join(a.out, "RunGenMain.o")
    # No image formats: inputs are generated, outputs are .npy.
    err = sh(["c++", "-std=c++17", "-O1", "-w", "-DHALIDE_NO_PNG", "-DHALIDE_NO_JPEG", "-I", inc, "-I", tools,
              "-c", os.path.join(tools, "RunGenMain.cpp"), "-o", a.rungen], a.rungen)
    if err:
        sys.exit(f"RunGenMain.cpp does not compile against the wheel:\n{err}")
    a.timer = os.path.join(a.out, "time_app.o")
    err = sh(["c++", "-std=c++17", "-O2", "-Wall", "-I", inc, "-c", a.time_source, "-o", a.timer], a.timer)
    if err:
        sys.exit(f"{a.time_source} does not compile against the wheel:\n{err}")
    print(f"building {len(apps)} apps with the wheel ({a.jobs} at a time) ...", flush=True)
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        builds = list(pool.map(lambda x: Build(a, x, available[x], per_app.get(x) or {}).run(), apps))
    print(f"built in {time.monotonic() - started:.0f} s", flush=True)
    return builds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", help="Halide's unpacked sources (not with --prebuilt)")
    ap.add_argument("--wheel", help="the wheel's halide package folder (not with --prebuilt)")
    ap.add_argument("--out", required=True, help="folder for the builds, outputs and results.json")
    ap.add_argument("--settings", required=True,
                    help="the apps' settings (halide-abi/apps/apps.yaml, or the same as JSON)")
    ap.add_argument("--expectations", help="verdicts other than pass (without: every verdict recorded as it comes)")
    ap.add_argument("--runtime", action="append", default=[], metavar="NAME=FOLDER",
                    help="a runtime: its name and the folder of its libhalide_runtime_vulkan.so")
    ap.add_argument("--layer", action="append", default=[], metavar="NAME",
                    help="run this runtime under the validation layer (any message fails the app)")
    ap.add_argument("--cpu-runtime", help="Halide's generic runtime object for the CPU runners (not with --prebuilt)")
    ap.add_argument("--prebuilt", action="store_true",
                    help="run the apps already built in --out (on a machine without the wheel or a compiler)")
    ap.add_argument("--time", type=int, default=0, metavar="N",
                    help="also time each app on each runtime as an application runs it, N iterations "
                         "(time_app.cpp), at the sizes of apps.yaml's `time:`; to timings.json")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--table", help="Markdown file whose table between the markers is rewritten")
    ap.add_argument("apps", nargs="*", help="app names (default: every app with a GPU schedule)")
    a = ap.parse_args()
    with open(a.settings) as f:
        settings = (yaml.safe_load(f) if yaml else json.load(f)) or {}
    a.time_source = os.path.join(os.path.dirname(os.path.abspath(a.settings)), "time_app.cpp")
    a.target = settings["target"]
    a.float_ulps = float(settings.get("float_ulps", 0))
    a.cpu_target = settings["cpu_target"]
    per_app = settings.get("apps") or {}
    a.out = os.path.abspath(a.out)
    os.makedirs(a.out, exist_ok=True)
    if a.prebuilt:
        available = {x: None for x in sorted(os.listdir(a.out)) if os.path.isfile(os.path.join(a.out, x, "cpu", "run"))}
    else:
        available = gpu_apps(a.src)
        # Variants: another app's generator with a patch (`app:` and `patch:`).
        for name, setting in per_app.items():
            if (setting or {}).get("app") in available:
                available[name] = available[setting["app"]]
    unknown = [x for x in list(a.apps) + list(per_app) if x not in available]
    if unknown:
        sys.exit(f"no app with a GPU schedule named {', '.join(unknown)} in {a.src or a.out}")
    apps = a.apps or sorted(available)
    runtimes = []
    for spec in a.runtime:
        name, _, folder = spec.partition("=")
        if not os.path.isfile(os.path.join(folder, "libhalide_runtime_vulkan.so")):
            sys.exit(f"--runtime {spec}: no libhalide_runtime_vulkan.so in {folder}")
        runtimes.append((name, os.path.abspath(folder)))
    expected = expectations(a.expectations, key="app", verdicts=VERDICTS)[0] if a.expectations else {}
    started = time.monotonic()
    if a.prebuilt:
        builds = [Build(a, x, None, per_app.get(x) or {}) for x in apps]
        for b in builds:
            if not os.path.isfile(os.path.join(b.gpu, "run")):
                b.unbuilt = "not built for Vulkan (see the build machine's results.json)"
    else:
        builds = build_all(a, apps, available, per_app, runtimes)


    def one(b):
        """Every verdict of one app: {runtime: (verdict, seconds, detail)}."""
        if b.unbuilt or b.error:
            v = ("unbuilt", 0.0, b.unbuilt) if b.unbuilt else ("fail", 0.0, b.error[:300])
            return b, {name: v for name, _ in runtimes}
        cpu_runner = os.path.join(b.cpu, "run")
        outs = b.outs = outputs(cpu_runner)
        if not outs:
            return b, {name: ("fail", 0.0, "RunGen --describe names no output") for name, _ in runtimes}
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        v, took, detail = run(cpu_runner, b.args(), outs, os.path.join(b.dir, "out", "cpu"), a.timeout, env)
        if v:
            return b, {name: ("fail", took, f"the CPU pipeline: {v}: {detail}") for name, _ in runtimes}
        verdicts = {}
        for name, folder in runtimes:
            env = dict(os.environ, LD_LIBRARY_PATH=folder + os.pathsep + os.environ.get("LD_LIBRARY_PATH", ""))
            env.pop("LD_PRELOAD", None)
            if name in a.layer:
                env.update(HL_VK_LAYERS="VK_LAYER_KHRONOS_validation",
                           VK_LAYER_ENABLES="VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT")
            got = os.path.join(b.dir, "out", name)
            v, took, detail = run(os.path.join(b.gpu, "run"), b.args(), outs, got, a.timeout, env)
            wrote = all(os.path.isfile(os.path.join(got, n + ".npy")) for n, _ in outs)
            if v is None or (v == "crash" and wrote):
                diff = compare(os.path.join(b.dir, "out", "cpu"), got, outs, b.settings.get("tolerance"),
                               a.float_ulps)
                if v is None:
                    v, detail = ("differ", diff) if diff else ("pass", "")
                else:
                    # A crash at exit still leaves outputs worth judging.
                    detail += f"; after writing its outputs, {'which differ: ' + diff if diff else 'equal to the CPU'}"
            verdicts[name] = (v, took, detail or "")
        # Which runtimes wrote the same bytes: two runtimes that differ on
        # one device and codegen cannot both be right.
        same = {}
        for name, _ in runtimes:
            if verdicts[name][0] in ("pass", "differ"):
                key = tuple(open(os.path.join(b.dir, "out", name, n + ".npy"), "rb").read() for n, _ in outs)
                same.setdefault(key, []).append(name)
        for group in same.values():
            for name in group:
                v, took, detail = verdicts[name]
                others = [o for o in group if o != name]
                if others and v == "differ":
                    detail += f" (the same bytes as {', '.join(others)})"
                verdicts[name] = (v, took, detail, others)
        return b, verdicts

    results = {}
    same = {}
    bad = []
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for b, verdicts in pool.map(one, builds):
            for name, _ in runtimes:
                v, took, detail = results[(b.app, name)] = verdicts[name][:3]
                same[(b.app, name)] = verdicts[name][3] if len(verdicts[name]) > 3 else []
                want, _ = expected.get((b.app, name), ({"pass"}, ""))
                extra = f": {detail}" if detail else ""
                print(f"{'ok  ' if v in want else 'BAD '}{name:14} {b.app:26} {v:8} {took:6.1f} s{extra}", flush=True)
                if v not in want:
                    hint = f" (listed in {a.expectations}: update it)" if v == "pass" else ""
                    bad.append(f"{b.app} on {name}: {v}, expected {'/'.join(sorted(want))}{extra}{hint}")
    for (app, name) in expected:
        if app not in available:
            bad.append(f"{a.expectations}: {app}: no app with a GPU schedule of that name")
    for name, _ in runtimes:
        counts = dict.fromkeys(VERDICTS, 0)
        for x in apps:
            counts[results[(x, name)][0]] += 1
        print(f"{name}: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n), flush=True)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump([{"app": x, "runtime": rt, "verdict": v, "seconds": round(s, 2), "detail": d,
                    "same_bytes_as": same[(x, rt)]}
                   for (x, rt), (v, s, d) in sorted(results.items())], f, indent=1)
    if a.table:
        write_table(a.table, "halide-apps", table(apps, [{"name": n} for n, _ in runtimes], results,
                                                  expected, {}, {}, what="Halide app"))
    if a.time:
        time_all(a, builds, runtimes, results)
    for b in bad:
        print(f"unexpected: {b}")
    print(f"Halide's apps: {len(results) - len(bad)} as expected, {len(bad)} unexpected "
          f"({len(apps)} apps x {len(runtimes)} runtimes, {time.monotonic() - started:.0f} s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
