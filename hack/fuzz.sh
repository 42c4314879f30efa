#!/usr/bin/env bash
# Runs every fuzz test of the module for FUZZTIME each (default 1m).
# The targets are found in the sources (`func FuzzXxx(f *testing.F)` in a
# _test.go file), so a new one runs without touching the Makefile.
#
# Go's fuzzing coordinator can fail a run with a bare "context deadline
# exceeded" when -fuzztime ends while a starved worker is still executing
# an input (a race in internal/fuzz, seen on loaded 2-core machines). Such
# a failure writes no reproducer. A run that fails that way is retried once;
# a run that writes a reproducer under testdata/fuzz, or fails twice, fails.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-1m}

targets=$(grep -rEo --include='*_test.go' --exclude-dir=.git --exclude-dir=hack \
	'^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . | sed -E 's#^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*#\1 \2#' | sort -u)
if [ -z "$targets" ]; then
	echo "no fuzz test found" >&2
	exit 1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# reproducers lists the inputs the fuzzer saved as failing for a target.
reproducers() { ls "$1/testdata/fuzz/$2" 2>/dev/null | sort || true; }

fuzz() {
	local dir=$1 name=$2
	go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$dir/" 2>&1 | tee "$log"
	return "${PIPESTATUS[0]}"
}

while read -r dir name; do
	echo "== $name ($dir, $FUZZTIME)"
	before=$(reproducers "$dir" "$name")
	if fuzz "$dir" "$name"; then
		continue
	fi
	after=$(reproducers "$dir" "$name")
	if [ "$before" != "$after" ]; then
		echo "$name failed: see the failing input under $dir/testdata/fuzz/$name" >&2
		exit 1
	fi
	if ! grep -q '^    context deadline exceeded$' "$log"; then
		echo "$name failed" >&2
		exit 1
	fi
	echo "== $name stopped on the fuzzing coordinator's deadline race, with no failing input: once more"
	fuzz "$dir" "$name"
done <<<"$targets"
