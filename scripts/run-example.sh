#!/usr/bin/env bash
# run-example.sh - install what is missing, build, start tileopsd (the GPU
# when there is one, else the CPU backend) on a private socket, run the
# example clients against it (tileops-example-mlp, then the tiny Llama model
# of tileops-example-llama), stop the daemon with SIGTERM, and exit with the
# first failing example's status (0 when both pass).
#
# Environment: TILEOPS_BUILD (default build) names the build folder.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${TILEOPS_BUILD:-build}

./scripts/deps.sh
TILEOPS_TARGETS="tileopsd tileops-example-mlp tileops-example-llama" ./scripts/build.sh "$build"

daemon=$build/daemon/tileopsd
example=$build/client/tileops-example-mlp
llama=$build/client/tileops-example-llama
for f in "$daemon" "$example" "$llama"; do
	[ -x "$f" ] || { echo "run-example.sh: $f was not built" >&2; exit 1; }
done

rundir=$(mktemp -d /tmp/tileops-example.XXXXXX)
log=$rundir/tileopsd.log
pid=

cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$rundir"
}
trap cleanup EXIT

"$daemon" --backend auto \
	--listen "ipc://$rundir/tileopsd.sock" \
	--stats "ipc://$rundir/stats.sock" \
	--manifest "$PWD/manifest" \
	--ready-file "$rundir/tileopsd.pid" \
	</dev/null 2>"$log" &
pid=$!

for _ in $(seq 1 200); do
	[ -s "$rundir/tileopsd.pid" ] && break
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "run-example.sh: tileopsd exited during start-up:" >&2
		cat "$log" >&2
		exit 1
	fi
	sleep 0.1
done
if [ ! -s "$rundir/tileopsd.pid" ]; then
	echo "run-example.sh: tileopsd was not ready within 20 s:" >&2
	tail -n 40 "$log" >&2
	exit 1
fi
grep -m1 -i 'backend' "$log" || true

status=0
TILEOPS_ADDRESS="ipc://$rundir/tileopsd.sock" "$example" || status=$?
if [ "$status" -eq 0 ]; then
	TILEOPS_ADDRESS="ipc://$rundir/tileopsd.sock" "$llama" --tiny || status=$?
fi

kill -TERM "$pid"
daemon_status=0
wait "$pid" || daemon_status=$?
pid=
if [ "$daemon_status" -ne 0 ]; then
	echo "run-example.sh: tileopsd exited with status $daemon_status after SIGTERM:" >&2
	tail -n 40 "$log" >&2
fi
exit "$status"
