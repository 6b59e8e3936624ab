#!/usr/bin/env bash
# Builds the release worker into build/ with worker-build, pointing it at the
# tools setup.sh installed: worker-build would otherwise download
# wasm-bindgen, wasm-opt and esbuild from a host this machine cannot reach.
# First it bundles the dashboard (dashboard/ and uPlot from node_modules)
# into build/dashboard, the Workers static assets wrangler.toml names.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

case "$(uname -m)" in
  x86_64) platform=linux-x64 ;;
  aarch64 | arm64) platform=linux-arm64 ;;
  *) platform="linux-$(uname -m)" ;;
esac

export WASM_BINDGEN_BIN="$HOME/.cargo/bin/wasm-bindgen"
export WASM_OPT_BIN="$PWD/node_modules/binaryen/bin/wasm-opt"
export ESBUILD_BIN="$PWD/node_modules/@esbuild/$platform/bin/esbuild"

rm -rf build/dashboard
mkdir -p build/dashboard
"$ESBUILD_BIN" dashboard/main.js --bundle --minify --format=iife --target=es2020 \
  --legal-comments=eof --log-level=warning --outfile=build/dashboard/dashboard.js
cp dashboard/index.html dashboard/favicon.svg build/dashboard/

exec worker-build --release
