#!/usr/bin/env bash
# test-install.sh [BUILD] - the Debian packages, installed for real: make
# them with CPack from the build folder BUILD (default $TILEOPS_BUILD or
# build; configured and built already, as scripts/test.sh leaves it),
# install them with dpkg -i, check the installed units with
# `systemd-analyze verify`, start the installed /usr/sbin/tileopsd on the
# CPU backend as the packaged user, build a client against the installed
# library through find_package(tileops) and through pkg-config (shared and
# static) and run each against that daemon, then purge the packages and
# check that nothing of them is left installed or running.
#
# Needs root and a Debian machine whose packages are those .ci/run
# installs (dpkg -i installs nothing else; the packages' dependencies must
# be there already). scripts/test.sh runs it when CI=true as root. It
# changes the machine (a user, /etc/tileops, /usr/sbin/tileopsd) until it
# purges the packages at the end, also when a step fails; the tileops user
# stays, as Debian leaves system users.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${1:-${TILEOPS_BUILD:-build}}
src=$PWD
step=start

fail() {
	echo "test-install.sh: FAILED at step '$step': $*" >&2
	exit 1
}
trap 'echo "test-install.sh: FAILED at step '"'"'$step'"'"' (line $LINENO: $BASH_COMMAND)" >&2' ERR

[ "$(id -u)" = 0 ] || fail "needs root (dpkg -i)"
[ -f "$build/CMakeCache.txt" ] || fail "$build is not a configured build folder (run scripts/build.sh $build)"
for t in cpack dpkg systemd-analyze pkg-config cc cmake; do
	command -v "$t" >/dev/null || fail "$t is not installed (see .ci/run)"
done

# /run/tileopsd is the package's only when it was not there before.
run_made=/run/tileopsd
[ -e /run/tileopsd ] && run_made=
work=$(mktemp -d /tmp/tileops-install.XXXXXX)
chmod 0755 "$work"
pid=
packages=(tileopsd libtileops0 libtileops-dev)

cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null || true
	fi
	for p in libtileops-dev libtileops0 tileopsd; do
		if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q installed; then
			dpkg -P "$p" >/dev/null 2>&1 || true
		fi
	done
	rm -rf "$work"
}
trap cleanup EXIT

# ---- packages: the build folder, installing to /usr ----------------------------
step=package
# A package installs to /usr: the library to the multiarch libdir that
# GNUInstallDirs picks for that prefix. Reconfiguring rebuilds only what
# names the prefix (the data folders' fallback paths).
{ cmake -S . -B "$build" -DCMAKE_INSTALL_PREFIX=/usr && cmake --build "$build" -j "$(nproc)"; } \
	>"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log" >&2; fail "building $build for /usr"; }
(cd "$build" && cpack -G DEB -B "$work/debs" >"$work/cpack.log" 2>&1) ||
	{ tail -n 30 "$work/cpack.log" >&2; fail "cpack"; }
debs=()
for p in "${packages[@]}"; do
	f=$(ls "$work/debs/${p}_"*.deb 2>/dev/null | head -n 1)
	[ -n "$f" ] || fail "cpack made no $p package (see $work/debs)"
	debs+=("$f")
done
echo "== packages: ${debs[*]##*/}"

# ---- install ----------------------------------------------------------------------
step="dpkg -i"
dpkg -i "${debs[@]}" || fail "dpkg -i"
for f in /usr/sbin/tileopsd /usr/bin/tileops-stat /etc/tileops/tileopsd.conf \
	/usr/share/tileops/manifest/elementwise.yaml /usr/share/tileops/gemm-tune-h200.txt \
	/usr/share/man/man8/tileopsd.8.gz /usr/include/tileops.h; do
	[ -e "$f" ] || [ -e "${f%.gz}" ] || fail "the packages installed no $f"
done
dpkg-query -W -f='${Conffiles}\n' tileopsd | grep -q /etc/tileops/tileopsd.conf ||
	fail "/etc/tileops/tileopsd.conf is not a conffile"
getent passwd tileops >/dev/null || fail "postinst made no tileops user"

step="systemd-analyze verify"
unitdir=$(pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null || echo /lib/systemd/system)
[ -f "$unitdir/tileopsd.service" ] || fail "no $unitdir/tileopsd.service"
[ -f "$unitdir/tileopsd@.service" ] || fail "no $unitdir/tileopsd@.service"
grep -q '^ExecStart=/usr/sbin/tileopsd --config /etc/tileops/tileopsd.conf' \
	"$unitdir/tileopsd.service" || fail "tileopsd.service does not start /usr/sbin/tileopsd with /etc/tileops/tileopsd.conf"
# Warnings about units it names that this machine lacks (the NVIDIA
# services) are not errors; anything systemd cannot parse is.
for u in tileopsd.service tileopsd@0.service; do
	out=$(systemd-analyze verify "$unitdir/$u" 2>&1) || { echo "$out" >&2; fail "systemd-analyze verify $u"; }
	if echo "$out" | grep -v -i "nvidia-persistenced" | grep -q .; then
		echo "$out" >&2
		fail "systemd-analyze verify $u printed warnings"
	fi
done
echo "== units verified"

# ---- the installed daemon, as the packaged user ---------------------------------
step="start tileopsd"
rundir=$work/run
mkdir "$rundir"
chown tileops:tileops "$rundir"
chmod 0750 "$rundir"
# setpriv execs the daemon itself, so $! is its pid (runuser would stay
# between, and answer SIGTERM itself).
as_tileops=(setpriv --reuid tileops --regid tileops --init-groups)
"${as_tileops[@]}" /usr/sbin/tileopsd --config /etc/tileops/tileopsd.conf --backend cpu \
	--listen "ipc://$rundir/tileopsd.sock" --ready-file "$rundir/ready" \
	</dev/null >"$work/tileopsd.log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do
	[ -s "$rundir/ready" ] && break
	kill -0 "$pid" 2>/dev/null || { cat "$work/tileopsd.log" >&2; fail "tileopsd exited during start-up"; }
	sleep 0.1
done
[ -s "$rundir/ready" ] || { cat "$work/tileopsd.log" >&2; fail "tileopsd was not ready within 20 s"; }
[ "$(cat "$rundir/ready")" = "$pid" ] || fail "the ready file names pid $(cat "$rundir/ready"), not $pid"
[ "$(stat -c %U "/proc/$pid")" = tileops ] || fail "tileopsd does not run as tileops"
grep -q "tuning table: .*/usr/share/tileops/gemm-tune-h200.txt" "$work/tileopsd.log" ||
	{ cat "$work/tileopsd.log" >&2; fail "the installed daemon names no shipped tuning table"; }
tileops-stat --check --address "ipc://$rundir/stats.sock" >/dev/null ||
	fail "tileops-stat --check: the stats socket beside the control socket does not answer"
address=ipc://$rundir/tileopsd.sock

# Clients run as the daemon's user: a session needs the daemon to open the
# client's arena, which a member of the group tileops (or that user) shares.
run_client() {
	"${as_tileops[@]}" "$@" "$address" || fail "$(basename "$1") against the installed daemon"
}

step="find_package client"
cmake -S tests/install -B "$work/client" -G Ninja >"$work/client.log" 2>&1 &&
	cmake --build "$work/client" >>"$work/client.log" 2>&1 ||
	{ cat "$work/client.log" >&2; fail "building tests/install with find_package(tileops)"; }
run_client "$work/client/client_shared"
run_client "$work/client/client_static"
ldd "$work/client/client_static" | grep -q libtileops && fail "client_static links libtileops.so"

step="pkg-config client"
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
cc -o "$work/pc_shared" tests/install/client.c $(pkg-config --cflags --libs tileops) ||
	fail "cc \$(pkg-config --cflags --libs tileops)"
run_client "$work/pc_shared"
# Every library of the static link from `pkg-config --static`, as archives:
# a missing one (nng's mbedTLS) is an undefined reference here.
# shellcheck disable=SC2046
cc -o "$work/pc_static" tests/install/client.c $(pkg-config --cflags tileops) \
	-Wl,-Bstatic $(pkg-config --static --libs tileops) -Wl,-Bdynamic ||
	fail "cc -Wl,-Bstatic \$(pkg-config --static --libs tileops)"
ldd "$work/pc_static" | grep -q -e libtileops -e libnng && fail "pc_static links shared libraries it should not"
run_client "$work/pc_static"
echo "== clients ran against the installed daemon"

step="stop tileopsd"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
[ "$rc" = 0 ] || { cat "$work/tileopsd.log" >&2; fail "tileopsd exited $rc after SIGTERM"; }

# ---- remove ---------------------------------------------------------------------
step="dpkg -P"
dpkg -r libtileops-dev libtileops0 tileopsd || fail "dpkg -r"
# Purge what -r left (conffiles; the packages without any are gone already).
for p in libtileops-dev libtileops0 tileopsd; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q config-files; then
		dpkg -P "$p" || fail "dpkg -P $p"
	fi
done
for f in /usr/sbin/tileopsd /etc/tileops/tileopsd.conf "$unitdir/tileopsd.service" \
	/usr/lib/x86_64-linux-gnu/libtileops.so.0 /usr/share/tileops /var/lib/tileops $run_made; do
	[ ! -e "$f" ] || fail "$f is left after dpkg -P"
done
if pgrep -x tileopsd -u tileops >/dev/null; then
	fail "a tileopsd of user tileops still runs after removal"
fi
echo "== install test passed"
