#!/usr/bin/env bash
# check.sh regenerates the token vectors with the reference tokenizers and fails if
# the committed testdata/tokens.count.json or testdata/tokens.calibrate.json differ.
#   testdata/gen/tokens/check.sh           check (needs node and the npm registry)
#   testdata/gen/tokens/check.sh --write   regenerate the committed files
# The npm packages are installed into a temporary directory, never into the repo.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$here/package.json" "$here/gen.mjs" "$tmp/"
(cd "$tmp" && npm install --no-audit --no-fund --silent >/dev/null)
if [[ "${1:-}" == "--write" ]]; then
	node "$tmp/gen.mjs" "$root"
	exit 0
fi
node "$tmp/gen.mjs" "$root" "$tmp/out" >/dev/null
status=0
for f in testdata/tokens.count.json testdata/tokens.calibrate.json; do
	if ! cmp -s "$tmp/out/$f" "$root/$f"; then
		echo "check.sh: $f is not what gen.mjs produces from cases.json; run testdata/gen/tokens/check.sh --write" >&2
		diff <(head -c 100000 "$tmp/out/$f") <(head -c 100000 "$root/$f") | head -20 >&2 || true
		status=1
	fi
done
[[ $status == 0 ]] && echo "check.sh: token vectors are up to date (js-tiktoken and gpt-tokenizer agree)"
exit $status
