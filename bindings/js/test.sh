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

# The PostgreSQL store's tests need a server: CTXCOMPACT_TEST_PG_URL, or one started
# here (internal/pgtest/pg-server.sh, stopped on exit). Without one they fail in CI
# and say SKIPPED elsewhere.
if [[ -z ${CTXCOMPACT_TEST_PG_URL:-} ]]; then
	pgdir=$(mktemp -d -u)
	trap 'bash internal/pgtest/pg-server.sh stop "$pgdir"' EXIT
	if url=$(bash internal/pgtest/pg-server.sh start "$pgdir"); then
		export CTXCOMPACT_TEST_PG_URL=$url
	elif [[ -n ${CI:-} && ${CI,,} != 0 && ${CI,,} != false ]]; then
		echo "test.sh: could not start a PostgreSQL server for the PostgreSQL store's tests (CI is set)" >&2
		exit 1
	else
		echo "test.sh: WARNING: could not start a PostgreSQL server: the PostgreSQL store is NOT TESTED" >&2
	fi
fi

node --test bindings/js/test/*.test.mjs
