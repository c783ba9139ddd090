#!/usr/bin/env bash
# ctxcompact build and test driver. Usage: ./build.sh <command>
#   wasm    rebuild wasm/ctxcompact.wasm (needs the pinned Go version)
#   check   rebuild into a temp dir and fail if it differs from the committed .wasm
#   test    every test: Go (native + wazero), wasm reproducibility, Node, Python;
#           deterministic (fuzz targets replay their seeds and committed corpora)
#   fuzz    explore every Fuzz target (FUZZTIME runs each, default 2000000x)
#   bench   benchmarks and timings (ratios measured side by side in one run): core,
#           token counting native vs wasm (bench/tokens), Python start-up and Python
#           beside Hermes Agent's compressor (bindings/python/bench_peers.py), the JS
#           binding beside gpt-tokenizer, peak memory (bench-memory); no test asserts on
#           time or memory, these print the numbers
#   bench-wasm  the module on wazero: wasm/native ratio on the shared traces, cold start
#           with and without the compilation cache, instantiate, per-call overhead, memory
#   bench-memory  peak and kept memory of one 50 MB compaction (1.4M generated short
#           messages) and one lossless compress, per runtime: Go host, Node, Python
#           (bench/memory, a child process each; MESSAGES=n for another size)
set -euo pipefail
cd "$(dirname "$0")"

GO_PINNED=go1.26.8
WASM=wasm/ctxcompact.wasm

require_pinned_go() {
	local have
	have=$(go env GOVERSION)
	if [[ "$have" != "$GO_PINNED" ]]; then
		echo "build.sh: the .wasm must be built with $GO_PINNED (have $have); install it or set GOTOOLCHAIN=$GO_PINNED" >&2
		exit 1
	fi
}

# build_wasm builds the guest and shrinks it with binaryen's wasm-opt -Oz (the
# pinned npm devDependency, deterministic for one input and version): Go's wasm
# code is about 12% smaller for it, which keeps the module under 6 MB with
# session.run in it, at a wasm/native compaction ratio within noise (wasm/README.md).
build_wasm() { # $1 = output path
	require_pinned_go
	ensure_node_modules
	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 go build -buildmode=c-shared -trimpath -buildvcs=false -tags ctxcompact_hostvocab \
		-ldflags='-s -w -buildid=' -o "$1.go.wasm" ./wasm/guest
	node_modules/.bin/wasm-opt -Oz --enable-bulk-memory --enable-sign-ext --enable-nontrapping-float-to-int \
		--enable-mutable-globals "$1.go.wasm" -o "$1"
	rm -f "$1.go.wasm"
}

cmd_wasm() {
	build_wasm "$WASM"
	echo "built $WASM: $(wc -c <"$WASM") bytes, sha256 $(sha256sum "$WASM" | cut -d' ' -f1)"
}

cmd_check() {
	local tmp rebuilt
	tmp=$(mktemp -d)
	build_wasm "$tmp/ctxcompact.wasm"
	rebuilt=$(sha256sum "$tmp/ctxcompact.wasm" | cut -d' ' -f1)
	rm -rf "$tmp"
	if [[ "$rebuilt" != "$(sha256sum "$WASM" | cut -d' ' -f1)" ]]; then
		echo "build.sh check: $WASM is stale: rebuild with ./build.sh wasm and commit it" >&2
		echo "  committed sha256 $(sha256sum "$WASM" | cut -d' ' -f1)" >&2
		echo "  rebuilt   sha256 $rebuilt" >&2
		exit 1
	fi
	echo "build.sh check: $WASM is up to date ($rebuilt)"
	go run ./wasm/internal/genabi -check
}

# Debian's chromium, for the headless browser tests (cmd/ctxcompact's replay page
# here; bindings/js/test.sh installs it the same way when run on its own), by
# internal/aptinstall/apt-install.sh: apt-get as root (or sudo), waiting for another
# apt-get's locks.
ensure_chromium() {
	[[ -x /usr/bin/chromium ]] || bash internal/aptinstall/apt-install.sh chromium
}

# ensure_node_modules installs the npm dev dependencies (package-lock.json) when they
# are missing, and ensure_python_venv the Python test venv: recall's Go tests write
# stores from Node (node-sqlite3-wasm) and from Python (the source tree) beside Go's.
ensure_node_modules() {
	[[ -d node_modules/node-sqlite3-wasm && -x node_modules/.bin/wasm-opt ]] || npm ci --no-audit --no-fund --loglevel=error
}
ensure_python_venv() {
	bash bindings/python/test.sh --venv-only
}

# A PostgreSQL server for the whole run (internal/pgtest/pg-server.sh: Debian's
# packages, installed when missing; loopback, a temporary data directory, an
# unprivileged user), stopped when build.sh exits: the PostgreSQL recall store's
# tests in Go, Node and Python each take fresh databases on it.
start_pg_server() {
	[[ -z ${CTXCOMPACT_TEST_PG_URL:-} ]] || return 0
	PG_DIR=$(mktemp -d -u "${TMPDIR:-/tmp}/ctxcompact-pg.XXXXXX")
	trap 'bash internal/pgtest/pg-server.sh stop "$PG_DIR"' EXIT
	CTXCOMPACT_TEST_PG_URL=$(bash internal/pgtest/pg-server.sh start "$PG_DIR")
	export CTXCOMPACT_TEST_PG_URL
}

cmd_test_go() {
	local unformatted
	unformatted=$(gofmt -l core cmd host wasm internal bench recall)
	if [[ -n "$unformatted" ]]; then
		echo "build.sh: not gofmt-formatted: $unformatted" >&2
		exit 1
	fi
	go vet ./...
	ensure_chromium
	ensure_node_modules # recall's cross-runtime tests run Node and Python beside Go
	ensure_python_venv
	start_pg_server
	# Fuzz targets run here on their seeds and committed corpora (testdata/fuzz)
	# only, so a run is deterministic; exploring is ./build.sh fuzz.
	go test -count=1 ./...
}

# Explore every Fuzz target (not part of test: what it finds depends on luck and
# time). A failing input is saved under <package>/testdata/fuzz/<target>/: fix the
# bug and commit the input, which every later test run then replays. The budget is
# a count of runs, not a duration: with a duration, Go 1.26's fuzzing coordinator
# can fail a target with "context deadline exceeded" as time runs out
# (go.dev/issue/75804, fixed in Go 1.27).
# Every package under core is searched, internal ones included (core/internal/bpe
# has the tokenizer's).
cmd_fuzz() {
	local p t
	for p in $(go list ./core/...); do
		for t in $(go test -list '^Fuzz' "$p" | grep '^Fuzz' || true); do
			go test -run '^$' -fuzz "^$t\$" -fuzztime "${FUZZTIME:-2000000x}" \
				-fuzzminimizetime "${FUZZMINIMIZETIME:-5000x}" "$p"
		done
	done
}

cmd_test() {
	start_pg_server # one server for the Go, Node and Python suites
	cmd_test_go
	cmd_check
	bash testdata/gen/tokens/check.sh # token vectors equal the reference tokenizers (npm)
	bash bindings/js/test.sh
	bash bindings/python/test.sh
}

# Everything timed lives here, not in `test`: numbers are printed, never asserted, so
# a loaded machine cannot fail a correct build.
cmd_bench() {
	go test -run '^$' -bench . -benchtime "${BENCHTIME:-1s}" ./core ./core/internal/bpe
	# Token counting natively and in the module: the table of full vs incremental
	# counts with their ratios (once), then the per-op benchmarks.
	go test -run '^$' -bench '^BenchmarkSpeedTable$' -benchtime 1x ./bench/tokens
	go test -run '^$' -bench '^Benchmark(Native|Wasm)' -benchtime "${BENCHTIME:-1s}" ./bench/tokens
	# Python start-up: compile vs compiled-module cache, in process and in a fresh
	# interpreter (builds and installs the wheel into the test venv first); then
	# bench_peers.py: start-up and end to end beside Hermes Agent's compressor.
	bash bindings/python/test.sh --bench
	# The JS binding beside gpt-tokenizer (a devDependency) in one process: exact
	# counting, the per-turn count, the first compaction in a fresh process.
	[[ -d node_modules/gpt-tokenizer ]] || npm ci --no-audit --no-fund --loglevel=error
	node bindings/js/bench-peers.mjs
	cmd_bench_memory
}

# Peak memory (getrusage maxrss of a child process per runtime and case) of a 50 MB
# input generated the same on every run; docs/MEMORY.md has the figures.
cmd_bench_memory() {
	ensure_node_modules # the JS recall store
	ensure_python_venv  # the Python binding runs from the source tree
	go run ./bench/memory -messages "${MESSAGES:-1400000}"
}

cmd_bench_wasm() {
	go test -run '^$' -bench 'CompactRatio|ColdStart|Instantiate|CallOverhead|MemoryPerInstance' \
		-benchtime "${BENCHTIME:-1s}" ./host
}

case "${1:-}" in
wasm) cmd_wasm ;;
check) cmd_check ;;
test) cmd_test ;;
test-go) cmd_test_go ;;
fuzz) cmd_fuzz ;;
bench) cmd_bench ;;
bench-wasm) cmd_bench_wasm ;;
bench-memory) cmd_bench_memory ;;
*)
	sed -n '2,16p' "$0" >&2
	exit 2
	;;
esac
