#!/usr/bin/env bash
# deps.sh [test] - install the Debian/Ubuntu packages that building TileOPs
# needs (and, with `test`, those only the tests use: clang-format for the
# format check, clang and its runtime for the fuzz harnesses, git,
# prometheus for the metrics page's checks, and packaging, systemd and man
# tools for the install test), if any
# is missing. Needs root (or sudo) only when it installs.
# CUDA is not installed here: the build uses nvcc when /usr/local/cuda/bin
# has it and builds the CPU backend alone otherwise.
set -euo pipefail

packages=(
	cmake ninja-build gcc g++ libc6-dev pkg-config
	libnng-dev libmbedtls-dev libuv1-dev libyaml-dev
	libprotobuf-c-dev protobuf-c-compiler
	libcriterion-dev
	procps util-linux
)
if [ "${1:-}" = test ]; then
	packages+=(clang-format clang libclang-rt-14-dev git passwd)
	# The install test (cpack's dpkg-shlibdeps and file, systemd-analyze)
	# and the man page check (groff, man).
	packages+=(dpkg-dev file systemd groff-base man-db)
	# tests/deploy/check_k8s.py: the Kubernetes API models and a YAML reader.
	packages+=(python3-kubernetes python3-yaml)
	# promtool and a real Prometheus server for the /metrics tests (about
	# 96 MB installed; in a container its service is not started).
	packages+=(prometheus)
	# curl scrapes the page in docs/operations.md's walkthrough (test-operations.sh).
	packages+=(curl)
	# The Python package's tests (client/python/tests): pytest and numpy, and
	# what its offline pip install into a venv builds with (setuptools makes
	# the wheel with python3-wheel's bdist_wheel).
	packages+=(python3-pytest python3-numpy python3-venv python3-setuptools python3-wheel)
fi
# `plot`: what scripts/plot-bench.py needs (Debian's matplotlib, for /usr/bin/python3).
if [ "${1:-}" = plot ]; then
	packages+=(python3-matplotlib)
fi

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null; then
	echo "deps.sh: missing packages (${missing[*]}) and no apt-get to install them" >&2
	exit 1
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null; then
		echo "deps.sh: run as root to install: ${missing[*]}" >&2
		exit 1
	fi
	sudo=(sudo)
fi
echo "deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
