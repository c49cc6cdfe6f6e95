#!/usr/bin/env bash
# stat_watch_live.sh TILEOPSD TILEOPS_STAT CLIENT MANIFEST - tileops-stat
# --watch against a real daemon (CPU backend): while CLIENT
# (tileops-test-adds) runs adds, the second frame must show the interval's
# add rate and its p50/p99 taken from the daemon's own histogram, and a
# frame shows the client's session. Canned documents test the arithmetic (test_stat_watch.c);
# this holds the view to what tileopsd really writes.
set -euo pipefail

tileopsd=$1 stat=$2 client=$3 manifest=$4
dir=$(mktemp -d /tmp/tileops-watch-XXXXXX)
daemon= load=
cleanup() {
	# The client loop first, with the client it is running, so that nothing
	# outlives the test holding its output open; then the daemon.
	touch "$dir/stop"
	if [ -n "$load" ]; then
		pkill -TERM -P "$load" 2>/dev/null || true
		kill "$load" 2>/dev/null || true
		wait "$load" 2>/dev/null || true
	fi
	if [ -n "$daemon" ]; then
		kill "$daemon" 2>/dev/null || true
		wait "$daemon" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT

"$tileopsd" --backend cpu --manifest "$manifest" --listen "ipc://$dir/tileopsd.sock" \
	--stats "ipc://$dir/stats.sock" --ready-file "$dir/pid" 2>"$dir/log" &
daemon=$!
for _ in $(seq 100); do [ -s "$dir/pid" ] && break; sleep 0.1; done
[ -s "$dir/pid" ] || { echo "stat_watch_live: tileopsd did not start:"; cat "$dir/log"; exit 1; }

# Adds for the whole watch (two frames one second apart), until told to stop:
# one client's session lives through both frames (a client of a few thousand
# adds spends much of its life connecting and closing, more so under the
# sanitizers, and both frames could fall between two clients).
while [ ! -e "$dir/stop" ]; do "$client" "ipc://$dir/tileopsd.sock" 200000 watched || break; done &
load=$!
sleep 0.3
"$stat" --address "ipc://$dir/stats.sock" --watch 1 --count 2 >"$dir/out"
cat "$dir/out"

# The add row of the second frame: op ops/s err/s p50 p99 max<= ...
row=$(awk '/^last /{f=1} f && $1 == "add" {print; exit}' "$dir/out")
[ -n "$row" ] || { echo "stat_watch_live: no add row in the interval frame"; exit 1; }
read -r _ rate _ p50 p99 _ <<<"$row"
for v in "$rate" "$p50" "$p99"; do
	[[ $v =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "stat_watch_live: '$v' in '$row' is not a number"; exit 1; }
done
awk -v r="$rate" 'BEGIN { exit !(r > 0) }' || { echo "stat_watch_live: add rate $rate"; exit 1; }
awk '$2 == "watched" {found=1} END {exit !found}' "$dir/out" ||
	{ echo "stat_watch_live: no session block naming the client"; exit 1; }
echo "stat_watch_live: add at $rate/s, p50 $p50 us, p99 $p99 us"
