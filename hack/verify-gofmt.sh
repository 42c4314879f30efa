#!/usr/bin/env bash
# Fails when Go files are not gofmt-formatted or a go.mod is not tidy.
set -euo pipefail
cd "$(dirname "$0")/.."
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*'))
if [ -n "$unformatted" ]; then
  echo "These files need gofmt -w:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go mod tidy -diff || { echo "go.mod is not tidy: run 'go mod tidy'" >&2; exit 1; }
(cd hack/tools && go mod tidy -diff) || { echo "hack/tools/go.mod is not tidy: run 'cd hack/tools && go mod tidy'" >&2; exit 1; }
(cd hack/conformance && go mod tidy -diff) || { echo "hack/conformance/go.mod is not tidy: run 'cd hack/conformance && go mod tidy'" >&2; exit 1; }
