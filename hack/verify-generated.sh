#!/usr/bin/env bash
# Fails when the checked-in generated files (deepcopy, CRDs, RBAC) differ
# from what `make generate` produces. It generates into a scratch copy of the
# tree, so a stale tree is reported, not silently rewritten.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

tar -C "$root" --exclude=./bin --exclude=./.git --exclude=./.playground --exclude=./_output -cf - . | tar -C "$scratch" -xf -
make -C "$scratch" --no-print-directory generate BIN="$root/bin" >/dev/null

status=0
for path in api deployments; do
  if ! diff -r -q "$root/$path" "$scratch/$path" >/dev/null; then
    echo "Generated files under $path/ are stale:" >&2
    diff -r "$root/$path" "$scratch/$path" | head -40 >&2 || true
    status=1
  fi
done
if [ "$status" -ne 0 ]; then
  echo "Run 'make generate' and commit the result." >&2
fi
exit "$status"
