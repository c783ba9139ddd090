#!/usr/bin/env bash
# Tests of the JS binding (node:test). Installs what they need on a fresh machine:
# the dev dependencies from package-lock.json (typescript, playwright-core) and
# Debian's chromium for the browser test. Run from anywhere: bash bindings/js/test.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

if [[ ! -x /usr/bin/chromium ]]; then
	echo "bindings/js/test.sh: installing chromium (apt)" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq chromium >/dev/null
fi

npm ci --no-audit --no-fund --loglevel=error

node --test bindings/js/test/*.test.mjs
