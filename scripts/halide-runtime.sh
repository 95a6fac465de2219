#!/usr/bin/env bash
# Builds Halide's Vulkan runtime as a shared library the suite can load, and
# prints its path. `scripts/halide-runtime.sh 21.0.0` takes the release's PyPI
# wheel (in a virtual environment under target/halide/), writes the standalone
# runtime object for x86-64-linux-vulkan-vk_v13 and links it; a path to a
# runtime object you built yourself (say from a Halide checkout with a fix)
# is linked as it is. Nothing is rebuilt when the library is already there.
# `scripts/halide-runtime.sh vkcopy-abi` links vkcopy's own library of that
# ABI (crate vkcopy-halide, built by cargo; VKCOPY_ABI_PROFILE=release for a
# release build) with Halide 21.0.0's generic runtime for x86-64-linux, the
# device layer without Vulkan that AOT pipelines link.
# Use it with VKCOPY_RUNTIME=halide:PATH or `vkcopy-suite run --runtime halide:PATH`.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:?usage: scripts/halide-runtime.sh VERSION|VERSION-fixed|VERSION-repaired|RUNTIME_OBJECT|vkcopy-abi|vkcopy-jit}"
root="$PWD/target/halide"

abi=()
link=()
if [ "$what" = vkcopy-jit ]; then
  # The same library for programs Halide 19.0.0 compiles JIT
  # (scripts/halide-tests.sh): with 19.0.0's generic runtime of its own, bound
  # to itself (-Bsymbolic), since the JIT's generic runtime lives in the JIT's
  # memory; halide-abi/jit/vulkan_bridge.cpp opens it.
  what=vkcopy-abi
  jit=19.0.0
fi
if [ "$what" = vkcopy-abi ]; then
  profile="${VKCOPY_ABI_PROFILE:-debug}"
  flags=()
  [ "$profile" = debug ] || flags=(--profile "$profile")
  echo "building vkcopy-halide ($profile; on a fresh clone it builds vkcopy first: 2-5 minutes on 2 cores; seconds when built) ..." >&2
  cargo build -q -p vkcopy-halide "${flags[@]}" >&2
  abi=(-Wl,--whole-archive "$PWD/target/$profile/libvkcopy_halide.a" -Wl,--no-whole-archive -lm)
  out="$root/vkcopy-abi/libhalide_runtime_vulkan.so"
  what="${jit:-21.0.0}"
  obj="$root/$what/halide_runtime_x86-64-linux.o"
  if [ -n "${jit:-}" ]; then
    out="$root/vkcopy-jit/libvkcopy_halide_jit.so"
    link=(-Wl,-Bsymbolic)
  fi
  target=x86-64-linux
  if [ -f "$out" ] && [ "$out" -nt "${abi[1]}" ] && [ "$out" -nt "$obj" ]; then
    echo "$out"
    exit 0
  fi
elif [ "${what%-fixed}" != "$what" ] || [ "${what%-repaired}" != "$what" ]; then
  # A release with the seed's readback fix (VERSION-fixed), or with the repairs
  # that prove the causes of its failures in Halide's own tests
  # (VERSION-repaired): its runtime module rebuilt from the release's sources
  # with scripts/patches/halide-VERSION-*.patch, preloaded while the release's
  # wheel writes the standalone runtime.
  release="${what%-*}"
  case "$what" in
    *-fixed) patches=(readback-fix.patch) ;;
    *) patches=(region-sizes.patch entry-name.patch) ;;
  esac
  preload=$(scripts/halide-runtime-module.sh "$release" "$what" \
    "${patches[@]/#/scripts/patches/halide-$release-}")
  out="$root/$what/libhalide_runtime_vulkan.so"
  obj="$root/$what/halide_runtime_vulkan.o"
  # A module newer than the library: both the object and the library go.
  if [ "$preload" -nt "$out" ]; then rm -f "$obj" "$out"; fi
  what="$release"
elif [ -f "$what" ]; then
  out="$root/custom/$(basename "$what" .o).so"
  obj="$what"
else
  out="$root/$what/libhalide_runtime_vulkan.so"
  obj="$root/$what/halide_runtime_vulkan.o"
fi
target="${target:-x86-64-linux-vulkan-vk_v13}"
if [ ${#abi[@]} -eq 0 ] && [ -f "$out" ] && [ "$out" -nt "$obj" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$(dirname "$out")" "$(dirname "$obj")"

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
  if ! "$venv/bin/python" -c 'import halide' >/dev/null 2>&1; then
    echo "fetching Halide $what's wheel from PyPI into $venv (about 570 MB with its dependencies, 1-3 minutes; once) ..." >&2
    "$venv/bin/pip" install -q --disable-pip-version-check "halide==$what" >&2
  fi
  if [ ! -f "$obj" ]; then
    echo "compiling Halide $what's standalone runtime for $target${preload:+ with the module $preload} (seconds) ..." >&2
    bindings=$(mktemp -d)
    env ${preload:+LD_PRELOAD="$preload" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$bindings/ld"} \
      "$venv/bin/python" - "$obj.tmp" "$target" <<'PY'
import sys
import halide as hl
hl.compile_standalone_runtime(sys.argv[1], hl.Target(sys.argv[2]))
PY
    # The module libHalide read must be the preloaded one, not its own.
    if [ -n "${preload:-}" ] && ! grep -q \
        "to .*libinitmod_vulkan.so.*halide_internal_initmod_vulkan_64'" "$bindings"/ld.*; then
      rm -rf "$bindings" "$obj.tmp"
      echo "halide-runtime.sh: libHalide did not read its Vulkan module from $preload" >&2
      exit 1
    fi
    rm -rf "$bindings"
    mv "$obj.tmp" "$obj"
  fi
fi
cc -shared "${link[@]}" -o "$out.tmp" "$obj" "${abi[@]}" -ldl -lpthread
mv "$out.tmp" "$out"
echo "$out"
