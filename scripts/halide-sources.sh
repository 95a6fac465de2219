#!/usr/bin/env bash
# Fetches Halide 19.0.0's sources (runtime, tests, apps, tools) from Debian's
# source package `halide` (19.0.0-6, Debian 13 "trixie"), checks the upstream
# tarball's sha256, unpacks it into target/halide/src-19.0.0/ and prints that
# path. Once: an unpacked tree is reused. Nothing of Halide is committed here.
#
# apt fetches the tarball through a private sources list (a deb-src line for
# trixie on the Debian mirror this machine already uses, or
# HALIDE_SOURCES_MIRROR). Some mirrors do not serve the .dsc and .debian.tar.xz
# beside it, and apt then exits non-zero after fetching the tarball: the
# checksum decides, never apt's exit status.
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-19.0.0}"
case "$version" in
  19.0.0) sha=83bae1f0e24dc44d9d85014d5cd0474df2dd03975680894ce3fafd6e97dffee2 ;;
  *) echo "halide-sources.sh: no known source tarball for Halide $version (known: 19.0.0)" >&2; exit 2 ;;
esac
root="$PWD/target/halide"
dest="$root/src-$version"
if [ -f "$dest/.complete" ]; then
  echo "$dest"
  exit 0
fi
tarball="$root/halide_$version.orig.tar.gz"
mkdir -p "$root"

have_sha() { [ -f "$tarball" ] && echo "$sha  $tarball" | sha256sum -c --status; }

if ! have_sha; then
  command -v apt-get >/dev/null 2>&1 || {
    echo "halide-sources.sh: apt-get is needed to fetch Debian's source package halide $version-6" >&2; exit 1; }
  mirror="${HALIDE_SOURCES_MIRROR:-}"
  if [ -z "$mirror" ]; then
    # The Debian mirror of this machine's own sources (deb822 or one-line form).
    mirror=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
      | grep -oE 'https?://[^ ]+/debian/?( |$)' | grep -v security | head -n 1 | tr -d ' ' || true)
  fi
  if [ -z "$mirror" ]; then
    echo "halide-sources.sh: no Debian mirror in this machine's apt sources; set HALIDE_SOURCES_MIRROR to one (the URL of a Debian archive)" >&2
    exit 1
  fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
  echo "deb-src ${mirror%/} trixie main" >"$work/sources.list"
  apt=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o APT::Sandbox::User=root)
  echo "fetching Halide $version's sources (Debian's source package halide, 33 MB; once) ..." >&2
  if ! apt-get "${apt[@]}" update -qq >"$work/log" 2>&1; then
    cat "$work/log" >&2
    echo "halide-sources.sh: apt could not read trixie's source index from $mirror (no network?)" >&2
    exit 1
  fi
  # Non-zero when the .dsc is missing though the tarball came: judged below.
  # Any Debian revision of the release carries the same upstream tarball.
  (cd "$work" && apt-get "${apt[@]}" source --download-only -qq halide >>"$work/log" 2>&1) || true
  if [ ! -f "$work/halide_$version.orig.tar.gz" ]; then
    cat "$work/log" >&2
    echo "halide-sources.sh: apt did not fetch halide_$version.orig.tar.gz from $mirror (no network, or no trixie sources there?)" >&2
    exit 1
  fi
  if ! echo "$sha  $work/halide_$version.orig.tar.gz" | sha256sum -c --status; then
    echo "halide-sources.sh: halide_$version.orig.tar.gz has sha256 $(sha256sum <"$work/halide_$version.orig.tar.gz" | cut -d' ' -f1), not $sha: refused" >&2
    exit 1
  fi
  mv "$work/halide_$version.orig.tar.gz" "$tarball"
fi

# Unpacked beside the destination, then moved: an interrupted run leaves no
# half tree where a later one would take it for whole.
rm -rf "$dest" "$dest.tmp"
mkdir -p "$dest.tmp"
tar -xzf "$tarball" -C "$dest.tmp" --strip-components=1
touch "$dest.tmp/.complete"
mv "$dest.tmp" "$dest"
echo "$dest"
