#!/usr/bin/env bash
# apt-install.sh PKG...: install Debian packages the tests need (chromium, for the
# headless browser tests) with apt-get: the one place build.sh and
# bindings/js/test.sh call it. Needs Debian's apt-get and root, or sudo without a
# password; without them it fails naming the packages to install first.
#
# It waits for another apt-get or dpkg (another build, unattended-upgrades) instead
# of failing on its lock: -o DPkg::Lock::Timeout makes `install` wait for the dpkg
# frontend lock, but apt 2.6 (Debian 12) does not apply it to the lists lock of
# `update` nor to the archives lock, so a call that fails on a held lock ("Could
# not get lock") is retried until the same deadline.
#   CTXCOMPACT_APT_LOCK_TIMEOUT  seconds to wait for the locks in all (default 600)
#   CTXCOMPACT_APT_RETRY_INTERVAL  seconds between retries (default 2)
set -euo pipefail

die() {
	echo "apt-install.sh: $*" >&2
	exit 1
}
(($# > 0)) || die "usage: apt-install.sh PKG..."
wait_s=${CTXCOMPACT_APT_LOCK_TIMEOUT:-600}
retry_s=${CTXCOMPACT_APT_RETRY_INTERVAL:-2}
command -v apt-get >/dev/null ||
	die "installing $* needs Debian's apt-get (not found); install $* yourself first"
as=()
if ((EUID != 0)); then
	command -v sudo >/dev/null && sudo -n true 2>/dev/null ||
		die "installing $* needs root (or sudo without a password); run as root, or install $* first"
	as=(sudo -n)
fi

deadline=$((SECONDS + wait_s))
# apt_get ARGS...: apt-get ARGS, non-interactive, quiet on success (warnings shown),
# retried while another process holds one of apt's locks and time is left.
apt_get() {
	local err left noted=
	while :; do
		left=$((deadline - SECONDS))
		((left > 0)) || left=0
		if err=$("${as[@]}" env DEBIAN_FRONTEND=noninteractive \
			apt-get -o DPkg::Lock::Timeout="$left" -qq "$@" 2>&1 >/dev/null); then
			[[ -z "$err" ]] || echo "$err" >&2
			return 0
		fi
		if [[ "$err" == *"Could not get lock"* ]] && ((SECONDS < deadline)); then
			[[ -n "$noted" ]] || echo "apt-install.sh: apt-get $1: waiting for another apt-get or dpkg (up to ${left}s): $(grep -m1 'Could not get lock' <<<"$err")" >&2
			noted=1
			sleep "$retry_s"
			continue
		fi
		echo "$err" >&2
		die "apt-get $* failed"
	done
}

echo "apt-install.sh: installing $* (apt)" >&2
apt_get update
apt_get install -y "$@"
