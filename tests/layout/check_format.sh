#!/usr/bin/env bash
# check_format.sh SOURCE_DIR - every C and CUDA source is formatted as
# .clang-format says (clang-format --dry-run -Werror). Fix with
#   git ls-files '*.c' '*.h' '*.cu' '*.cuh' | xargs clang-format -i
set -euo pipefail
cd "${1:?usage: check_format.sh SOURCE_DIR}"
cf=${CLANG_FORMAT:-clang-format}
if ! command -v "$cf" >/dev/null; then
	echo "check_format.sh: $cf not found (scripts/deps.sh installs it)" >&2
	exit 1
fi
git ls-files --cached --others --exclude-standard '*.c' '*.h' '*.cu' '*.cuh' |
	while IFS= read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done |
	xargs "$cf" --dry-run -Werror
echo "every source is formatted ($("$cf" --version))"
