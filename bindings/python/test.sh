#!/usr/bin/env bash
# Python binding tests, self-contained on a fresh machine:
#   1. a venv under bindings/python/build/venv (git-ignored; CTXCOMPACT_PY_VENV overrides)
#      with wasmtime, pytest, build and hatchling from PyPI;
#   2. wasm/ctxcompact.wasm copied into the package with its sha256;
#   3. a wheel built (bindings/python/dist/) and installed into that venv;
#   4. mypy --strict on the package (the type hints are part of the API);
#   5. pytest on tests/ against the installed wheel. Any failure, error or an empty
#      run (pytest exit 5) fails this script.
# Usage: bash bindings/python/test.sh [--copy-only | pytest args...]
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
}

copy_wasm
if [[ "${1:-}" == "--copy-only" ]]; then
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
vpy="$venv/bin/python"

dist="$here/dist"
mkdir -p "$here/build"
rm -rf "$dist"
"$vpy" -m build --wheel --no-isolation --outdir "$dist" "$here" >"$here/build/wheel.log" 2>&1 || {
	cat "$here/build/wheel.log" >&2; exit 1; }
wheel=$(ls "$dist"/ctxcompact-*.whl)
"$vpy" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"

"$vpy" -m mypy --strict --no-error-summary --cache-dir "$here/build/mypy-cache" "$here/src/ctxcompact"

export CTXCOMPACT_WHEEL="$wheel"
export CTXCOMPACT_REPO_ROOT="$root"
export CTXCOMPACT_CACHE_DIR="$here/build/module-cache"
cd "$here"
# -p no:cacheprovider: no .pytest_cache in the checkout. pytest exits non-zero on any
# failure or error and with 5 when nothing was collected; set -e propagates both.
"$vpy" -m pytest -p no:cacheprovider "$@"
