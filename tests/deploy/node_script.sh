#!/usr/bin/env bash
# node_script.sh SCRIPT TILEOPSD STAT CLIENT MANIFEST - deploy/k8s/tileopsd-node.sh on the
# CPU backend with two "GPUs": both daemons become ready (its --ready probe),
# a client with nothing but TILEOPS_ADDRESS set runs ops on GPU 1 through the
# arena folder beside that socket, SIGHUP reaches both daemons, a daemon that
# dies takes the container down with its exit status (the other stopped),
# and SIGTERM stops both with status 0.
set -euo pipefail
script=${1:?usage: node_script.sh SCRIPT TILEOPSD STAT CLIENT MANIFEST}
daemon_bin=${2:?}
stat_bin=${3:?}
client_bin=${4:?}
manifest=${5:?}

work=$(mktemp -d /tmp/tileops-node.XXXXXX)
node_pid=""
cleanup() {
	pkill_children
	[ -n "$node_pid" ] && kill -KILL "$node_pid" 2>/dev/null || true
	rm -rf "$work"
}
# The daemons this test started, even when the script died before them:
# every process whose command line names this test's own config file.
pkill_children() {
	local p
	for p in $(pgrep -f -- "$work/tileopsd.conf" 2>/dev/null || true); do
		kill -KILL "$p" 2>/dev/null || true
	done
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	echo "--- the script's log:"
	cat "$work/log" || true
	exit 1
}

printf 'backend = cpu\narena_dir = arenas\n' >"$work/tileopsd.conf"
export TILEOPS_RUN_DIR=$work/run TILEOPS_CONFIG=$work/tileopsd.conf TILEOPS_GPUS=2
export TILEOPSD=$daemon_bin TILEOPS_STAT=$stat_bin
mkdir -p "$work/run"

start() {
	"$script" --manifest "$manifest" >"$work/log" 2>&1 &
	node_pid=$!
	for _ in $(seq 1 200); do
		"$script" --ready 2>/dev/null && return 0
		kill -0 "$node_pid" 2>/dev/null || fail "the script exited during start-up"
		sleep 0.1
	done
	fail "the daemons were not ready within 20 s"
}

# wait_exit SECONDS: the script's exit status in rc, or fail when it still runs.
wait_exit() {
	for _ in $(seq 1 $(($1 * 10))); do
		if ! kill -0 "$node_pid" 2>/dev/null; then
			rc=0
			wait "$node_pid" || rc=$?
			node_pid=""
			return 0
		fi
		sleep 0.1
	done
	fail "the script still runs after $1 s"
}

echo "== two daemons, probes"
start
[ "$(cat "$work/run/gpus")" = " 0 1" ] || fail "gpus file: '$(cat "$work/run/gpus")'"
"$script" --alive || fail "--alive failed on running daemons"
for i in 0 1; do
	[ -S "$work/run/gpu$i/tileopsd.sock" ] || fail "no control socket for GPU $i"
	[ -d "$work/run/gpu$i/arenas" ] || fail "no arena folder for GPU $i"
done

echo "== a client with only TILEOPS_ADDRESS, on GPU 1"
# As root, with a /dev/shm of its own (as in a pod without hostIPC): only
# the arena folder beside the socket can work then.
private=()
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
	unshare -m --propagation private true 2>/dev/null; then
	private=(unshare -m --propagation private sh -c 'mount -t tmpfs tmpfs /dev/shm && exec "$0"')
	echo "(the client has a private /dev/shm)"
fi
out=$(env -i PATH=/usr/bin:/bin TILEOPS_ADDRESS="ipc://$work/run/gpu1/tileopsd.sock" \
	"${private[@]}" "$client_bin" 2>&1) || fail "the client failed: $out"
echo "$out" | tail -n 2
echo "$out" | grep -q PASS || fail "no PASS from the client"

echo "== SIGHUP reaches both daemons"
kill -HUP "$node_pid"
for _ in $(seq 1 50); do
	[ "$(grep -c 'SIGHUP' "$work/log")" -ge 2 ] && break
	sleep 0.1
done
[ "$(grep -c 'SIGHUP' "$work/log")" -ge 2 ] || fail "not both daemons reloaded"

echo "== one daemon dies: the container exits with its status"
victim=$(pgrep -P "$node_pid" -f -- '--device 0' | head -n 1 || true)
other=$(pgrep -P "$node_pid" -f -- '--device 1' | head -n 1 || true)
[ -n "$victim" ] && [ -n "$other" ] || fail "cannot find the daemons' pids"
kill -KILL "$victim"
wait_exit 40
[ "$rc" = 137 ] || fail "exit status $rc, expected 137 (the killed daemon's)"
kill -0 "$other" 2>/dev/null && fail "the daemon of GPU 1 still runs"
grep -q "GPU 0 exited with status 137" "$work/log" || fail "the log does not name the dead daemon"

echo "== SIGTERM stops both, status 0"
start
kill -TERM "$node_pid"
wait_exit 40
[ "$rc" = 0 ] || fail "exit status $rc after SIGTERM, expected 0"
[ -e "$work/run/gpus" ] && fail "the gpus file was left behind"
if "$script" --ready 2>/dev/null; then
	fail "--ready succeeds with no daemon"
fi
echo "tileopsd-node.sh: ok"
