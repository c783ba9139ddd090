#!/usr/bin/env bash
# pg-server.sh: a throwaway PostgreSQL server for the tests of the PostgreSQL recall
# store (docs/RECALL.md), from Debian's packages: the one place build.sh, the Go
# tests (internal/pgtest), bindings/js/test.sh and bindings/python/test.sh start one.
#
#   pg-server.sh start DIR    initdb in DIR/data (a new directory), start the server
#                             on a free loopback port, print its URL (also DIR/url)
#   pg-server.sh stop DIR     stop it (fast shutdown) and remove DIR
#   pg-server.sh crash DIR    stop it the way a crash does (immediate: no checkpoint)
#   pg-server.sh restart DIR  start it again after crash or stop, on the same port
#
# The server runs as an unprivileged user (postgres, the Debian package's, when run
# as root; else the caller), listens on 127.0.0.1 only, with trust authentication
# for the superuser ctxcompact, a UTF-8 database and pg_trgm (in the server
# package). Missing binaries are installed with internal/aptinstall (package
# postgresql).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

die() {
	echo "pg-server.sh: $*" >&2
	exit 1
}
(($# == 2)) || die "usage: pg-server.sh start|stop|crash|restart DIR"
cmd=$1
dir=$2

bindir() {
	local d best=
	for d in /usr/lib/postgresql/*/bin; do
		[[ -x $d/initdb && -x $d/pg_ctl ]] && best=$d
	done
	[[ -n $best ]] && echo "$best"
}

# as_owner CMD...: CMD as the server's user.
as_owner() {
	if ((EUID == 0)); then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() { # $1 = port
	as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
		-o "-c listen_addresses=127.0.0.1 -p $1 -k $dir -c max_connections=200 -c shared_buffers=64MB" start >/dev/null ||
		die "the server did not start: $(tail -n 20 "$dir/server.log" 2>/dev/null)"
}

case "$cmd" in
start)
	bin=$(bindir) || true
	if [[ -z ${bin:-} ]]; then
		bash "$here/../aptinstall/apt-install.sh" postgresql >&2
		bin=$(bindir) || die "no initdb under /usr/lib/postgresql/*/bin after installing postgresql"
	fi
	[[ ! -e $dir/data ]] || die "$dir/data exists: a server was started there already"
	mkdir -p "$dir"
	if ((EUID == 0)); then
		getent passwd postgres >/dev/null || die "no user postgres to run the server as (Debian's postgresql package creates it)"
		chown postgres "$dir"
		chmod 755 "$dir"
	fi
	as_owner "$bin/initdb" -D "$dir/data" -U ctxcompact --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
		die "initdb failed: $(tail -n 20 "$dir/initdb.log")"
	port=$(free_port)
	echo "$bin" >"$dir/bindir"
	echo "$port" >"$dir/port"
	start "$port"
	url="postgres://ctxcompact@127.0.0.1:$port/postgres?sslmode=disable"
	echo "$url" >"$dir/url"
	echo "$url"
	;;
stop)
	[[ -f $dir/bindir ]] || exit 0
	bin=$(cat "$dir/bindir")
	as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
	rm -rf "$dir"
	;;
crash)
	bin=$(cat "$dir/bindir")
	as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
	;;
restart)
	bin=$(cat "$dir/bindir")
	start "$(cat "$dir/port")"
	;;
*)
	die "usage: pg-server.sh start|stop|crash|restart DIR"
	;;
esac
