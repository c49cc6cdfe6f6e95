#!/usr/bin/env bash
# check_install_tree.sh BUILD - `cmake --install` of the build folder BUILD
# puts every file where the prefix installed to wants it:
#   --prefix DIR: everything under DIR (config in DIR/etc/tileops, units in
#     DIR/lib/systemd/system naming DIR's paths), and the tree still works
#     once moved (the daemon finds its manifest beside itself; tileops.pc
#     and the CMake package are relative);
#   --prefix /usr (staged with DESTDIR): the config in /etc/tileops, not
#     /usr/etc, and the unit's ExecStart and --config agree with that.
set -euo pipefail

build=$1
tmp=$(mktemp -d /tmp/tileops-tree.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

fail() {
	echo "check_install_tree: $*" >&2
	exit 1
}

cmake --install "$build" --prefix "$tmp/a" >"$tmp/a.log" 2>&1 || { cat "$tmp/a.log" >&2; fail "cmake --install --prefix $tmp/a"; }
for f in sbin/tileopsd bin/tileops-stat etc/tileops/tileopsd.conf etc/tileops/warmup.yaml \
	share/tileops/gemm-tune-h200.txt share/tileops/manifest/elementwise.yaml \
	lib/systemd/system/tileopsd.service lib/systemd/system/tileopsd@.service \
	lib/sysusers.d/tileopsd.conf lib/tmpfiles.d/tileopsd.conf include/tileops.h \
	share/man/man8/tileopsd.8 share/man/man1/tileops-stat.1; do
	[ -e "$tmp/a/$f" ] || fail "--prefix $tmp/a installed no $f"
done
grep -qx "ExecStart=$tmp/a/sbin/tileopsd --config $tmp/a/etc/tileops/tileopsd.conf" \
	"$tmp/a/lib/systemd/system/tileopsd.service" || fail "tileopsd.service does not name $tmp/a's paths"
pc=$(find "$tmp/a" -name tileops.pc | head -n 1)
cfg=$(find "$tmp/a" -name tileops-config.cmake | head -n 1)
[ -n "$pc" ] && [ -n "$cfg" ] || fail "no tileops.pc or tileops-config.cmake installed"

mv "$tmp/a" "$tmp/b"
"$tmp/b/sbin/tileopsd" --help | grep -q -- "(default $tmp/b/share/tileops/manifest)" ||
	fail "the moved tileopsd does not find its manifest beside itself"
"$tmp/b/sbin/tileopsd" --check --config "$tmp/b/etc/tileops/tileopsd.conf" >/dev/null ||
	fail "the moved tileopsd rejects its own config and manifest"
pcdir=$(dirname "${pc/#$tmp\/a/$tmp/b}")
inc=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags tileops | tr -d " ")
[ -f "${inc#-I}/tileops.h" ] || fail "the moved tileops.pc points at $inc, where there is no tileops.h"

DESTDIR=$tmp/d cmake --install "$build" --prefix /usr >"$tmp/d.log" 2>&1 || { cat "$tmp/d.log" >&2; fail "cmake --install --prefix /usr"; }
[ -f "$tmp/d/etc/tileops/tileopsd.conf" ] || fail "--prefix /usr put no config in /etc/tileops"
[ ! -e "$tmp/d/usr/etc" ] || fail "--prefix /usr made /usr/etc"
unit=$(find "$tmp/d" -name tileopsd.service | head -n 1)
[ -n "$unit" ] || fail "--prefix /usr installed no tileopsd.service"
grep -qx "ExecStart=/usr/sbin/tileopsd --config /etc/tileops/tileopsd.conf" "$unit" ||
	fail "$unit does not start /usr/sbin/tileopsd with /etc/tileops/tileopsd.conf"
[ -x "$tmp/d/usr/sbin/tileopsd" ] || fail "--prefix /usr installed no /usr/sbin/tileopsd"
echo "check_install_tree: both installs are where their prefix wants them"
