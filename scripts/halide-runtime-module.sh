#!/usr/bin/env bash
# Builds a replacement for the Vulkan runtime module inside the wheel's
# libHalide, from Halide's sources with patches applied, and prints the path of
# a small library that holds it: target/halide/NAME/libinitmod_vulkan.so.
#
#   scripts/halide-runtime-module.sh VERSION NAME [PATCH ...]
#   scripts/halide-runtime-module.sh VERSION NAME SOURCE.cpp
#
# The first form rebuilds the release's own src/runtime/vulkan.cpp with the
# patches applied; the second compiles a module of its own in its place (as
# halide-abi/jit/vulkan_bridge.cpp, which hands every entry point to vkcopy).
#
# libHalide keeps each runtime module as LLVM bitcode in exported data
# (halide_internal_initmod_vulkan_64, _64_debug and their _length), read through
# the GOT. A library that defines the same symbols and is LD_PRELOADed wins, so
# libHalide's JIT and compile_standalone_runtime then link the patched runtime
# as they link their own. The bitcode is compiled with a Debian clang and the
# flags of the release's src/runtime/CMakeLists.txt. Nothing is rebuilt when
# the library is newer than the patches.
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:?usage: scripts/halide-runtime-module.sh VERSION NAME [PATCH ...]}"
name="${2:?usage: scripts/halide-runtime-module.sh VERSION NAME [PATCH ...]}"
shift 2
patches=("$@")
source=""
if [ ${#patches[@]} -eq 1 ] && [ "${patches[0]%.cpp}" != "${patches[0]}" ]; then
  source="$PWD/${patches[0]}"
  patches=()
fi
out="$PWD/target/halide/$name"
lib="$out/libinitmod_vulkan.so"
stale=0
[ -f "$lib" ] || stale=1
for p in "${patches[@]}" ${source:+"$source"} "$0"; do
  [ "$p" -nt "$lib" ] && stale=1
done
if [ "$stale" -eq 0 ]; then
  echo "$lib"
  exit 0
fi
src=$(scripts/halide-sources.sh "$version")

# Any clang from 16 on writes bitcode that the wheel's LLVM (19) reads.
clang=""
for c in clang-16 clang-17 clang-18 clang-19 clang; do
  if command -v "$c" >/dev/null 2>&1; then clang="$c"; break; fi
done
if [ -z "$clang" ]; then
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  if command -v apt-get >/dev/null 2>&1; then
    # clang-16 where the distribution has it (Debian 12: the version this
    # was tried with), else its default clang.
    echo "installing clang (to compile Halide's runtime to bitcode; a minute, once) ..." >&2
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    for c in clang-16 clang; do
      if "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$c" >/dev/null 2>&1; then
        clang="$c"
        break
      fi
    done
    [ -n "$clang" ] || { echo "halide-runtime-module.sh: apt could not install clang" >&2; exit 1; }
  else
    echo "halide-runtime-module.sh: needs clang 16 or newer; install it and run again" >&2
    exit 1
  fi
fi

major_clang=$("$clang" -dumpversion | cut -d. -f1)
if [ "$major_clang" -lt 16 ]; then
  echo "halide-runtime-module.sh: $clang is clang $major_clang; Halide's runtime needs clang 16 or newer (install clang-16)" >&2
  exit 1
fi
command -v patch >/dev/null 2>&1 || [ ${#patches[@]} -eq 0 ] || {
  echo "halide-runtime-module.sh: needs patch (apt-get install patch)" >&2; exit 1; }

work="$out/module"
rm -rf "$work"
mkdir -p "$work/src"
cp -r "$src/src/runtime" "$work/src/"
for p in "${patches[@]}"; do
  patch -d "$work" -p1 --quiet <"$p"
done
[ -n "$source" ] || source="$work/src/runtime/vulkan.cpp"
IFS=. read -r major minor patch_level <<<"$version"
flags=(-O3 -std=c++17 -ffreestanding -fno-blocks -fno-exceptions -fno-unwind-tables
  -fno-vectorize -fno-threadsafe-statics -fno-rtti -fno-jump-tables -Wall
  -Wc++20-designator -Wcast-qual -Werror -Wignored-qualifiers -Wno-comment -Wno-psabi
  -Wno-unknown-warning-option -Wno-unused-function -Wvla -Wsign-compare
  -Wimplicit-fallthrough -Wno-sync-alignment -isystem "$src/dependencies/vulkan/include"
  -fpic -DCOMPILING_HALIDE_RUNTIME -DBITS_64 -DHALIDE_VERSION="$version"
  -DHALIDE_VERSION_MAJOR="$major" -DHALIDE_VERSION_MINOR="$minor"
  -DHALIDE_VERSION_PATCH="$patch_level" -m64 -target x86_64-unknown-unknown-unknown)
names=()
for p in "${patches[@]}"; do names+=("$(basename "$p")"); done
echo "compiling $(basename "$source") of Halide $version's runtime${names[*]:+ with ${names[*]}} to bitcode ($clang, seconds) ..." >&2
"$clang" "${flags[@]}" -emit-llvm -c "$source" -o "$work/vulkan_64.bc"
"$clang" "${flags[@]}" -g -DDEBUG_RUNTIME -emit-llvm -c "$source" -o "$work/vulkan_64_debug.bc"

# The blobs as C arrays, laid out as Halide's binary2cpp lays them out: the
# bytes, then a zero, and the length without it.
python3 - "$work" <<'PY'
import os, sys
work = sys.argv[1]
with open(os.path.join(work, "initmod_vulkan.c"), "w") as f:
    for module in ("vulkan_64", "vulkan_64_debug"):
        data = open(os.path.join(work, module + ".bc"), "rb").read()
        symbol = "halide_internal_initmod_" + module
        f.write("unsigned char %s[] = {\n" % symbol)
        for i in range(0, len(data), 40):
            f.write(",".join(str(b) for b in data[i:i + 40]) + ",\n")
        f.write("0};\nint %s_length = %d;\n" % (symbol, len(data)))
PY
cc -shared -fPIC -O0 -o "$lib.tmp" "$work/initmod_vulkan.c"
mv "$lib.tmp" "$lib"
echo "$lib"
