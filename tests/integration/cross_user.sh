#!/usr/bin/env bash
# cross_user.sh TILEOPSD CLIENT MANIFEST - admission between users, as
# docs/operations.md describes it: tileopsd runs as its own user, a serving
# user added to the daemon's group with `usermod -aG` (its primary group is
# its own, its umask 077) opens a session and runs ops; a user outside the
# group is refused with TILEOPS_ERR_PERMISSION and a message naming
# allow_group. CLIENT is tileops-example-mlp. Needs root to add the users
# (CI runs as root); otherwise it exits 77, which ctest reports as skipped.
set -euo pipefail
daemon_bin=${1:?usage: cross_user.sh TILEOPSD CLIENT MANIFEST}
client_bin=${2:?}
manifest=${3:?}

if [ "$(id -u)" != 0 ] || ! command -v useradd >/dev/null || ! command -v setpriv >/dev/null; then
	echo "cross_user.sh: needs root, useradd and setpriv; skipped"
	exit 77
fi

group=tileops-xu
duser=tileops-xu-daemon
inuser=tileops-xu-in
outuser=tileops-xu-out
work=$(mktemp -d /tmp/tileops-xu.XXXXXX)
pids=()

cleanup() {
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	for u in "$duser" "$inuser" "$outuser"; do
		userdel "$u" >/dev/null 2>&1 || true
		groupdel "$u" >/dev/null 2>&1 || true
	done
	groupdel "$group" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
cleanup_users_first() {
	for u in "$duser" "$inuser" "$outuser"; do
		userdel "$u" >/dev/null 2>&1 || true
		groupdel "$u" >/dev/null 2>&1 || true
	done
	groupdel "$group" >/dev/null 2>&1 || true
}
cleanup_users_first

groupadd "$group"
useradd -M -N -g "$group" -s /usr/sbin/nologin "$duser"
useradd -M -U -s /usr/sbin/nologin "$inuser"
usermod -aG "$group" "$inuser"
useradd -M -U -s /usr/sbin/nologin "$outuser"

# What the users run must be theirs to read and execute.
chmod 755 "$work"
cp "$daemon_bin" "$work/tileopsd"
cp "$client_bin" "$work/client"
cp -r "$manifest" "$work/manifest"
chmod -R a+rX "$work"

# start NAME SOCKET_MODE: a daemon as $duser; sets addr.
start() {
	local name=$1 mode=$2 run=$work/$1
	mkdir -p "$run"
	chown "$duser:$group" "$run"
	chmod 755 "$run"
	printf 'allow_group = %s\nsocket_mode = %s\n' "$group" "$mode" >"$run/conf"
	chmod 644 "$run/conf"
	setpriv --reuid="$duser" --regid="$group" --init-groups \
		"$work/tileopsd" --backend cpu --config "$run/conf" --manifest "$work/manifest" \
		--listen "ipc://$run/d.sock" --stats "ipc://$run/s.sock" \
		--ready-file "$run/ready" --log-level info >"$run/log" 2>&1 &
	pids+=($!)
	for _ in $(seq 1 200); do
		[ -s "$run/ready" ] && break
		sleep 0.05
	done
	[ -s "$run/ready" ] || { cat "$run/log"; echo "cross_user.sh: $name did not start"; exit 1; }
	addr=ipc://$run/d.sock
}

# as USER: the client as USER, with umask 077 (no group bits by default).
as() {
	local user=$1
	setpriv --reuid="$user" --regid="$user" --init-groups \
		sh -c "umask 077; TILEOPS_ADDRESS='$addr' exec '$work/client'" 2>&1
}

fail=0
start production 0660
echo "== a member of $group (supplementary), umask 077, socket mode 0660"
if out=$(as "$inuser"); then
	echo "$out" | tail -n 3
	echo "$out" | grep -q PASS || { echo "FAIL: no PASS from the member"; fail=1; }
else
	echo "$out" | tail -n 5
	echo "FAIL: the member of $group could not run the example"
	fail=1
fi

start open 0666
echo "== a user outside $group, socket mode 0666 (so the Hello reaches the daemon)"
if out=$(as "$outuser"); then
	echo "$out" | tail -n 3
	echo "FAIL: a user outside $group ran ops"
	fail=1
else
	echo "$out" | tail -n 3
	echo "$out" | grep -qi 'permission' || { echo "FAIL: not a permission error"; fail=1; }
	echo "$out" | grep -q 'allow_group' || { echo "FAIL: the message does not name allow_group"; fail=1; }
fi
if ! grep -q "refused a session" "$work/open/log"; then
	echo "FAIL: the daemon's log does not record the refusal"
	fail=1
fi
[ $fail = 0 ] && echo "cross-user admission: ok"
exit $fail
