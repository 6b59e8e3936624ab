#!/usr/bin/env bash
# The long reliability suite (npm run test:reliability): far more fuzz cases
# than npm test runs, and the workerd suites in their full size (eight
# hard restarts under load, 100 000 distinct keys). It takes tens of
# minutes; npm test runs the same suites in their fast size.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"

step() { printf '\n== %s\n' "$*"; }

step "fuzzing the parsers (${FUZZ_CASES:=2000000} cases per target)"
FUZZ_CASES="$FUZZ_CASES" cargo test --release --test fuzz

step "release build"
bash scripts/build.sh

step "reliability suite on workerd, full size"
SLUICE_FULL=1 node --test --test-reporter=spec --test-concurrency=1 \
  tests/reliability/*.test.mjs tests/e2e/faults.test.mjs
