#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what is missing, checks
# style for the host and wasm32, runs the Rust unit and property tests and the
# JavaScript client's own tests, builds the release worker, checks the wasm's
# size budget, and runs the end-to-end suite and the fast size of the
# reliability suite against it on workerd.
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

step "the wasm's size budget: 400 KiB gzipped"
bash scripts/wasm-budget.sh

# The workerd suites spend most of their time waiting (on the runtime, on
# real time), not computing, so files run side by side: each starts its
# own runtimes on ports the OS picks and keeps its state in memory or in
# temporary directories. A file that keeps a core busy for minutes says so
# on a line of its own, "// Heavy: <why>"; heavy files run one at a time,
# in a lane beside the others, so that no two load the machine at once. A
# file whose tests judge answers against real time to tens of milliseconds
# says "// Timing: <why>"; those run one at a time after both lanes, alone
# on the machine (docs/operations.md "Tests").
files=(tests/e2e/*.test.mjs tests/reliability/*.test.mjs)
mapfile -t heavy < <(grep -l '^// Heavy:' "${files[@]}")
mapfile -t timing < <(grep -l '^// Timing:' "${files[@]}")
mapfile -t light < <(grep -L -e '^// Heavy:' -e '^// Timing:' "${files[@]}")
jobs=${SLUICE_E2E_JOBS:-3}

heavy_log=$(mktemp)
if [ ${#heavy[@]} -gt 0 ]; then
  node --test --test-reporter=spec --test-concurrency=1 "${heavy[@]}" >"$heavy_log" 2>&1 &
else
  true &
fi
heavy_pid=$!
trap 'kill "$heavy_pid" 2>/dev/null || true; rm -f "$heavy_log"' EXIT

step "end-to-end and reliability tests on workerd (fast size), $jobs files at a time"
light_rc=0
node --test --test-reporter=spec --test-concurrency="$jobs" "${light[@]}" || light_rc=$?

heavy_rc=0
wait "$heavy_pid" || heavy_rc=$?
trap 'rm -f "$heavy_log"' EXIT
step "the heavy ones, one at a time beside them: ${heavy[*]}"
cat "$heavy_log"

step "the timing ones, one at a time and alone: ${timing[*]}"
timing_rc=0
node --test --test-reporter=spec --test-concurrency=1 "${timing[@]}" || timing_rc=$?
[ "$light_rc" = 0 ] && [ "$heavy_rc" = 0 ] && [ "$timing_rc" = 0 ]
