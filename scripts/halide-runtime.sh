#!/usr/bin/env bash
# Builds Halide's Vulkan runtime as a shared library the suite can load, and
# prints its path. `scripts/halide-runtime.sh 21.0.0` takes the release's PyPI
# wheel (in a virtual environment under target/halide/), writes the standalone
# runtime object for x86-64-linux-vulkan-vk_v13 and links it; a path to a
# runtime object you built yourself (say from a Halide checkout with a fix)
# is linked as it is. Nothing is rebuilt when the library is already there.
# Use it with VKCOPY_RUNTIME=halide:PATH or `vkcopy-suite run --runtime halide:PATH`.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:?usage: scripts/halide-runtime.sh VERSION|RUNTIME_OBJECT}"
root="$PWD/target/halide"

if [ -f "$what" ]; then
  out="$root/custom/$(basename "$what" .o).so"
  obj="$what"
else
  out="$root/$what/libhalide_runtime_vulkan.so"
  obj="$root/$what/halide_runtime_vulkan.o"
fi
if [ -f "$out" ] && [ "$out" -nt "$obj" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$(dirname "$out")"

need=()
command -v cc >/dev/null 2>&1 || need+=(gcc)
if [ ! -f "$what" ]; then
  command -v python3 >/dev/null 2>&1 || need+=(python3)
  python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
fi
if [ ${#need[@]} -gt 0 ]; then
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  if command -v apt-get >/dev/null 2>&1 && { [ ${#sudo[@]} -eq 0 ] || command -v sudo >/dev/null 2>&1; }; then
    echo "installing ${need[*]} ..." >&2
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "Halide's runtime needs: ${need[*]}; install them and run again." >&2
    exit 1
  fi
fi

if [ ! -f "$what" ]; then
  venv="$root/venv-$what"
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" >&2
  fi
  "$venv/bin/python" -c 'import halide' >/dev/null 2>&1 \
    || "$venv/bin/pip" install -q --disable-pip-version-check "halide==$what" >&2
  "$venv/bin/python" - "$obj" <<'PY'
import sys
import halide as hl
hl.compile_standalone_runtime(sys.argv[1], hl.Target("x86-64-linux-vulkan-vk_v13"))
PY
fi
cc -shared -o "$out.tmp" "$obj" -ldl -lpthread
mv "$out.tmp" "$out"
echo "$out"
