#!/usr/bin/env bash
# check_kernels_l1.sh SOURCE_DIR - kernels/ is L1 (DESIGN.md): arithmetic on
# arguments already checked, no I/O, no environment, no stream waits.
#
#   - no source under kernels/ reads or writes the environment (getenv,
#     setenv, unsetenv, putenv) or opens a file or a pipe (fopen, freopen,
#     popen, open): what is policy reaches the kernels as arguments
#     (tk_call.choice, tk_cuda_set_pdl);
#   - only the measuring functions (*_measure.cu, never called from a
#     launch) synchronize a stream, an event or the device.
#
# Comments count too: a comment naming getenv is as wrong as a call.
set -euo pipefail
cd "${1:?usage: check_kernels_l1.sh SOURCE_DIR}"
bad=0
files=$(find kernels -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
for f in $files; do
	if grep -nE '\b(secure_)?getenv\b|\b(un)?setenv\b|\bputenv\b|\bf?re?open\b|\bfopen\b|\bpopen\b|\bopen[[:space:]]*\(' "$f"; then
		echo "$f: the kernels read no environment and open no file (tests/layout/check_kernels_l1.sh)"
		bad=1
	fi
	case $f in
	*_measure.cu) ;;
	*)
		if grep -nE 'cuda(Stream|Device|Event)Synchronize' "$f"; then
			echo "$f: a kernel synchronizes; only *_measure.cu may (tests/layout/check_kernels_l1.sh)"
			bad=1
		fi
		;;
	esac
done
if [ "$bad" = 0 ]; then
	echo "kernels/: no environment, no files, no waits outside the measuring functions"
fi
exit "$bad"
