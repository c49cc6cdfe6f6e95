#!/usr/bin/env bash
# How the many-process dispatch throughput depends on the daemon's
# configuration and the clients' waiting: for each entry of $CONFIGS, start
# tileopsd with those config keys, run tileops-bench-dispatch --procs 8
# --kernels 2000 against it $RUNS times (default 3) for each spin-kernel
# length in $NS (default 5000 ns), stop it. GPU machine, binaries from
# scripts/gpu-pack.sh.
#
# CONFIGS: entries separated by spaces, each a comma-separated list of
# key=value (config keys, docs/operations.md), env:NAME=value for the
# clients' environment (TILEOPS_SPIN_US), denv:NAME=value for the daemon's
# (CUDA_DEVICE_MAX_CONNECTIONS), carg:ARG for an argument of the clients
# (carg:--reap=32), dcpu:LIST and ccpu:LIST to run the daemon and the clients
# on those CPUs (taskset -c LIST, e.g. dcpu:0-7), or "default".
# Example:
#   CONFIGS="default executor_threads=4 stats_sample=0 env:TILEOPS_SPIN_US=0"
# Prints one line per run and a median per entry; also to $OUT/scaling.txt
# when OUT is set.
set -u
root=$PWD
# The packed binaries (scripts/gpu-pack.sh): TILEOPS_PACK, else .carry/.
pack=${TILEOPS_PACK:-$root/.carry}
[ -d "$pack/bin" ] || tar -C "$pack" -xJf "$pack/pack.tar.xz"
export LD_LIBRARY_PATH=$pack/lib
bin=$pack/bin
# TILEOPSD: another daemon binary to sweep (default: the packed one).
daemon_bin=${TILEOPSD:-$bin/tileopsd}
run=/tmp/tileops-scaling
procs=${PROCS:-8}
# API_MODE (pipelined, sync, windowed or plan) runs the serving-engine calls
# of tileops-bench-dispatch --api instead of the windowed spin kernels.
api=${API_MODE:-}
report=${OUT:+$OUT/scaling.txt}
report=${report:-/dev/null}
# Each run's per-process finish times and each session's executor thread.
detail=${OUT:+$OUT/scaling-procs.txt}
detail=${detail:-/dev/null}
[ -n "${OUT:-}" ] && mkdir -p "$OUT"
say() { echo "$*" | tee -a "$report"; }

for entry in ${CONFIGS:-executor_threads=1 executor_threads=2 executor_threads=4 default}; do
	rm -rf "$run" && mkdir -p "$run"
	: >"$run/conf"
	client_env=() daemon_env=() client_args=() dcpu=() ccpu=()
	if [ "$entry" != default ]; then
		IFS=, read -r -a kvs <<<"$entry"
		for kv in "${kvs[@]}"; do
			case $kv in
			env:*) client_env+=("${kv#env:}") ;;
			denv:*) daemon_env+=("${kv#denv:}") ;;
			carg:*) client_args+=("${kv#carg:}") ;;
			dcpu:*) dcpu=(taskset -c "${kv#dcpu:}") ;;
			ccpu:*) ccpu=(taskset -c "${kv#ccpu:}") ;;
			*) printf '%s = %s\n' "${kv%%=*}" "${kv#*=}" >>"$run/conf" ;;
			esac
		done
	fi
	${dcpu[@]+"${dcpu[@]}"} env ${daemon_env[@]+"${daemon_env[@]}"} \
		"$daemon_bin" --backend cuda --config "$run/conf" --listen "ipc://$run/d.sock" \
		--stats "ipc://$run/s.sock" --manifest "$pack/manifest" \
		--ready-file "$run/pid" --diagnostic-ops 2>"$run/log" &
	daemon=$!
	for _ in $(seq 1 200); do [ -s "$run/pid" ] && break; sleep 0.1; done
	for ns in ${NS:-5000}; do
		rates=() spreads=()
		for _ in $(seq 1 "${RUNS:-3}"); do
			# The serving-engine calls (bench_api.c, --ops spin ops each), or
			# the windowed spin kernels.
			if [ -n "$api" ]; then
				work=(--api "$api" --ops 2000)
			else
				work=(--kernels 2000 --ns "$ns")
			fi
			o=$(${ccpu[@]+"${ccpu[@]}"} env ${client_env[@]+"${client_env[@]}"} \
				"$bin/tileops-bench-dispatch" --address "ipc://$run/d.sock" \
				--procs "$procs" "${work[@]}" ${client_args[@]+"${client_args[@]}"} 2>&1)
			val() { echo "$o" | grep -o "\"$1\"[^}]*" | grep -o '"value":[0-9.e+]*' |
				cut -d: -f2; }
			if [ -n "$api" ]; then
				r=$(val api_ops_per_s)
				spreads+=("p50 $(val api_lat_p50_us) p99 $(val api_lat_p99_us) us")
			else
				r=$(val procs_kernels_per_s)
				spreads+=("$(val procs_first_done_ms)/$(val procs_wall_ms)ms")
			fi
			rates+=("${r:-0}")
			for what in start done; do
				echo "$entry ns=$ns $what: $(echo "$o" | grep "proc_${what}_ms" |
					grep -o '"value":[0-9.e+]*' | cut -d: -f2 | tr '\n' ' ')"
			done >>"$detail"
			# With carg:--progress: when each tenth of each process's ops completed.
			echo "$o" | grep '^progress' >>"$detail"
			# Each executor thread's ring ops and pacing waits so far
			# (cumulative over the runs against this daemon).
			"$bin/tileops-stat" --address "ipc://$run/s.sock" --raw 2>/dev/null |
				python3 -c 'import json, sys
ex = json.load(sys.stdin).get("executor", {})
print("threads (ring ops/pace waits/slow ops/slow launches/sleeps/us per op/us per launch):", " ".join("%s:%d/%d/%d/%d/%d/%.2f/%.2f" % (k, v["ring_ops"], v["pace_waits"], v.get("slow_ops", 0), v.get("slow_launches", 0), v.get("sleeps", 0), v.get("ring_op_us", 0) / max(v["ring_ops"], 1), v.get("launch_us", 0) / max(v.get("launches_timed", 0), 1)) for k, v in sorted(ex.items(), key=lambda kv: int(kv[0]))))' \
				>>"$detail" 2>/dev/null
			# How often the kernel took each executor thread off its CPU
			# (cumulative: involuntary/voluntary context switches).
			for t in /proc/"$daemon"/task/*; do
				case $(cat "$t/comm" 2>/dev/null) in tileops-exec*) ;; *) continue ;; esac
				printf '%s:%s/%s ' "$(cat "$t/comm")" \
					"$(awk '/^nonvoluntary_ctxt_switches/{print $2}' "$t/status")" \
					"$(awk '/^voluntary_ctxt_switches/{print $2}' "$t/status")"
			done | sed 's/^/switches (involuntary\/voluntary): /' >>"$detail"
			echo >>"$detail"
		done
		med=$(printf '%s\n' "${rates[@]}" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
		if [ -n "$api" ]; then
			say "$entry: $procs procs x 2000 $api spin ops: median $med ops/s" \
				"(runs: ${rates[*]}; latency: ${spreads[*]})"
		else
			say "$entry: $procs procs x 2000 spin kernels of $ns ns: median $med kernels/s" \
				"(runs: ${rates[*]}; first/last process done: ${spreads[*]})"
		fi
	done
	kill -TERM "$daemon"
	wait "$daemon"
	grep -o "session [0-9]* opened.*executor thread [0-9]*" "$run/log" |
		sed 's/(pid [0-9]*, uid [0-9]*, //; s/, arena.*executor/ executor/' |
		tr '\n' ';' >>"$detail"
	echo >>"$detail"
done
