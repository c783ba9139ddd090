#!/usr/bin/env bash
# Python binding tests, self-contained on a fresh machine:
#   1. a venv under bindings/python/build/venv (git-ignored; CTXCOMPACT_PY_VENV overrides)
#      with wasmtime, pytest, build and hatchling from PyPI, and the openai and anthropic
#      SDKs (pinned, for the summarizer tests and the agent-loop example);
#   2. an sdist, then a wheel from that sdist (bindings/python/dist/), as `python -m
#      build` does; hatch_build.py puts ../../wasm/ctxcompact.wasm and its sha256 into
#      both, so nothing is copied into the source tree first; the wheel is installed
#      into that venv;
#   3. mypy --strict on the package (the type hints are part of the API);
#   4. pytest on tests/ against the installed wheel; tests/test_hermes.py in a venv of
#      its own with hermes-agent (build/venv-hermes). Any failure, error or an empty
#      run (pytest exit 5) fails this script. The PostgreSQL store's tests
#      (tests/test_recall_postgres.py) use the server CTXCOMPACT_TEST_PG_URL names, else
#      one started here (internal/pgtest/pg-server.sh, stopped on exit); with CI set, a
#      server that cannot be started fails this script.
#   tests/test_wheel.py also installs by every route the README names (the directory,
#   git+file, the sdist, the wheel), each into a fresh venv.
# Usage: bash bindings/python/test.sh [--copy-only | --venv-only | --bench [args] | pytest args...]
#   --bench: steps 1-2, then bench/start.py (start-up times) and bench_peers.py (beside
#   Hermes Agent's compressor); ./build.sh bench runs it.
#   --copy-only: copy the module into src/ctxcompact/ (git-ignored) and stop, for
#   running bench.py against the source tree; no build or test needs it.
#   --venv-only: step 1 and the copy, then stop: the Go tests of recall/ run a Python
#   store from the source tree beside Go's (./build.sh test does this first).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
pkg="$here/src/ctxcompact"

copy_wasm() {
	local src="$root/wasm/ctxcompact.wasm" sha
	[[ -f "$src" ]] || { echo "test.sh: $src is missing" >&2; exit 1; }
	sha=$(sha256sum "$src" | cut -d' ' -f1)
	if ! cmp -s "$src" "$pkg/ctxcompact.wasm"; then
		cp "$src" "$pkg/ctxcompact.wasm.tmp"
		mv "$pkg/ctxcompact.wasm.tmp" "$pkg/ctxcompact.wasm"
	fi
	echo "$sha  ctxcompact.wasm" >"$pkg/ctxcompact.wasm.sha256"
	# The copy must be the committed module, byte for byte.
	[[ "$(sha256sum "$pkg/ctxcompact.wasm" | cut -d' ' -f1)" == "$sha" ]] || {
		echo "test.sh: copied .wasm does not match $src" >&2; exit 1; }
	# The exact encodings' rank tables, which the module asks its host for.
	mkdir -p "$pkg/vocab"
	local v
	for v in o200k_base cl100k_base; do
		cmp -s "$root/core/internal/bpe/vocab/$v.bin" "$pkg/vocab/$v.bin" || cp "$root/core/internal/bpe/vocab/$v.bin" "$pkg/vocab/$v.bin"
	done
}

if [[ "${1:-}" == "--copy-only" ]]; then
	copy_wasm
	exit 0
fi

python=${PYTHON:-python3}
venv=${CTXCOMPACT_PY_VENV:-$here/build/venv}
deps=(wasmtime==50.0.1 pytest==9.2.0 build==1.6.1 hatchling==1.33.0 mypy==2.4.1) # pinned: CI must not change under us
if ! "$venv/bin/python" -c 'import wasmtime, pytest, build, hatchling, mypy' >/dev/null 2>&1; then
	echo "test.sh: creating $venv"
	rm -rf "$venv"
	"$python" -m venv "$venv"
	"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${deps[@]}"
fi
# psycopg 3 (binary: it carries libpq), pinned, for the PostgreSQL recall store: its
# tests, and the load-test workers the Go tests of recall/postgres run from this venv.
pg_deps=(psycopg==3.3.9 psycopg-binary==3.3.9)
if ! "$venv/bin/python" -c 'import psycopg; assert psycopg.__version__ == "3.3.9" and psycopg.pq.__impl__ == "binary"' >/dev/null 2>&1; then
	"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "psycopg[binary]==3.3.9"
fi
if [[ "${1:-}" == "--venv-only" ]]; then
	copy_wasm
	exit 0
fi
# Hermes Agent, for tests/test_hermes.py (its own agent loop on our engine) and
# bench_peers.py (its compressor as the peer): a test dependency only, never one of
# the package, in a venv of its own (build/venv-hermes), because it pins ~30 packages
# exactly (openai==2.24.0 among them, older than the SDK pinned below). Python >= 3.11;
# about 65 packages, 250 MB, 35 s to install from PyPI.
hvenv=${CTXCOMPACT_HERMES_VENV:-$here/build/venv-hermes}
hermes_deps=(hermes-agent==0.19.0 wasmtime==50.0.1 pytest==9.2.0)
if ! "$hvenv/bin/python" -c 'import wasmtime, pytest, run_agent' >/dev/null 2>&1; then
	echo "test.sh: creating $hvenv"
	rm -rf "$hvenv"
	"$python" -m venv "$hvenv"
	"$hvenv/bin/python" -m pip install --quiet --disable-pip-version-check "${hermes_deps[@]}"
fi
hpy="$hvenv/bin/python"
# The real SDKs, pinned, for tests/test_sdk_summarizers.py, the agent-loop example and
# mypy on ctxcompact.summarizers (issue 18); installed into the same venv.
sdk_deps=(openai==3.51.0 anthropic==2.10.0)
if ! "$venv/bin/python" -c 'import openai, anthropic; assert (openai.__version__, anthropic.__version__) == ("3.51.0", "2.10.0")' >/dev/null 2>&1; then
	"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${sdk_deps[@]}"
fi
vpy="$venv/bin/python"
mkdir -p "$here/build"
# The same pins for the fresh venvs of tests/test_wheel.py (and of the [openai] route in
# tests/test_agent_loop_example.py), build isolation included
# (pip passes PIP_CONSTRAINT on to the pip that fills a build environment).
printf '%s\n' "${deps[@]}" "${sdk_deps[@]}" "${pg_deps[@]}" >"$here/build/constraints.txt"

dist="$here/dist"
rm -rf "$dist"
"$vpy" -m build --no-isolation --outdir "$dist" "$here" >"$here/build/wheel.log" 2>&1 || {
	cat "$here/build/wheel.log" >&2; exit 1; }
wheel=$(ls "$dist"/ctxcompact-*.whl)
sdist=$(ls "$dist"/ctxcompact-*.tar.gz)
"$vpy" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
"$hpy" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
if [[ "${1:-}" == "--bench" ]]; then
	shift
	cd "$here/build" # not the source tree: the installed package is measured
	"$vpy" "$here/bench/start.py" "$@"
	exec "$hpy" "$here/bench_peers.py" # beside Hermes Agent's compressor
fi

"$vpy" -m mypy --strict --no-error-summary --cache-dir "$here/build/mypy-cache" "$here/src/ctxcompact"

export CTXCOMPACT_WHEEL="$wheel" CTXCOMPACT_SDIST="$sdist" CTXCOMPACT_PIP_CONSTRAINT="$here/build/constraints.txt"
export CTXCOMPACT_REPO_ROOT="$root"
export CTXCOMPACT_CACHE_DIR="$here/build/module-cache"
cd "$here"
# -p no:cacheprovider: no .pytest_cache in the checkout. pytest exits non-zero on any
# failure or error and with 5 when nothing was collected; set -e propagates both.
# tests/test_hermes.py runs in the Hermes venv, everything else in the main one;
# arguments naming test_hermes go to the Hermes venv alone.
if [[ "$*" == *test_hermes* ]]; then
	exec "$hpy" -m pytest -p no:cacheprovider "$@"
fi
# A PostgreSQL server for tests/test_recall_postgres.py, unless one is named.
if [[ -z "${CTXCOMPACT_TEST_PG_URL:-}" ]]; then
	pgdir=$(mktemp -d -u)
	trap 'bash "$root/internal/pgtest/pg-server.sh" stop "$pgdir"' EXIT
	if pgurl=$(bash "$root/internal/pgtest/pg-server.sh" start "$pgdir"); then
		export CTXCOMPACT_TEST_PG_URL="$pgurl"
	elif ci=${CI:-} && [[ -n $ci && $ci != 0 && ${ci,,} != false ]]; then
		echo "test.sh: could not start a PostgreSQL server (internal/pgtest/pg-server.sh) and CI is set" >&2
		exit 1
	else
		echo "test.sh: WARNING: no PostgreSQL server (pg-server.sh failed): the PostgreSQL store's tests will be SKIPPED, NOT TESTED" >&2
	fi
fi
"$vpy" -m pytest -p no:cacheprovider --ignore=tests/test_hermes.py "$@"
if [[ $# -eq 0 ]]; then
	"$hpy" -m pytest -p no:cacheprovider tests/test_hermes.py
fi
