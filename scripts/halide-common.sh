# Sourced by scripts/halide-tests.sh and scripts/halide-apps.sh: Halide
# $version's sources, its wheel and the Vulkan loader, set up as both need.
# Sets src (the unpacked sources), venv, wheel (the wheel's halide package)
# and args (the script's arguments, --table naming the README it rewrites).
scripts/ensure-vulkan.sh
src=$(scripts/halide-sources.sh "$version")
scripts/halide-runtime.sh "$version" >/dev/null
venv="$PWD/target/halide/venv-$version"
wheel=$("$venv/bin/python" -c 'import halide, os; print(os.path.dirname(halide.__file__))')
"$venv/bin/python" -c 'import yaml' 2>/dev/null || "$venv/bin/pip" install -q --disable-pip-version-check pyyaml
args=()
for a in "$@"; do
  case "$a" in
    --table) args+=(--table cases/halide/README.md) ;;
    *) args+=("$a") ;;
  esac
done
