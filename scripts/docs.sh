#!/usr/bin/env bash
# The docs job: `cargo doc` of the workspace with warnings as errors (a broken
# or private intra-doc link fails it), then the check that every relative link
# of every tracked Markdown file points at a file that exists
# (runner/tests/docs.rs, also part of `cargo test`). Extra arguments go to
# `cargo doc` (e.g. `--open`).
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D warnings" cargo doc --workspace --no-deps "$@"
# The features of scripts/test.sh, so that its build is reused.
cargo test -q -p vkcopy-suite --test docs
