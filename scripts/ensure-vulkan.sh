#!/usr/bin/env bash
# Makes sure the Vulkan loader, lavapipe (Mesa's CPU Vulkan driver) and the
# Khronos validation layer are installed. On Debian/Ubuntu it installs what is
# missing (as root, or through sudo); elsewhere it says what to install.
set -euo pipefail

packages=()
# grep reads all of ldconfig's list: with -q it would stop at the first match,
# ldconfig would die of SIGPIPE, and pipefail would call the loader missing.
ldconfig -p 2>/dev/null | grep 'libvulkan\.so\.1' >/dev/null || packages+=(libvulkan1)
ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1 || packages+=(mesa-vulkan-drivers)
ls /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json >/dev/null 2>&1 \
  || packages+=(vulkan-validationlayers)

[ ${#packages[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "vkcopy needs: the Vulkan loader (libvulkan.so.1), Mesa's lavapipe driver and the Khronos validation layer." >&2
  echo "Missing here (Debian names): ${packages[*]}. Install your distribution's equivalents and run again." >&2
  exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "Missing: ${packages[*]}. Run as root: apt-get update && apt-get install -y ${packages[*]}" >&2
  exit 1
fi
echo "installing ${packages[*]} ..." >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq >/dev/null
"${sudo[@]}" apt-get install -y -qq "${packages[@]}" >/dev/null
