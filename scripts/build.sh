#!/usr/bin/env bash
# Builds the release worker into build/ with the tools setup.sh installed:
# cargo, wasm-bindgen, wasm-opt (binaryen) and esbuild. First it bundles the
# dashboard (dashboard/ and uPlot from node_modules) into build/dashboard,
# the Workers static assets wrangler.toml names.
#
# The worker's steps are worker-build's (0.8.7), with its flags, but the
# module that wraps wasm-bindgen's output is Sluice's own, src/entry.mjs:
# worker-build's shim cost a Proxy per call and kept the runtime's RPC from
# the Durable Objects (see that file).
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

wasm_bindgen="$HOME/.cargo/bin/wasm-bindgen"
wasm_opt="$PWD/node_modules/binaryen/bin/wasm-opt"
esbuild="$PWD/node_modules/@esbuild/$platform/bin/esbuild"

rm -rf build/dashboard
mkdir -p build/dashboard
"$esbuild" dashboard/main.js --bundle --minify --format=iife --target=es2020 \
  --legal-comments=eof --log-level=warning --outfile=build/dashboard/dashboard.js
cp dashboard/index.html dashboard/favicon.svg build/dashboard/

# The wasm, its glue and the entry are made in a staging directory and
# moved into build/ together, so that `wrangler dev` never reads a mix.
staging=target/sluice-staging
rm -rf "$staging"
mkdir -p "$staging"
# The env var has wasm-bindgen's macros drive futures with js_sys, as
# worker-build builds. Cargo's output is under CARGO_TARGET_DIR when set
# (the quick-start test shares the repository's).
WASM_BINDGEN_USE_JS_SYS=1 cargo build --lib --release --target wasm32-unknown-unknown
# The `web` target's glue leaves instantiating to src/entry.mjs, which
# imports the wasm as a module the runtime compiles (the `module` target's
# `import source` would have to be rewritten for wrangler). The reset
# function and the abort handler are what src/entry.mjs uses to replace the
# wasm instance after a panic or a trap.
"$wasm_bindgen" "${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/release/sluice.wasm" --out-dir "$staging" \
  --out-name index --no-typescript --target web \
  --experimental-reset-state-function --force-enable-abort-handler
# The features rustc's wasm32 target uses, and wasm-bindgen's exception
# handling, named one by one as worker-build does, so that binaryen emits no
# encoding the runtime does not read yet. Without `--debuginfo` binaryen
# drops the name section, which the release profile keeps for wasm-bindgen
# (Cargo.toml); a build for profiling (CARGO_PROFILE_RELEASE_STRIP=false,
# BENCHMARKS.md) keeps it.
# binaryen's -O inlines a function into its only caller whatever its size,
# which here leaves a wasm that gzips 29 KB larger (more than no wasm-opt at
# all); inlining only functions of size 1 that way costs 3 % raw bytes and
# no CPU (BENCHMARKS.md, 2026-11-28).
names=()
if [ "${CARGO_PROFILE_RELEASE_STRIP:-}" = false ]; then names=(--debuginfo); fi
"$wasm_opt" "$staging/index_bg.wasm" -o "$staging/index_bg.wasm" --one-caller-inline-max-function-size=1 -O ${names[@]+"${names[@]}"} \
  --enable-mutable-globals --enable-sign-ext --enable-nontrapping-float-to-int \
  --enable-bulk-memory --enable-multivalue --enable-reference-types --enable-exception-handling
cp src/entry.mjs "$staging/entry.mjs"
"$esbuild" "$staging/entry.mjs" --bundle --format=esm --minify --log-level=warning \
  --external:./index_bg.wasm '--external:cloudflare:*' --outfile="$staging/bundle.js"
mv "$staging/index_bg.wasm" build/index_bg.wasm
mv "$staging/bundle.js" build/index.js
mv "$stamp.next" "$stamp"
