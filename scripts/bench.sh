#!/usr/bin/env bash
# The benchmark suite (npm run bench): criterion on the host, the worker on
# local workerd under wrk, cost per decision, cold start, wasm size, and the
# price of splitting, a waiting room's refreshes and order; the figures go
# into BENCHMARKS.md with the commands.
# Takes about nine minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"

step() { printf '\n== %s\n' "$*"; }

if ! command -v wrk >/dev/null; then
  step "installing wrk (Debian package)"
  if [ "$(id -u)" = 0 ]; then apt-get install -y wrk; else sudo apt-get install -y wrk; fi
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

step "criterion: the algorithms on the host"
cargo bench --bench algorithms -- --warm-up-time 1 --measurement-time 2 | tee "$out/criterion.log"

step "the price of splitting a global quota"
cargo run --quiet --release --example split_price | tee "$out/split.md"

step "a waiting room's order across shards"
cargo run --quiet --release --example room_order | tee "$out/room-order.md"

step "release build"
bash scripts/build.sh

step "the worker on local workerd"
pin=()
if [ "$(nproc)" -gt 1 ]; then pin=(taskset -c 0); fi
# The figures go to a file: stdout is for the tools' chatter.
"${pin[@]}" node bench/workerd.mjs "$out/workerd.json"

node bench/report.mjs "$out/criterion.log" "$out/workerd.json" "$out/split.md" "$out/room-order.md"
