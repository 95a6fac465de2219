"""Halide's own GPU correctness tests, built against a Halide wheel and run JIT
on the default Vulkan device, once per runtime. scripts/halide-tests.sh sets up
what this needs (the sources, the wheel, the runtime modules) and calls it.

Each test of the sources' test/correctness that asks for a GPU
(`has_gpu_feature`) is compiled once with the wheel's headers and libHalide,
then run with HL_JIT_TARGET on each runtime: Halide's own (the wheel's module),
a patched one (its module preloaded), or vkcopy's library of Halide's ABI (a
bridge module preloaded that hands every Vulkan entry point to it). A verdict
is pass, skip (the test printed [SKIP]), fail (it exited non-zero, or aborted,
as Halide's errors do), crash (another signal) or timeout.

The verdicts are held to an expectations file: every test passes on every
runtime unless the file lists it, with its verdicts and a reason. A listed
verdict that does not come, or an unlisted failure, fails the run. With
--table the verdicts also go to a Markdown table between two markers.
"""

import argparse
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import time

try:
    import yaml
except ImportError:  # a lab machine without PyYAML can still record verdicts
    yaml = None

# Copy tests the seed's discussion ran, besides those the cases mirror.
SEED_TESTS = [
    "async_copy_chain", "async_device_copy", "device_buffer_copies_with_profile",
    "device_buffer_copy", "device_copy_at_inner_loop", "device_crop", "device_slice",
    "extern_stage_on_device", "gpu_give_input_buffers_device_allocations",
    "gpu_jit_explicit_copy_to_device", "gpu_mixed_dimensionality",
    "gpu_non_contiguous_copy", "host_inside_gpu_loop", "leak_device_memory",
]
VERDICTS = ("pass", "skip", "fail", "crash", "timeout")


def gpu_tests(src):
    """Every test of test/correctness that asks for a GPU."""
    folder = os.path.join(src, "test", "correctness")
    return sorted(
        f[:-4] for f in os.listdir(folder)
        if f.endswith(".cpp") and "has_gpu_feature" in open(os.path.join(folder, f), errors="replace").read()
    )


def mirrored_tests(cases):
    """The tests the suite's cases name in `mirrors:`."""
    names = set()
    for root, _, files in os.walk(cases):
        for f in files:
            if f.endswith(".yaml"):
                for line in open(os.path.join(root, f), errors="replace"):
                    m = re.match(r"mirrors:\s*test/correctness/(\w+)\.cpp", line)
                    if m:
                        names.add(m.group(1))
    return names


def build(test, src, wheel, out):
    """Compiles one test against the wheel; returns (test, path or None, log)."""
    exe = os.path.join(out, test)
    cpp = os.path.join(src, "test", "correctness", test + ".cpp")
    lib = os.path.join(wheel, "lib64")
    cmd = ["c++", "-std=c++17", "-O1", "-w",
           "-I", os.path.join(wheel, "include"),
           "-I", os.path.join(src, "test", "common"), "-I", os.path.join(src, "tools"),
           cpp, os.path.join(src, "test", "common", "terminate_handler.cpp"),
           "-rdynamic", "-L", lib, "-lHalide", "-Wl,-rpath," + lib, "-lpthread", "-ldl",
           "-o", exe + ".tmp"]
    # Built again when the source or the command line changed.
    stamp = exe + ".cmd"
    line = " ".join(cmd)
    if (os.path.exists(exe) and os.path.getmtime(exe) >= os.path.getmtime(cpp)
            and os.path.exists(stamp) and open(stamp).read() == line):
        return test, exe, ""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return test, None, r.stderr[-2000:]
    os.replace(exe + ".tmp", exe)
    with open(stamp, "w") as f:
        f.write(line)
    return test, exe, ""


def run(exe, runtime, target, timeout, validation=False):
    """Runs one test on one runtime; returns (verdict, seconds, detail).
    Under the validation layer the detail counts what it said."""
    verdict, took, detail, said = run_once(exe, runtime, target, timeout, validation)
    if validation:
        detail = f"{said} validation messages" + (f"; {detail}" if detail else "")
    return verdict, took, detail


def run_once(exe, runtime, target, timeout, validation):
    env = dict(os.environ, HL_JIT_TARGET=target, HL_TARGET=target)
    if validation:
        # The layer's own report (no messenger in Halide's runtime): stdout.
        env.update(VK_INSTANCE_LAYERS="VK_LAYER_KHRONOS_validation",
                   VK_LAYER_ENABLES="VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT")
    env.pop("LD_PRELOAD", None)
    if runtime["preload"]:
        env["LD_PRELOAD"] = runtime["preload"]
    env.update(runtime.get("env", {}))
    start = time.monotonic()
    try:
        # Unbuffered, so that a crash's last line is the last one it printed.
        p = subprocess.run(["stdbuf", "-o0", "-e0", exe], env=env, capture_output=True, timeout=timeout,
                           cwd=os.path.dirname(exe), start_new_session=True)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - start, f"killed after {timeout} s", 0
    took = time.monotonic() - start
    text = (p.stdout + p.stderr).decode(errors="replace")
    said = len(re.findall(r"Validation (?:Error|Warning)", text))
    lines = [l for l in text.splitlines() if l.strip() and "Validation" not in l]
    if p.returncode == 0 and "[SKIP]" in text:
        return "skip", took, next((l for l in lines if "[SKIP]" in l), ""), said
    if p.returncode == 0 and "Success!" in text:
        return "pass", took, "", said
    if p.returncode < 0 and -p.returncode != signal.SIGABRT:
        try:
            name = signal.Signals(-p.returncode).name
        except ValueError:
            name = f"signal {-p.returncode}"
        return "crash", took, f"{name}: " + (lines[-1] if lines else ""), said
    errors = [l for l in lines if re.search(r"error|Error|failed|corruption|Mismatch|mismatch", l)]
    detail = (errors[0] if errors else lines[-1] if lines else f"exit {p.returncode}")
    return "fail", took, detail[:300], said


def expectations(path, key="test", verdicts=VERDICTS):
    """{(test, runtime): (verdicts, reason)} and the mirrors' known gaps
    {(test, runtime): reason} from the expectations file (whose entries name
    their test under `key`)."""
    if yaml is None:
        print(f"no PyYAML here: {path} not read, every verdict recorded as it comes", flush=True)
        return {}, {}
    data = yaml.safe_load(open(path)) or {}
    gaps = {}
    for g in data.get("mirror_gaps") or []:
        for rt in g["runtimes"]:
            gaps[(g["test"], rt)] = g["reason"]
    out = {}
    for e in data.get("expected") or []:
        for rt in e["runtimes"]:
            for v in e["verdicts"]:
                if v not in verdicts:
                    sys.exit(f"{path}: {e[key]}: verdict {v!r}: not one of {', '.join(verdicts)}")
            out[(e[key], rt)] = (set(e["verdicts"]), e["reason"])
    return out, gaps


BEYOND = "Beyond the original:"


def mirrors_of(results_json):
    """{test: [(case, status, beyond)]} from one suite run's results.json:
    status pass, fail (a failure, expected or not, a crash or a timeout) or
    skip; beyond is whether the case's `about:` says what it tests that its
    original does not."""
    if yaml is None:
        sys.exit(f"--suite {results_json}: judging mirrors needs PyYAML (pip install pyyaml)")
    out = {}
    for c in json.load(open(results_json))["cases"]:
        try:
            case = yaml.safe_load(open(c["path"])) or {}
        except (OSError, yaml.YAMLError) as e:
            sys.exit(f"--suite {results_json}: case {c['name']}: {c['path']}: {e}")
        m = re.match(r"test/correctness/(\w+)\.cpp", str(case.get("mirrors") or ""))
        if not m:
            continue
        status = {"pass": "pass", "xpass": "pass", "skip": "skip"}.get(c["status"], "fail")
        out.setdefault(m.group(1), []).append((c["name"], status, BEYOND in str(case.get("about", ""))))
    return out


def judge(test, verdict, mirrors, gap):
    """The mirrors' agreement with their original's verdict on one runtime:
    (a summary for the table, disagreements)."""
    failed = verdict in ("fail", "crash", "timeout")
    counts = {}
    wrong = []
    for case, status, beyond in mirrors:
        kind = status
        if status == "fail" and not failed:
            kind = "beyond" if beyond else "DISAGREE"
        elif status == "pass" and failed:
            kind = "gap" if gap else "DISAGREE"
        elif status == "skip" and verdict != "skip":
            kind = "skip"
        counts[kind] = counts.get(kind, 0) + 1
        if kind == "DISAGREE":
            wrong.append(f"mirror {case}: {status}, where {test}: {verdict} "
                         + ("(say why in its about:, after '" + BEYOND + "')" if status == "fail"
                            else "(list the gap under mirror_gaps:)"))
    order = ["pass", "fail", "beyond", "gap", "skip", "DISAGREE"]
    return ", ".join(f"{counts[k]} {k}" for k in order if k in counts), wrong


def table(tests, runtimes, results, expected, gaps, judged, what="Halide test"):
    """The Markdown table of test x runtime verdicts, each with its mirrors'."""
    head = f"| {what} | " + " | ".join(r["name"] for r in runtimes) + " |"
    rows = [head, "|---|" + "---|" * len(runtimes)]
    notes = []

    def note(reason):
        if reason not in notes:
            notes.append(reason)
        return f" [{notes.index(reason) + 1}]"

    for t in tests:
        cells = []
        for r in runtimes:
            key = (t, r["name"])
            v = results.get(key, ("not run", 0, ""))[0]
            if key in expected:
                v += note(expected[key][1])
            if key in judged:
                v += f"; mirrors: {judged[key] or 'none run'}"
                if key in gaps:
                    v += note(gaps[key])
            cells.append(v)
        rows.append(f"| {t} | " + " | ".join(cells) + " |")
    rows.append("")
    rows += [f"{i + 1}. {n}" for i, n in enumerate(notes)]
    return "\n".join(rows) + "\n"


def write_table(path, marker, new):
    """Puts a table between the markers `<!-- MARKER: begin/end -->` of a file."""
    text = open(path).read()
    begin, end = f"<!-- {marker}: begin -->", f"<!-- {marker}: end -->"
    if begin not in text or end not in text:
        sys.exit(f"{path}: no {begin} ... {end} markers")
    text = text[:text.index(begin) + len(begin)] + "\n" + new + text[text.index(end):]
    open(path, "w").write(text)


def run_all(a, tests, runtimes, expected):
    """Builds the tests (or takes them built) and runs each on each runtime:
    {(test, runtime): (verdict, seconds, detail)}."""
    started = time.monotonic()
    print(f"building {len(tests)} of Halide's GPU tests against the wheel ({a.jobs} at a time) ...", flush=True)
    exes = {}

    def get(t):
        if a.prebuilt:
            exe = os.path.join(a.out, t)
            return t, (exe if os.path.isfile(exe) else None), "not built"
        return build(t, a.src, a.wheel, a.out)

    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for test, exe, log in pool.map(get, tests):
            if exe is None:
                sys.exit(f"{test}: does not compile against the wheel:\n{log}")
            exes[test] = exe
    print(f"built in {time.monotonic() - started:.0f} s", flush=True)

    # Tests run two at a time (or --jobs): each waits on the device as much
    # as it computes. Lines come as tests end; the counts close each runtime.
    runs = {}
    pairs = [(t, r) for r in runtimes for t in tests]
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        futures = {pool.submit(run, exes[t], r, a.target, a.timeout, a.validation): (t, r)
                   for t, r in pairs}
        for fut in concurrent.futures.as_completed(futures):
            t, r = futures[fut]
            verdict, took, detail = runs[(t, r["name"])] = fut.result()
            want, _ = expected.get((t, r["name"]), ({"pass"}, ""))
            extra = f": {detail}" if detail else ""
            print(f"{'ok  ' if verdict in want else 'BAD '}{r['name']:14} {t:45} {verdict:8} {took:6.1f} s{extra}",
                  flush=True)
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", required=True, help="Halide's unpacked sources")
    ap.add_argument("--wheel", help="the wheel's halide package folder (not with --prebuilt)")
    ap.add_argument("--out", required=True, help="folder for the test binaries and results")
    ap.add_argument("--cases", required=True, help="the suite's cases (for `mirrors:`)")
    ap.add_argument("--runtime", action="append", default=[], metavar="NAME=PRELOAD",
                    help="a runtime: its name and the module library to preload (empty: the wheel's own)")
    ap.add_argument("--expectations", required=True)
    ap.add_argument("--suite", action="append", default=[], metavar="NAME=RESULTS",
                    help="the suite's results.json of a run on runtime NAME: its mirrors are judged")
    ap.add_argument("--all", action="store_true", help="every GPU test, not only the copy tests")
    ap.add_argument("--table", help="Markdown file whose table between the markers is rewritten")
    ap.add_argument("--target", default="host-vulkan-vk_v13-vk_int8-vk_int16-vk_int64")
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("--validation", action="store_true",
                    help="under the Khronos validation layer, with synchronization validation; its messages are counted")
    ap.add_argument("--jobs", type=int, default=2, help="tests built and run at once")
    ap.add_argument("--rejudge", action="store_true",
                    help="judge the last run's results.json in --out again (after an edit of the expectations) instead of running")
    ap.add_argument("--prebuilt", action="store_true",
                    help="run the tests already built in --out (on a machine without the wheel's headers)")
    ap.add_argument("tests", nargs="*", help="test names (default: the copy tests, or --all)")
    a = ap.parse_args()

    available = gpu_tests(a.src)
    mirrors = mirrored_tests(a.cases)
    if a.tests:
        unknown = [t for t in a.tests if t not in available]
        if unknown:
            sys.exit(f"no GPU test named {', '.join(unknown)} in {a.src}/test/correctness")
        tests = a.tests
    elif a.all:
        tests = available
    else:
        tests = sorted((set(SEED_TESTS) | mirrors) & set(available))
    runtimes = []
    for spec in a.runtime:
        name, _, preload = spec.partition("=")
        runtimes.append({"name": name, "preload": preload})
    expected, gaps = expectations(a.expectations)
    suites = {}
    for spec in a.suite:
        name, _, path = spec.partition("=")
        suites[name] = mirrors_of(path)
    a.out = os.path.abspath(a.out)
    os.makedirs(a.out, exist_ok=True)

    started = time.monotonic()
    if a.rejudge:
        last = json.load(open(os.path.join(a.out, "results.json")))
        runs = {(r["test"], r["runtime"]): (r["verdict"], r["seconds"], r["detail"]) for r in last}
    else:
        runs = run_all(a, tests, runtimes, expected)
    results = {}
    bad = []
    for r in runtimes:
        for t in tests:
            if (t, r["name"]) not in runs:
                sys.exit(f"{t} on {r['name']}: not in the last run's results.json")
            verdict, took, detail = results[(t, r["name"])] = runs[(t, r["name"])]
            want, _ = expected.get((t, r["name"]), ({"pass"}, ""))
            if verdict not in want:
                extra = f": {detail}" if detail else ""
                hint = f" (listed in {a.expectations}: update it)" if verdict == "pass" else ""
                bad.append(f"{t} on {r['name']}: {verdict}, expected {'/'.join(sorted(want))}{extra}{hint}")
    judged = {}
    disagree = []
    unknown = set(suites) - {r["name"] for r in runtimes}
    if unknown:
        sys.exit(f"--suite {', '.join(sorted(unknown))}: no --runtime of that name")
    for r in runtimes:
        if r["name"] not in suites:
            continue
        for t in tests:
            if t in mirrors:
                found = suites[r["name"]].get(t, [])
                if not found:
                    disagree.append(f"no mirror of {t} in the suite's results for {r['name']}")
                verdict = results[(t, r["name"])][0]
                judged[(t, r["name"])], wrong = judge(t, verdict, found, gaps.get((t, r["name"])))
                disagree += [f"{w} on {r['name']}" for w in wrong]
    for r in runtimes:
        counts = dict.fromkeys(VERDICTS, 0)
        for t in tests:
            counts[results[(t, r["name"])][0]] += 1
        print(f"{r['name']}: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n), flush=True)
    # A rejudged run keeps its results.json as the run wrote it.
    if not a.rejudge:
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump([{"test": t, "runtime": rt, "verdict": v, "seconds": round(secs, 2), "detail": d}
                       for (t, rt), (v, secs, d) in sorted(results.items())], f, indent=1)
    if a.table:
        write_table(a.table, "halide-tests", table(tests, runtimes, results, expected, gaps, judged))
    for b in bad + disagree:
        print(f"unexpected: {b}")
    total = len(tests) * len(runtimes)
    if disagree:
        print(f"mirrors: {len(disagree)} disagree with their originals")
    print(f"Halide's tests: {total - len(bad)} as expected, {len(bad)} unexpected "
          f"({len(tests)} tests x {len(runtimes)} runtimes, {time.monotonic() - started:.0f} s)")
    return 1 if bad or disagree else 0


if __name__ == "__main__":
    sys.exit(main())
