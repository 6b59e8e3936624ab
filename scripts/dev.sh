#!/usr/bin/env bash
# Sets up what is missing, then serves Sluice on http://127.0.0.1:8787 (or
# $PORT) with the rules from wrangler.toml (wrangler runs scripts/build.sh
# first), keeping its state in .wrangler/state across restarts.
#
# The decision and admin APIs exist only with their tokens, and a waiting
# room only with its secret, so on the first run this writes a .dev.vars
# (git ignores it) with a random API_TOKEN, ADMIN_TOKEN and ROOM_SECRET; the
# README's commands read them from there. An existing
# .dev.vars is never changed. With --env-file (npm run sale passes one),
# wrangler reads the tokens from that file instead, so none is written.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
export WRANGLER_SEND_METRICS=false CLOUDFLARE_CF_FETCH_ENABLED=false

env_file=false
for arg in "$@"; do
  case "$arg" in --env-file | --env-file=*) env_file=true ;; esac
done

if [ "$env_file" = true ]; then
  :
elif [ ! -e .dev.vars ]; then
  (
    umask 077
    node -e '
      const { randomBytes } = require("node:crypto");
      for (const name of ["API_TOKEN", "ADMIN_TOKEN", "ROOM_SECRET"]) console.log(`${name}=${randomBytes(32).toString("hex")}`);
    ' > .dev.vars
  )
  echo "dev: wrote .dev.vars with a new random API_TOKEN, ADMIN_TOKEN and ROOM_SECRET (local only; see \"Tokens and rotation\" in docs/operations.md)"
elif ! grep -q '^API_TOKEN=' .dev.vars; then
  echo "dev: .dev.vars has no API_TOKEN, so the decision API (/_sluice/v1/...) answers 404; add a line API_TOKEN=<32 or more random characters>" >&2
fi

exec npx wrangler dev --ip 127.0.0.1 --port "${PORT:-8787}" "$@"
