#!/usr/bin/env bash
# The release workspace tests, RUNS times (default 20), each beside a parallel
# release build of the workspace (into target/soak-load, our crates rebuilt
# each round) and one CPU-bound loop per core: the load under which a release
# test once failed (issue 51). Ends on one line: runs, failures and the tests
# that failed, with how often. Exit status 1 if any failed. Logs go to
# target/soak-release/<start>/.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-20}"
export CI=true
out="target/soak-release/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
scripts/ensure-vulkan.sh
# The release tests use Halide's runtimes and wheels as scripts/test.sh's do.
scripts/halide-runtimes.sh >/dev/null
echo "building the release tests once ..." >&2
cargo test --release -q --workspace --no-run 2>&1 | grep -v '^ *Executable' >&2 || true

load() {
  while :; do
    rm -rf target/soak-load/release/.fingerprint/vkcopy*
    cargo build --release -q --workspace --target-dir target/soak-load >/dev/null 2>&1 || true
  done
}

failed=0
for i in $(seq 1 "$runs"); do
  load &
  builder=$!
  spinners=()
  for _ in $(seq 1 "$(nproc)"); do
    ( while :; do :; done ) &
    spinners+=($!)
  done
  start=$(date +%s)
  set +e
  cargo test --release -q --workspace >"$out/run-$i.log" 2>&1
  rc=$?
  set -e
  kill "${spinners[@]}" 2>/dev/null || true
  pkill -P "$builder" 2>/dev/null || true
  kill "$builder" 2>/dev/null || true
  wait 2>/dev/null || true
  # With -q a failure is named only in the list after its binary's last
  # "failures:" line; the binary is in cargo's "to rerun pass" line.
  names=$(awk '/^failures:$/ {n++; list = ""; next} /^test result:/ {if (list != "") print list; list = ""} n && /^    [^ ]+$/ {sub(/^ +/, ""); list = list (list == "" ? "" : "\n") $0}' "$out/run-$i.log" | sort -u || true)
  where=$(grep -o 'to rerun pass `[^`]*`' "$out/run-$i.log" | sed 's/to rerun pass //; s/`//g' | head -1 || true)
  [ -z "$names" ] || [ -z "$where" ] || names=$(printf '%s\n' "$names" | sed "s|\$| ($where)|")
  if [ "$rc" -ne 0 ]; then
    failed=$((failed + 1))
    [ -n "$names" ] || names="(exit $rc, no test named; see $out/run-$i.log)"
    printf '%s\n' "$names" >>"$out/failed.txt"
  fi
  echo "run $i: exit $rc in $(($(date +%s) - start)) s${names:+: $(echo "$names" | tr '\n' ' ')}" >&2
done
summary=$(sort "$out/failed.txt" 2>/dev/null | uniq -c | sort -rn | awk '{n=$1; $1=""; printf "%s%s (%d)", sep, substr($0,2), n; sep=", "}' || true)
echo "release soak: $runs runs under load, $failed failed${summary:+: $summary} (logs in $out)"
[ "$failed" -eq 0 ]
