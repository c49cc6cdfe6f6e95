#!/usr/bin/env bash
# test-prometheus.sh TILEOPSD CLIENT MANIFEST - a real Prometheus server
# scrapes a tileopsd: the daemon (CPU backend) serves /metrics on a free
# port, CLIENT (tileops-test-adds) runs a known number of adds, Prometheus
# scrapes every second, and its HTTP API must answer
# tileopsd_ops_total{op="add"} with that number within 30 s.
#
# Without the prometheus binary (Debian's prometheus package) the test is
# skipped (exit 77), except under CI=true, where it must run.
set -euo pipefail

tileopsd=$1 client=$2 manifest=$3
adds=${TILEOPS_PROMETHEUS_ADDS:-250}

if ! command -v prometheus >/dev/null; then
	if [ "${CI:-}" = true ]; then
		echo "test-prometheus: prometheus is not installed (apt-get install prometheus)" >&2
		exit 1
	fi
	echo "test-prometheus: SKIPPED: no prometheus binary (Debian package prometheus)"
	exit 77
fi

dir=$(mktemp -d /tmp/tileops-prom-XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$dir"
}
trap cleanup EXIT

# A port nothing answers on (bash's /dev/tcp connects; a refusal means free).
free_port() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	echo "test-prometheus: no free port found" >&2
	exit 1
}

# GET PATH from 127.0.0.1:PORT; the body on stdout (HTTP/1.0: the server closes).
http_get() {
	local port=$1 path=$2
	exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
	printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$path" >&3
	sed '1,/^\r\{0,1\}$/d' <&3
	exec 3<&-
}

metrics_port=$(free_port)
prom_port=$(free_port)
while [ "$prom_port" = "$metrics_port" ]; do prom_port=$(free_port); done

cat >"$dir/tileopsd.conf" <<CONF
listen = ipc://$dir/d.sock
stats_listen = ipc://$dir/s.sock
metrics_listen = http://127.0.0.1:$metrics_port
backend = cpu
CONF
"$tileopsd" --config "$dir/tileopsd.conf" --manifest "$manifest" \
	--ready-file "$dir/ready" >"$dir/tileopsd.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do
	[ -s "$dir/ready" ] && break
	sleep 0.1
done
if [ ! -s "$dir/ready" ]; then
	echo "test-prometheus: tileopsd did not become ready:" >&2
	cat "$dir/tileopsd.log" >&2
	exit 1
fi

"$client" "ipc://$dir/d.sock" "$adds" prometheus-test

cat >"$dir/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: tileopsd
    static_configs:
      - targets: ['127.0.0.1:$metrics_port']
YML
prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/tsdb" \
	--web.listen-address="127.0.0.1:$prom_port" >"$dir/prometheus.log" 2>&1 &
pids+=($!)

query='/api/v1/query?query=tileopsd_ops_total%7Bop%3D%22add%22%7D'
answer=
for _ in $(seq 60); do
	answer=$(http_get "$prom_port" "$query" 2>/dev/null || true)
	# {"status":"success","data":{"resultType":"vector","result":[{"metric":{...},"value":[T,"N"]}]}}
	value=$(printf '%s' "$answer" | sed -n 's/.*"value":\[[0-9.]*,"\([0-9.e+]*\)"\].*/\1/p')
	if [ -n "$value" ]; then
		if [ "$value" = "$adds" ]; then
			echo "test-prometheus: Prometheus reports tileopsd_ops_total{op=\"add\"} = $value"
			up=$(http_get "$prom_port" '/api/v1/query?query=up%7Bjob%3D%22tileopsd%22%7D')
			case $up in
			*'"value":['*',"1"]'*) ;;
			*)
				echo "test-prometheus: the target is not up: $up" >&2
				exit 1
				;;
			esac
			exit 0
		fi
		echo "test-prometheus: tileopsd_ops_total{op=\"add\"} is $value, expected $adds" >&2
		exit 1
	fi
	sleep 0.5
done
echo "test-prometheus: no answer for tileopsd_ops_total within 30 s; last: $answer" >&2
tail -n 20 "$dir/prometheus.log" >&2
exit 1
