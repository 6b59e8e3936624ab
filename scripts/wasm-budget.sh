#!/usr/bin/env bash
# The wasm's size budget: build/*.wasm, gzipped as `gzip -c` does, must be
# at most 400 KiB (a smaller worker starts faster). Run after
# scripts/build.sh; fails saying by how much it is over, and otherwise says
# how much room is left.
set -euo pipefail
cd "$(dirname "$0")/.."

budget=$((400 * 1024))
shopt -s nullglob
wasm=(build/*.wasm)
if [ ${#wasm[@]} -eq 0 ]; then
  echo "wasm budget: no build/*.wasm: run scripts/build.sh first" >&2
  exit 1
fi
size=$(gzip -c "${wasm[@]}" | wc -c)
if [ "$size" -gt "$budget" ]; then
  echo "wasm budget: ${wasm[*]} is $size B gzipped, $((size - budget)) B over its budget of 400 KiB ($budget B)" >&2
  exit 1
fi
echo "wasm budget: ${wasm[*]} is $size B gzipped, $((budget - size)) B under its budget of 400 KiB ($budget B)"
