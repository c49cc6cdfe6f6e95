#!/usr/bin/env bash
# test-operations.sh [BUILD] - docs/operations.md followed literally: the
# shell blocks of its section "From the packages to a scraped metric" are
# run as written, in order, in a folder holding the packages CPack makes
# from BUILD (configured for /usr and built, as scripts/test-install.sh
# leaves it). Then the output must show the smoke client's PASS, a
# non-zero tileopsd_ops_total for its GEMMs on the scraped page and
# tileopsd_ready 1, and no daemon may be left running. The packages are
# purged at the end, also when a step fails.
#
# Needs root and a disposable Debian machine (it installs the packages
# and starts the daemon from them); scripts/test.sh runs it when CI=true as
# root, after test-install.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${1:-${TILEOPS_BUILD:-build}}
doc=docs/operations.md
section="## From the packages to a scraped metric"

fail() {
	echo "test-operations.sh: FAILED: $*" >&2
	exit 1
}
[ "$(id -u)" = 0 ] || fail "needs root (dpkg -i)"
[ -f "$build/CMakeCache.txt" ] || fail "$build is not a configured build folder"

work=$(mktemp -d /tmp/tileops-operations.XXXXXX)
# The daemon the walkthrough starts, and only that one (other daemons of
# the machine are not this test's).
walk_daemon() {
	pgrep -f -- "^tileopsd --config /etc/tileops/tileopsd.conf" 2>/dev/null || true
}
cleanup() {
	for p in $(walk_daemon); do kill -KILL "$p" 2>/dev/null || true; done
	for p in libtileops-dev libtileops0 tileopsd; do
		if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q -e installed -e config-files; then
			dpkg -P "$p" >/dev/null 2>&1 || true
		fi
	done
	rm -rf "$work" /var/log/tileopsd.log
}
trap cleanup EXIT

# The section's ```sh blocks, in order, as one script.
awk -v sec="$section" '
	$0 == sec { in_sec = 1; next }
	in_sec && /^## / { exit }
	in_sec && /^```sh$/ { in_block = 1; blocks++; next }
	in_sec && in_block && /^```$/ { in_block = 0; next }
	in_sec && in_block { print }
	END { if (blocks < 3) exit 1 }
' "$doc" >"$work/walkthrough.sh" || fail "$doc has no section '$section' with its shell blocks"
echo "== $(grep -c . "$work/walkthrough.sh") lines from $doc ('${section#\#\# }')"

(cd "$build" && cpack -G DEB -B "$work/debs" >"$work/cpack.log" 2>&1) ||
	{ tail -n 30 "$work/cpack.log" >&2; fail "cpack"; }
rm -rf "$work/debs/_CPack_Packages"

# As an operator types it: in the packages' folder, stopping at the first
# failing command.
rc=0
(cd "$work/debs" && timeout 300 bash -euo pipefail -x "$work/walkthrough.sh") >"$work/out" 2>&1 || rc=$?
cat "$work/out"
[ -f /var/log/tileopsd.log ] && { echo "== /var/log/tileopsd.log"; cat /var/log/tileopsd.log; }
[ "$rc" = 0 ] || fail "the walkthrough exited $rc (its commands are traced above)"

grep -q "PASS" "$work/out" || fail "tileops-example-mlp printed no PASS"
grep -Eq '^tileopsd_ops_total\{op="gemm"\} [1-9][0-9]*$' "$work/out" ||
	fail "the scraped page has no non-zero tileopsd_ops_total{op=\"gemm\"}"
grep -Eq '^tileopsd_ready 1$' "$work/out" || fail "the scraped page does not say tileopsd_ready 1"
if [ -n "$(walk_daemon)" ]; then
	fail "the walkthrough's tileopsd still runs after its stop step"
fi
echo "== operations walkthrough passed"
