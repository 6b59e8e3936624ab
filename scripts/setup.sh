#!/usr/bin/env bash
# Installs what Sluice needs to build, run and test, and skips whatever is
# already there, so running it again costs a few seconds.
#
# Everything comes from registries this machine can reach: rustup for the
# wasm32 target, crates.io for wasm-bindgen-cli, npm for
# wrangler, miniflare, binaryen (wasm-opt) and esbuild.
set -euo pipefail
cd "$(dirname "$0")/.."

# The CLI must match the wasm-bindgen library in Cargo.lock exactly.
WASM_BINDGEN_VERSION=$(awk '$0 == "name = \"wasm-bindgen\"" { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
export PATH="$HOME/.cargo/bin:$PATH"

say() { printf 'setup: %s\n' "$*"; }

command -v cargo >/dev/null || { echo "setup: cargo not found; install Rust with rustup first" >&2; exit 1; }
command -v npm >/dev/null || { echo "setup: npm not found; install Node.js 20 or newer first" >&2; exit 1; }

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi
for component in rustfmt clippy; do
  if ! rustup component list --installed | grep -q "^$component"; then
    say "adding $component"
    rustup component add "$component"
  fi
done

if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $WASM_BINDGEN_VERSION" ]; then
  say "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (a few minutes, once)"
  # --locked fails for this version: its lockfile does not build here.
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --force
fi

# npm writes node_modules/.package-lock.json on every install; when it is
# newer than package-lock.json, node_modules is up to date.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "installing npm packages"
  npm ci --no-audit --no-fund
fi

# The dashboard's browser tests drive Debian's Chromium with puppeteer-core
# (which downloads no browser of its own).
if [ -z "${CHROMIUM_PATH:-}" ] && [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing chromium for the dashboard's browser tests"
    apt-get update -qq
    apt-get install -y -qq chromium
  else
    say "no Chromium at /usr/bin/chromium: the dashboard's browser tests will be skipped."
    say "install it with 'sudo apt-get install -y chromium', or set CHROMIUM_PATH to a Chromium binary"
  fi
fi
