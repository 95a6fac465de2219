#!/usr/bin/env bash
# Soak: for MINUTES (default 30), random mixes of the suite's cases (a random
# shard of a random split, --jobs 2, under the validation layer with
# synchronization validation), beside the runtime's stress test (eight threads
# on one context, async copies among them) and its layer-race test (contexts
# made and dropped beside copies on other contexts), over and over. Ends on one
# line: runs, failures, crashes (a worker's crash, timeout or lost device, or a
# test binary killed by a signal), leaks and validation messages. Exit status 1
# if any. Reports go to target/soak/<start>/.
#
# On a machine without Rust, VKCOPY_SOAK_BIN names a folder holding the three
# programs built elsewhere: vkcopy-suite and the test binaries stress and
# layer_race (cargo test --release -p vkcopy --test stress --no-run prints
# where each is).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-30}"
export VKCOPY_VALIDATION=1 VKCOPY_SPEED=report
if [ -n "${VKCOPY_SOAK_BIN:-}" ]; then
  suite="$VKCOPY_SOAK_BIN/vkcopy-suite"
  stress_test=("$VKCOPY_SOAK_BIN/stress" -q)
  race_test=("$VKCOPY_SOAK_BIN/layer_race" -q)
else
  scripts/ensure-vulkan.sh
  echo "building the suite and the runtime's tests (seconds when built) ..." >&2
  cargo test -q --workspace --no-run 2>&1 | grep -v '^ *Executable' >&2 || true
  suite="${CARGO_TARGET_DIR:-target}/debug/vkcopy-suite"
  stress_test=(cargo test -q -p vkcopy --test stress)
  race_test=(cargo test -q -p vkcopy --test layer_race)
fi
out="target/soak/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
deadline=$(( $(date +%s) + minutes * 60 ))
runs=0 failed=0 crashes=0 leaks=0 messages=0

# Counts what one run of the suite left in its report folder.
count_report() {
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
bad = [c for c in r["cases"] if c["verdict"] in ("fail", "unexpected_pass")]
crash = [c for c in bad if c["status"] in ("crash", "timeout", "device_lost")]
leak = [c for c in bad if "leak" in c.get("message", "")]
msgs = [c for c in bad if "validation" in c.get("message", "").lower()]
for c in bad:
    print(f"  {c['name']}: {c['status']}: {c.get('message', '').splitlines()[:1]}", file=sys.stderr)
print(len(bad), len(crash), len(leak), len(msgs))
PY
}

while [ "$(date +%s)" -lt "$deadline" ]; do
  n=$(( RANDOM % 4 + 2 ))
  k=$(( RANDOM % n + 1 ))
  dir="$out/run-$runs"
  # The runtime's threads beside the cases.
  secs=$(( RANDOM % 20 + 10 ))
  ( VKCOPY_STRESS_SECS=$secs "${stress_test[@]}" >"$dir.stress.log" 2>&1 ) &
  stress=$!
  ( LAYER_RACE_SECS=$secs "${race_test[@]}" >"$dir.race.log" 2>&1 ) &
  race=$!
  set +e
  "$suite" run --shard "$k/$n" --jobs 2 --report-dir "$dir" >"$dir.log" 2>&1
  set -e
  runs=$((runs + 1))
  json=$(find "$dir" -name results.json | head -1)
  if [ -n "$json" ]; then
    read -r f c l m < <(count_report "$json")
  else
    echo "run $runs (shard $k/$n): no report; see $dir.log" >&2
    f=1 c=1 l=0 m=0
  fi
  for pid in $stress $race; do
    if ! wait "$pid"; then
      f=$((f + 1))
      grep -qE 'signal|SIGSEGV|SIGABRT' "$dir".*.log && c=$((c + 1))
      grep -ql leak "$dir".*.log && l=$((l + 1))
    fi
    runs=$((runs + 1))
  done
  failed=$((failed + f)) crashes=$((crashes + c)) leaks=$((leaks + l)) messages=$((messages + m))
  echo "run $runs: shard $k/$n and ${secs}s of threads: $f failed" >&2
done
echo "soak of $minutes min: $runs runs, $failed failures, $crashes crashes, $leaks leaks, $messages with validation messages (logs in $out)"
[ "$failed" -eq 0 ]
