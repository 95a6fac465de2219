#!/usr/bin/env bash
# Halide's order-dependent abort (issue 33: SIGABRT at `valid_instance` in
# vk_create_instance, in halide::device_crop::parent_out_of_scope after earlier
# cases, on an H200) bisected in one process, where the suite's fresh worker per
# Halide case would hide it: the Halide cases in one process, with and without
# the validation layer and on Halide's debug runtime, and pairs of one earlier
# case then parent_out_of_scope: the H200's device-lost case
# (host_memory::unaligned_buffer_copy) and the case of Halide's region-size
# fault, whose copies end past their VkBuffer (halide::device_copy_at_inner_loop;
# the suite drops those copies unless the validation layer is on). One line per run in OUT/bisect.txt; with
# scripts/backtrace-preload.c built as PRELOAD, a crash leaves its stack in
# OUT/bt. Usage:
#   SUITE=target/release/vkcopy-suite RUNTIME=.../libhalide_runtime_vulkan.so \
#   DEBUG_RUNTIME=... [PRELOAD=backtrace-preload.so] scripts/halide-order-bisect.sh OUT
# (a debug runtime: the runtime of scripts/halide-runtime.sh compiled for the
# target x86-64-linux-vulkan-vk_v13-debug).
set -u
cd "$(dirname "$0")/.."
out="${1:?usage: halide-order-bisect.sh OUT}"
suite="${SUITE:?}" rt="${RUNTIME:?}" debug="${DEBUG_RUNTIME:-$RUNTIME}"
mkdir -p "$out/bt" "$out/logs"
# A folder of two cases that run in this order: a::FIRST, then b::parent_out_of_scope.
pair() {
  local dir
  dir=$(mktemp -d)
  mkdir -p "$dir/a" "$dir/b"
  cp "$1" "$dir/a/"
  cp cases/halide/device_crop/parent_out_of_scope.yaml "$dir/b/"
  cp -r cases/devices "$dir/"
  echo "$dir"
}
lost=$(pair cases/host_memory/unaligned_buffer_copy.yaml)
region=$(pair cases/halide/device_copy_at_inner_loop.yaml)
run() {
  local name=$1 limit=$2 t
  shift 2
  t=$(date +%s)
  env ${PRELOAD:+LD_PRELOAD="$PRELOAD"} BACKTRACE_DIR="$out/bt" timeout "$limit" \
    "$suite" run --in-process --report-dir "$out/reports/$name" "$@" >"$out/logs/$name.log" 2>&1
  echo "$name: exit $? in $(($(date +%s) - t)) s: $(grep -E '^[0-9]+ passed' "$out/logs/$name.log" | tail -n 1)" >>"$out/bisect.txt"
}
run in-process 150 --runtime "halide:$rt" --filter 'halide::*'
run in-process-layer 150 --runtime "halide:$rt" --filter 'halide::*' --validation
run lost-pair 60 --runtime "halide:$rt" --cases "$lost"
run lost-pair-layer 60 --runtime "halide:$rt" --cases "$lost" --validation
run lost-pair-debug 60 --runtime "halide:$debug" --cases "$lost"
run region-pair 60 --runtime "halide:$rt" --cases "$region"
run region-pair-layer 60 --runtime "halide:$rt" --cases "$region" --validation
run in-process-debug-layer 200 --runtime "halide:$debug" --filter 'halide::*' --validation
run every-case-in-process 200 --runtime "halide:$rt"
rm -rf "$lost" "$region"
ls "$out/bt" >>"$out/bisect.txt"
cat "$out/bisect.txt"
