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

# `wrangler dev` runs this build when it starts and again as soon as its
# watcher on src/ is ready (wrangler 4.86 then says "The file src changed,
# restarting build..." although nothing changed: it names the watched
# directory, not a file). Nothing here writes under src/. So that the second
# run costs nothing, a build whose inputs are all older than the last
# successful build stops here. The stamp takes the time the build started,
# so a file saved during a build makes the next one run.
stamp=target/sluice-build.stamp
if [ -f build/index.js ] && [ -f "$stamp" ] &&
  [ -z "$(find src dashboard Cargo.toml Cargo.lock package-lock.json scripts/build.sh -newer "$stamp" -print -quit)" ]; then
  echo "build: build/ is up to date with src/, dashboard/, Cargo.toml, Cargo.lock, package-lock.json and scripts/build.sh"
  exit 0
fi
mkdir -p target
touch "$stamp.next"

export WASM_BINDGEN_BIN="$HOME/.cargo/bin/wasm-bindgen"
export WASM_OPT_BIN="$PWD/node_modules/binaryen/bin/wasm-opt"
export ESBUILD_BIN="$PWD/node_modules/@esbuild/$platform/bin/esbuild"

rm -rf build/dashboard
mkdir -p build/dashboard
"$ESBUILD_BIN" dashboard/main.js --bundle --minify --format=iife --target=es2020 \
  --legal-comments=eof --log-level=warning --outfile=build/dashboard/dashboard.js
cp dashboard/index.html dashboard/favicon.svg build/dashboard/

worker-build --release
mv "$stamp.next" "$stamp"
