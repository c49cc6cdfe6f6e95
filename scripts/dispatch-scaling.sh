#!/usr/bin/env bash
# How the 8-process dispatch throughput scales with executor_threads: for
# each N in $THREADS (default 1 2 4 8), start tileopsd with that many
# executor threads, run tileops-bench-dispatch --procs 8 --kernels 2000
# against it (with spin kernels of each length in $NS, default 5000 ns),
# stop it. GPU machine, binaries from scripts/gpu-pack.sh.
set -u
root=$PWD
[ -d "$root/.carry/bin" ] || tar -C "$root/.carry" -xJf "$root/.carry/pack.tar.xz"
export LD_LIBRARY_PATH=$root/.carry/lib
bin=$root/.carry/bin
run=/tmp/tileops-scaling
for n in ${THREADS:-1 2 4 8}; do
	rm -rf "$run" && mkdir -p "$run"
	printf 'executor_threads = %s\n' "$n" >"$run/conf"
	"$bin/tileopsd" --backend cuda --config "$run/conf" --listen "ipc://$run/d.sock" \
		--stats "ipc://$run/s.sock" --manifest "$root/.carry/manifest" \
		--ready-file "$run/pid" 2>"$run/log" &
	daemon=$!
	for _ in $(seq 1 100); do [ -s "$run/pid" ] && break; sleep 0.1; done
	for ns in ${NS:-5000}; do
		rate=$("$bin/tileops-bench-dispatch" --address "ipc://$run/d.sock" --procs 8 \
			--kernels 2000 --ns "$ns" 2>&1 | grep -o '"procs_kernels_per_s"[^}]*' |
			grep -o '"value":[0-9.e+]*')
		echo "executor_threads=$n 8 procs x 2000 spin kernels of $ns ns: $rate kernels/s"
	done
	kill -TERM "$daemon"
	wait "$daemon"
done
