#!/usr/bin/env bash
# Sets up what is missing, then serves Sluice on http://127.0.0.1:8787 with
# the rules from wrangler.toml (wrangler runs scripts/build.sh first).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
export WRANGLER_SEND_METRICS=false CLOUDFLARE_CF_FETCH_ENABLED=false
exec npx wrangler dev --ip 127.0.0.1 --port "${PORT:-8787}" "$@"
