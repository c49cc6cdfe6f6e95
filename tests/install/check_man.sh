#!/usr/bin/env bash
# check_man.sh TILEOPSD TILEOPS_STAT MANDIR CONF - the manual pages are
# complete and clean: every long option that `tileopsd --help` and
# `tileops-stat --help` print is in its page (docs/man/tileopsd.8,
# docs/man/tileops-stat.1), every key of the sample config CONF is in
# tileopsd.8, and groff (and man, when installed) format both pages
# without a warning (groff-base and man-db; CI has both).
set -euo pipefail

tileopsd=$1 stat=$2 mandir=$3 conf=$4
bad=0

# The page's text with roff's escaped hyphens (\-) as plain ones.
page_text() {
	sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' "$1"
}

check_options() {
	local bin=$1 page=$2 text opt
	text=$(page_text "$page")
	for opt in $("$bin" --help | grep -o -E -- '--[a-z][a-z0-9-]*' | sort -u); do
		if ! grep -q -E -- "${opt}([^a-z0-9-]|\$)" <<<"$text"; then
			echo "check_man: $(basename "$page") lacks the option $opt of $(basename "$bin") --help" >&2
			bad=1
		fi
	done
}

check_options "$tileopsd" "$mandir/tileopsd.8"
check_options "$stat" "$mandir/tileops-stat.1"

# Every key the sample config documents ("# key = default" lines).
for key in $(sed -n -E 's/^# ([a-z_]+) = .*/\1/p' "$conf" | sort -u); do
	if ! grep -q -E "^\.B ${key}\$" "$mandir/tileopsd.8"; then
		echo "check_man: tileopsd.8 does not describe the config key $key ($(basename "$conf"))" >&2
		bad=1
	fi
done

for page in "$mandir/tileopsd.8" "$mandir/tileops-stat.1"; do
	if command -v groff >/dev/null; then
		out=$(groff -man -z -ww "$page" 2>&1)
		[ -z "$out" ] || { echo "check_man: groff warns on $page:" >&2; echo "$out" >&2; bad=1; }
	fi
	if command -v man >/dev/null; then
		out=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
		[ -z "$out" ] || { echo "check_man: man warns on $page:" >&2; echo "$out" >&2; bad=1; }
	fi
done
if ! command -v groff >/dev/null; then
	# CI installs it (.ci/run); a machine without it still checks completeness.
	echo "check_man: groff is not installed (package groff-base): the pages were not formatted"
fi
[ $bad = 0 ] && echo "check_man: both pages complete and clean"
exit $bad
