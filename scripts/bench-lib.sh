# bench-lib.sh - what the GPU-machine bench scripts share (sourced, not run):
# where the packed binaries are, starting and stopping a tileopsd on the
# CUDA backend, and running a step into the log. The caller sets `out`,
# `log` and `run` (a scratch folder) before calling these, and reads
# `failed`, `daemon` and `addr`.

# .carry/ as scripts/gpu-pack.sh leaves it (unpacked if still packed).
bench_setup_paths() {
	root=$PWD
	# The packed binaries (scripts/gpu-pack.sh): TILEOPS_PACK, else .carry/.
	pack=${TILEOPS_PACK:-$root/.carry}
	if [ -f "$pack/pack.tar.xz" ] && [ ! -d "$pack/bin" ]; then
		tar -C "$pack" -xJf "$pack/pack.tar.xz"
	fi
	bin=$pack/bin
	export LD_LIBRARY_PATH=$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	manifest=${TILEOPS_MANIFEST:-}
	if [ -z "$manifest" ]; then
		manifest=$root/manifest
		[ -d "$pack/manifest" ] && manifest=$pack/manifest
	fi
	daemon=
	failed=0
}

# Run a command into the log; a failure marks the run failed.
bench_step() {
	echo "==== $*" >>"$log"
	"$@" >>"$log" 2>&1
	local rc=$?
	echo "==== rc=$rc" >>"$log"
	[ "$rc" = 0 ] || failed=1
	return "$rc"
}

# The GPU, the commit and the time, at the head of the log.
bench_header() {
	nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu \
		--format=csv >>"$log" 2>&1
	echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)," \
		"$(date -u +%FT%TZ)" >>"$log"
}

# Start tileopsd on the CUDA backend (TILEOPS_BENCH_BACKEND=cpu: the CPU one) in $run, with any further options
# given (e.g. --config FILE); 0 once it is ready (addr and stats set).
bench_start_daemon() {
	rm -f "$run/tileopsd.pid"
	"$bin/tileopsd" --backend "${TILEOPS_BENCH_BACKEND:-cuda}" --listen "ipc://$run/tileopsd.sock" \
		--stats "ipc://$run/stats.sock" --manifest "$manifest" \
		--ready-file "$run/tileopsd.pid" --log-level info --diagnostic-ops "$@" \
		>"$run/tileopsd.log" 2>&1 &
	daemon=$!
	for _ in $(seq 1 600); do
		[ -s "$run/tileopsd.pid" ] && break
		kill -0 "$daemon" 2>/dev/null || break
		sleep 0.1
	done
	addr=ipc://$run/tileopsd.sock
	stats=ipc://$run/stats.sock
	[ -s "$run/tileopsd.pid" ]
}

# SIGTERM, its exit status and its log into the log.
bench_stop_daemon() {
	[ -n "$daemon" ] || return 0
	kill -TERM "$daemon" 2>/dev/null
	wait "$daemon"
	echo "tileopsd exit status after SIGTERM: $?" >>"$log"
	daemon=
	cat "$run/tileopsd.log" >>"$log" 2>/dev/null
}

# NVIDIA MPS for the benches that run beside it or under it: bench_start_mps
# starts a control daemon on pipe and log folders of its own, which the
# processes given CUDA_MPS_PIPE_DIRECTORY=$mps_pipe and
# CUDA_MPS_LOG_DIRECTORY=$mps_log find (export them for everything after);
# bench_stop_mps stops it (call it on exit too).
mps_pipe=/tmp/mps-pipe
mps_log=/tmp/mps-log
mps_up=0
bench_start_mps() {
	mkdir -p "$mps_pipe" "$mps_log"
	CUDA_MPS_PIPE_DIRECTORY=$mps_pipe CUDA_MPS_LOG_DIRECTORY=$mps_log \
		nvidia-cuda-mps-control -d >>"$log" 2>&1 || return 1
	mps_up=1
}

bench_stop_mps() {
	[ "$mps_up" = 1 ] || return 0
	echo quit | CUDA_MPS_PIPE_DIRECTORY=$mps_pipe CUDA_MPS_LOG_DIRECTORY=$mps_log \
		nvidia-cuda-mps-control >>"$log" 2>&1
	mps_up=0
	# The control daemon exits once its server has; give it a moment.
	for _ in $(seq 1 50); do
		pgrep -x nvidia-cuda-mps-control >/dev/null 2>&1 || break
		sleep 0.1
	done
}

# bench_model_outputs NAME: the model benches' files (bench-llama.sh,
# bench-moe.sh): json, tjson, log and table are $out/NAME.jsonl,
# NAME_torch.jsonl, NAME.log and NAME.md (the first three emptied), run a
# scratch folder removed at exit, when the daemon is stopped too.
bench_model_outputs() {
	run=$(mktemp -d "/tmp/tileops-$1.XXXXXX")
	json=$out/$1.jsonl
	tjson=$out/$1_torch.jsonl
	log=$out/$1.log
	table=$out/$1.md
	: >"$json"
	: >"$tjson"
	: >"$log"
	trap 'bench_stop_daemon; rm -rf "$run"' EXIT
}

# An awk function for the tables the bench scripts build from JSON lines:
# field(k) is the line's value of key k, a string or a number ("" when the
# line has none). Put it first in the awk program: awk "$bench_awk_field"'...'.
# shellcheck disable=SC2034,SC2016
bench_awk_field='function field(k,   m) {
	if (match($0, "\"" k "\": ?\"[^\"]*\"")) {
		m = substr($0, RSTART, RLENGTH); sub("^\"" k "\": ?\"", "", m); sub("\"$", "", m); return m
	}
	if (match($0, "\"" k "\": ?[-0-9.eE+]+")) {
		m = substr($0, RSTART, RLENGTH); sub("^\"" k "\": ?", "", m); return m
	}
	return ""
}'
