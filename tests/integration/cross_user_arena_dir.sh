#!/usr/bin/env bash
# cross_user_arena_dir.sh TILEOPSD CLIENT MANIFEST - arenas in the daemon's
# arena_dir between users: tileopsd runs as its own user with
# `arena_dir = arenas`; a member of its group by `usermod -aG` (primary
# group its own, umask 077), with a /dev/shm of its own so that only the
# folder can carry its arena, runs ops (libtileops finds the folder beside
# the socket and gives its file the socket's group); the folder is sticky,
# so another member cannot remove that user's arena. CLIENT is
# tileops-example-mlp. Needs root (users, mount namespaces); otherwise it
# exits 77, which ctest reports as skipped.
set -euo pipefail
daemon_bin=${1:?usage: cross_user_arena_dir.sh TILEOPSD CLIENT MANIFEST}
client_bin=${2:?}
manifest=${3:?}

if [ "$(id -u)" != 0 ] || ! command -v useradd >/dev/null || ! command -v setpriv >/dev/null ||
	! unshare -m --propagation private true 2>/dev/null; then
	echo "cross_user_arena_dir.sh: needs root, useradd, setpriv and unshare; skipped"
	exit 77
fi

group=tileops-ad
duser=tileops-ad-daemon
member=tileops-ad-in
other=tileops-ad-in2
work=$(mktemp -d /tmp/tileops-ad.XXXXXX)
dpid=""

remove_users() {
	for u in "$duser" "$member" "$other"; do
		userdel "$u" >/dev/null 2>&1 || true
		groupdel "$u" >/dev/null 2>&1 || true
	done
	groupdel "$group" >/dev/null 2>&1 || true
}
cleanup() {
	if [ -n "$dpid" ]; then
		kill -TERM "$dpid" 2>/dev/null || true
		wait "$dpid" 2>/dev/null || true
	fi
	remove_users
	rm -rf "$work"
}
trap cleanup EXIT
remove_users

groupadd "$group"
useradd -M -N -g "$group" -s /usr/sbin/nologin "$duser"
for u in "$member" "$other"; do
	useradd -M -U -s /usr/sbin/nologin "$u"
	usermod -aG "$group" "$u"
done

chmod 755 "$work"
cp "$daemon_bin" "$work/tileopsd"
cp "$client_bin" "$work/client"
cp -r "$manifest" "$work/manifest"
chmod -R a+rX "$work"
run=$work/run
mkdir "$run"
chown "$duser:$group" "$run"
chmod 0750 "$run"
printf 'allow_group = %s\nsocket_mode = 0660\narena_dir = arenas\n' "$group" >"$work/conf"
chmod 644 "$work/conf"

setpriv --reuid="$duser" --regid="$group" --init-groups \
	"$work/tileopsd" --backend cpu --config "$work/conf" --manifest "$work/manifest" \
	--listen "ipc://$run/d.sock" --stats "ipc://$run/s.sock" \
	--ready-file "$run/ready" --log-level info >"$work/log" 2>&1 &
dpid=$!
for _ in $(seq 1 200); do
	[ -s "$run/ready" ] && break
	sleep 0.05
done
[ -s "$run/ready" ] || { cat "$work/log"; echo "FAIL: the daemon did not start"; exit 1; }

fail=0
mode=$(stat -c '%a %G' "$run/arenas")
echo "== the arena folder: $mode"
[ "$mode" = "1770 $group" ] || { echo "FAIL: expected '1770 $group'"; fail=1; }

echo "== a member (supplementary group, umask 077) with a private /dev/shm"
if out=$(unshare -m --propagation private sh -c '
	mount -t tmpfs tmpfs /dev/shm &&
	exec setpriv --reuid="$0" --regid="$0" --init-groups \
		sh -c "umask 077; TILEOPS_ADDRESS=ipc://$1/d.sock exec $2"' \
	"$member" "$run" "$work/client" 2>&1); then
	echo "$out" | tail -n 2
	echo "$out" | grep -q PASS || { echo "FAIL: no PASS from the member"; fail=1; }
else
	echo "$out" | tail -n 5
	echo "FAIL: the member could not run ops through the arena folder"
	fail=1
fi

echo "== the sticky folder: another member cannot remove the member's arena"
setpriv --reuid="$member" --regid="$member" --init-groups \
	sh -c "umask 077; : >'$run/arenas/tileops-mine'"
if setpriv --reuid="$other" --regid="$other" --init-groups \
	rm -f "$run/arenas/tileops-mine" 2>/dev/null && [ ! -e "$run/arenas/tileops-mine" ]; then
	echo "FAIL: another member removed the member's file"
	fail=1
fi
rm -f "$run/arenas/tileops-mine"

[ $fail = 0 ] && echo "arena folder between users: ok"
exit $fail
