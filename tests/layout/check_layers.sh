#!/usr/bin/env bash
# check_layers.sh SOURCE_DIR - every #include runs down the layers.
#
# The layers, bottom up (README.md, "Layout"):
#   proto                       wire messages, ring layout, the codes list
#   kernels                     L1: sees proto/tileops_codes.h and itself
#   daemon/base                 logging, stats, the arena
#   daemon/ops, daemon/backends the op layer; where kernels run
#   daemon/policy               the tuning table
#   daemon/wire                 requests decoded from either plane
#   daemon/exec                 the device side of sessions (no wire types)
#   daemon/front, daemon/main.c the loop and the command line
#   client                      libtileops: sees proto only
#   tools, tests                may look at anything below them
# Inside the daemon only the L1 interface (tileops_kernels.h) is visible of
# the kernels, and nothing of the client (its public header included).
# Headers are included by file name, so each name is mapped to the folder
# that holds it; a name that is not the project's is a system header.
set -euo pipefail
root=${1:?usage: check_layers.sh SOURCE_DIR}
cd "$root"

# The project's files: tracked or new, not ignored, still there.
sources() {
	git ls-files --cached --others --exclude-standard "$@" | while IFS= read -r f; do
		[ -f "$f" ] && printf '%s\n' "$f"
	done
}

declare -A where
while IFS= read -r f; do
	where[$(basename "$f")]=$(dirname "$f")
done < <(sources '*.h' '*.cuh' '*.inc')
# Generated at build time.
where[tileops.pb-c.h]=proto
where[tk_ops.h]=kernels/generated
where[tk_kernel_table.inc]=kernels/generated

# The folders a file in folder $1 may include from (prefix match).
allowed() {
	case $1 in
	proto*) echo "proto" ;;
	kernels*) echo "kernels proto/tileops_codes.h" ;;
	daemon/base*) echo "daemon/base proto kernels/tileops_kernels.h" ;;
	daemon/ops*) echo "daemon/ops daemon/base proto kernels/tileops_kernels.h" ;;
	daemon/backends*) echo "daemon/backends daemon/base proto kernels/tileops_kernels.h" ;;
	daemon/policy*) echo "daemon/policy daemon/ops daemon/base proto kernels/tileops_kernels.h" ;;
	daemon/wire*) echo "daemon/wire daemon/base proto kernels/tileops_kernels.h" ;;
	daemon/exec*) echo "daemon/exec daemon/wire/request.h daemon/wire/sqe.h daemon/policy daemon/ops daemon/backends daemon/base proto/tileops_codes.h proto/tileops_ring.h kernels/tileops_kernels.h" ;;
	daemon/front* | daemon) echo "daemon proto kernels/tileops_kernels.h" ;;
	client*) echo "client proto" ;;
	tools* | tests*) echo "." ;;
	*) echo "" ;;
	esac
}

bad=0
while IFS= read -r src; do
	dir=$(dirname "$src")
	ok=$(allowed "$dir")
	[ "$ok" = "." ] && continue
	while IFS= read -r inc; do
		name=$(basename "$inc")
		target=${where[$name]:-}
		[ -z "$target" ] && continue # a system header
		path=$target/$name
		pass=0
		for a in $ok; do
			case $path in
			"$a" | "$a"/*) pass=1 ;;
			esac
		done
		if [ $pass = 0 ]; then
			echo "$src: includes \"$inc\" ($path), which is above or beside its layer (allowed: $ok)"
			bad=1
		fi
	done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$src")
done < <(sources '*.c' '*.h' '*.cu' '*.cuh' | grep -v '^tests/\|^tools/')

if [ $bad = 0 ]; then
	echo "every include runs down the layers"
fi
exit $bad
