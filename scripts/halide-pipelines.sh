#!/usr/bin/env bash
# Compiles the Halide pipelines of halide-abi/pipelines/ ahead of time with
# Halide 21.0.0's wheel (for host-vulkan-vk_v13 and for the CPU), links their
# checker once with Halide's own Vulkan runtime and once with vkcopy's library
# of that ABI, and runs every check on both: each compares the device's output
# with the CPU's. vkcopy's library runs under the validation layer and must
# pass every check; a check that fails on Halide's runtime must be listed, with
# the runtime function at fault, in halide-abi/pipelines/expected-halide-21.0.0.txt
# (and one listed there that passes is an error too). Last, an application
# that shares its own Vulkan device through halide_vulkan_acquire_context runs
# a pipeline on vkcopy's library.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v g++ >/dev/null 2>&1 || {
  sudo=(); [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  echo "installing g++ ..." >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ >/dev/null
}
scripts/halide-runtime.sh 21.0.0 >/dev/null
scripts/halide-runtime.sh vkcopy-abi >/dev/null
root="$PWD/target/halide"
src="$PWD/halide-abi/pipelines"
out="$root/pipelines"
py="$root/venv-21.0.0/bin/python"
inc="$("$py" -c 'import halide, os; print(os.path.join(os.path.dirname(halide.__file__), "include"))')"
mkdir -p "$out"
if [ ! -f "$out/stamp" ] || [ "$src/pipelines.py" -nt "$out/stamp" ]; then
  echo "compiling the pipelines with Halide 21.0.0 ..." >&2
  "$py" "$src/pipelines.py" "$out"
  touch "$out/stamp"
fi
g++ -std=c++17 -O1 -I"$inc" -I"$out" -c "$src/check.cpp" -o "$out/check.o"
libs=("$out"/*_gpu.a "$out"/*_cpu.a)
g++ -o "$out/check-halide-21.0.0" "$out/check.o" "${libs[@]}" "$root/21.0.0/halide_runtime_vulkan.o" -ldl -lpthread
g++ -o "$out/check-vkcopy-abi" "$out/check.o" "${libs[@]}" "$root/vkcopy-abi/libhalide_runtime_vulkan.so" \
  -Wl,-rpath,"$root/vkcopy-abi" -ldl -lpthread
expected="$src/expected-halide-21.0.0.txt"
status=0
checks=$(sed -n 's/^    {"\([a-z_0-9]*\)", .*/\1/p' "$src/check.cpp")
for c in $checks; do
  line=$(HL_VK_LAYERS=VK_LAYER_KHRONOS_validation timeout 120 "$out/check-vkcopy-abi" "$c" 2>&1 | tail -1) || true
  echo "vkcopy-abi     $line"
  case "$line" in "pass  $c") ;; *) status=1 ;; esac
  line=$(timeout 120 "$out/check-halide-21.0.0" "$c" 2>&1 | tail -1) || line="FAIL  $c: crashed or timed out"
  listed=$(grep -E "^$c:" "$expected" || true)
  case "$line" in
    "pass  $c")
      echo "halide-21.0.0  $line"
      if [ -n "$listed" ]; then echo "  listed in $expected but passed: remove it"; status=1; fi ;;
    *)
      if [ -n "$listed" ]; then echo "halide-21.0.0  expected failure: $c (${listed#*: })"
      else echo "halide-21.0.0  $line"; echo "  not listed in $expected"; status=1; fi ;;
  esac
done
# An application that shares its own device through halide_vulkan_acquire_context.
g++ -std=c++17 -O1 -I"$inc" -I"$out" "$src/app_context.cpp" "$out/gain_f32_gpu.a" "$out/gain_f32_cpu.a" \
  "$root/vkcopy-abi/libhalide_runtime_vulkan.so" -Wl,-rpath,"$root/vkcopy-abi" -rdynamic -ldl -lpthread \
  -o "$out/app-context-vkcopy-abi"
line=$(HL_VK_LAYERS=VK_LAYER_KHRONOS_validation timeout 120 "$out/app-context-vkcopy-abi" 2>&1 | tail -1) || true
echo "vkcopy-abi     $line"
[ "$line" = "pass  app_context" ] || status=1
exit $status
