#!/usr/bin/env python3
# The counts the docs state for the current state of the tests (how many cases
# run on Halide, each runtime's passes and expected failures, ...) come from
# the closing line of scripts/test.sh. This rewrites each of them to agree with
# one such line, so that a run's numbers reach every page at once:
#
#   python3 scripts/doc-counts.py --from LOG      # the last closing line of a log
#   python3 scripts/doc-counts.py --line "scripts/test.sh: cargo test: ..."
#   python3 scripts/doc-counts.py                 # the line TESTING.md quotes
#   python3 scripts/doc-counts.py --check [...]   # writes nothing; exit 1 on a wrong count
#
# With --line or --from, the line quoted in TESTING.md becomes that line too.
# runner/tests/docs.rs runs --check, so `cargo test` fails on a wrong count.
# Dated history ("from a clean clone of ...")
# is not a claim: it records a past run.
import argparse
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PREFIX = "scripts/test.sh:"
WORDS = "zero one two three four five six seven eight nine ten eleven twelve".split()


def parse(line):
    """{part: {label: count}} of a closing line."""
    if not line.startswith(PREFIX + " "):
        raise ValueError(f"not a closing line: {line!r}")
    parts = {}
    for part in line[len(PREFIX) + 1:].split("; "):
        name, _, counts = part.partition(": ")
        parts[name] = {}
        for count in counts.split(", "):
            m = re.fullmatch(r"(\d+) (.+)", count)
            if not m:
                raise ValueError(f"not a count: {count!r} in {part!r}")
            parts[name][m.group(2)] = int(m.group(1))
    return parts


def count(c, part, label):
    # A suite run with none says nothing of expected failures.
    if part in c and label == "expected failures" and label not in c[part]:
        return 0
    try:
        return c[part][label]
    except KeyError:
        # A run with extra arguments leaves the perf and Halide parts out.
        sys.exit(f"doc-counts: the closing line has no `{label}` in `{part}`")


def ran(c, r):
    return count(c, r, "passed") + count(c, r, "failed") + count(c, r, "expected failures")


def pipeline_checks(c):
    # Every check passes on vkcopy's library and each passes or is an expected
    # failure on 21.0.0; the one more pass is the application-device check.
    both = count(c, "pipelines", "passed") + count(c, "pipelines", "expected failures") - 1
    if both % 2:
        sys.exit(f"doc-counts: {both} pipeline results are not each check on two runtimes")
    return both // 2


def halide_runtimes(c, m):
    total = count(c, "Halide's tests", "as expected") + count(c, "Halide's tests", "unexpected")
    tests = int(m.group("t"))
    if total % tests:
        sys.exit(f"doc-counts: {total} results of Halide's tests are not {tests} tests on each runtime")
    return total // tests


def row(r):
    # A row of the table in "Results on lavapipe" (pass, expected failures),
    # not of the other tables with a runtime column: its first cell is the
    # runtime's name or ends in it, in backticks.
    r = re.escape(r)
    return (r"\| runtime \| pass \| expected failures \|[^\n]*(?:\n\|[^\n]*)*?"
            r"\n\| (?:" + r + r"|[^|\n]*\(`(?:halide:)?" + r + r"`\)) \| ")


HALIDE_README = "cases/halide/README.md"
# (file, pattern, expected), in the order of the pages: the count is the group
# `n`; a space in a pattern matches any white space, so a claim survives the
# text's re-wrapping.
CLAIMS = [
    ("TESTING.md", r"Of `cargo test`'s tests, (?P<n>\d+) are YAML cases",
     lambda c, m: ran(c, "21.0.0") + count(c, "21.0.0", "skipped")),
    ("TESTING.md", r"of Halide's ABI \((?P<n>\d+) of them run there",
     lambda c, m: ran(c, "21.0.0")),
    ("TESTING.md", r"Halide 19\.0\.0's (?P<t>\d+) copy tests on (?P<n>\w+) runtimes", halide_runtimes),
    (HALIDE_README, r"(?P<n>\d+) of \d+ cases run on Halide", lambda c, m: ran(c, "21.0.0")),
    (HALIDE_README, r"\d+ of (?P<n>\d+) cases run on Halide",
     lambda c, m: ran(c, "21.0.0") + count(c, "21.0.0", "skipped")),
]
for r in ["21.0.0", "19.0.0", "19.0.0-fixed", "19.0.0-repaired", "vkcopy-abi"]:
    CLAIMS += [
        (HALIDE_README, row(r) + r"(?P<n>\d+) \|", lambda c, m, r=r: count(c, r, "passed")),
        (HALIDE_README, row(r) + r"\d+ \| (?P<n>\d+) \|", lambda c, m, r=r: count(c, r, "expected failures")),
    ]
CLAIMS += [
    (HALIDE_README, r"of (?P<n>\d+) checks, covering", lambda c, m: pipeline_checks(c)),
    (HALIDE_README, r"vkcopy's library passes all (?P<n>\d+) under", lambda c, m: pipeline_checks(c)),
    (HALIDE_README, r"Halide 21\.0\.0 passes (?P<n>\d+):",
     lambda c, m: pipeline_checks(c) - count(c, "pipelines", "expected failures")),
]


def value(text):
    # None for a word that is no count: reported, and rewritten as digits.
    return WORDS.index(text) if text in WORDS else int(text) if text.isdigit() else None


def main():
    ap = argparse.ArgumentParser(description="Make the docs' counts agree with scripts/test.sh's closing line.")
    ap.add_argument("--line", help="a closing line, `scripts/test.sh: cargo test: ...`")
    ap.add_argument("--from", dest="log", help="a log of scripts/test.sh; its last closing line")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 on a count that disagrees")
    args = ap.parse_args()

    texts = {}

    def text(name):
        if name not in texts:
            with open(os.path.join(ROOT, name), encoding="utf-8") as f:
                texts[name] = f.read()
        return texts[name]

    quoted = [m for m in re.finditer(r"(?m)^" + re.escape(PREFIX) + r" .*$", text("TESTING.md"))]
    if len(quoted) != 1:
        sys.exit(f"doc-counts: TESTING.md quotes {len(quoted)} closing lines, not one")
    line = args.line
    if args.log:
        with open(args.log, encoding="utf-8", errors="replace") as f:
            found = [l.strip() for l in f if l.startswith(PREFIX + " ")]
        if not found:
            sys.exit(f"doc-counts: no line starting with `{PREFIX}` in {args.log}")
        line = found[-1]
    line = (line or quoted[0].group()).strip()
    try:
        c = parse(line)
    except ValueError as e:
        sys.exit(f"doc-counts: {e}")

    wrong, changed = [], set()

    def at(name, offset):
        return f"{name}:{text(name).count(chr(10), 0, offset) + 1}"

    def put(name, start, end, new):
        texts[name] = text(name)[:start] + new + text(name)[end:]
        changed.add(name)

    if line != quoted[0].group():
        wrong.append(f"{at('TESTING.md', quoted[0].start())}: the quoted closing line is another")
        put("TESTING.md", quoted[0].start(), quoted[0].end(), line)
    for name, pattern, expected in CLAIMS:
        matches = list(re.finditer(pattern.replace(" ", r"\s+"), text(name)))
        if len(matches) != 1:
            sys.exit(f"doc-counts: {name}: `{pattern}` matches {len(matches)} times, not once")
        m = matches[0]
        found, want = m.group("n"), expected(c, m)
        if value(found) != want:
            # Written as the docs write it: a word stays a word.
            new = WORDS[want] if found in WORDS and want < len(WORDS) else str(want)
            wrong.append(f"{at(name, m.start('n'))}: {found}, expected {new}")
            put(name, m.start("n"), m.end("n"), new)

    for w in wrong:
        print(w)
    if args.check:
        sys.exit(1 if wrong else 0)
    for name in sorted(changed):
        with open(os.path.join(ROOT, name), "w", encoding="utf-8") as f:
            f.write(texts[name])
        print(f"doc-counts: rewrote {name}")

if __name__ == "__main__":
    main()
