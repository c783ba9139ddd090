#!/usr/bin/env bash
# Tests of the JS binding (node:test). Installs what they need on a fresh machine:
# the dev dependencies from package-lock.json (typescript, playwright-core) and
# Debian's chromium for the browser test (with apt-get as root or sudo, unless
# /usr/bin/chromium is there). Run from anywhere: bash bindings/js/test.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

# apt-get as root (or sudo), waiting for another apt-get's locks: see the script.
[[ -x /usr/bin/chromium ]] || bash internal/aptinstall/apt-install.sh chromium

npm ci --no-audit --no-fund --loglevel=error

node --test bindings/js/test/*.test.mjs
