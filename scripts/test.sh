#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what is missing, checks
# style for the host and wasm32, runs the Rust unit and property tests and the
# JavaScript client's own tests, builds the release worker, and runs the
# end-to-end suite and the fast size of the reliability suite against it on
# workerd.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"

step() { printf '\n== %s\n' "$*"; }

step "style: cargo fmt, clippy (host and wasm32)"
cargo fmt --check
cargo clippy --all-targets -- -D warnings
cargo clippy --lib --target wasm32-unknown-unknown -- -D warnings

step "unit and property tests (host)"
cargo test

step "the JavaScript client (client/), against a fake binding"
node --test --test-reporter=spec client/test/*.test.mjs

step "the worker's entry module (src/entry.mjs): recovery after a panic, against fakes"
node --test --test-reporter=spec tests/entry/*.test.mjs

step "release build"
bash scripts/build.sh

step "end-to-end and reliability tests on workerd (fast size)"
node --test --test-reporter=spec tests/e2e/*.test.mjs tests/reliability/*.test.mjs
