#!/usr/bin/env bash
# Runs every fuzz test of the module for FUZZTIME each (default 1m).
# The targets are found in the sources (`func FuzzXxx(f *testing.F)` in a
# _test.go file), so a new one runs without touching the Makefile.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-1m}

targets=$(grep -rEo --include='*_test.go' --exclude-dir=.git --exclude-dir=hack \
	'^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . | sed -E 's#^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*#\1 \2#' | sort -u)
if [ -z "$targets" ]; then
	echo "no fuzz test found" >&2
	exit 1
fi
while read -r dir name; do
	echo "== $name ($dir, $FUZZTIME)"
	go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$dir/"
done <<<"$targets"
