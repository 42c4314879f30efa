#!/usr/bin/env bash
# Removes what an earlier run that was killed outright (SIGKILL of a whole
# session, a machine stopped mid-test) left behind: the harness's network
# namespaces and real-node cgroups. `make test` calls it first, so that its
# final hack/check-no-leftovers.sh judges only what this run left.
#
# It touches nothing while a process of the project runs (a playground, a
# test in another shell): then the namespaces may be in use, and it says so
# and removes nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if ! out=$("$here/check-no-leftovers.sh" --processes-only 2>&1); then
  echo "remove-stale: a process of the project is running; leaving its namespaces and cgroups alone:" >&2
  echo "$out" >&2
  exit 0
fi
removed=0
if command -v ip >/dev/null 2>&1; then
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^liqo-(lab|h)-' || true); do
    echo "remove-stale: network namespace $ns (a killed run's)"
    ip netns delete "$ns"
    removed=$((removed + 1))
  done
fi
for root in /sys/fs/cgroup/*/liqo-h-*; do
  [ -d "$root" ] || continue
  echo "remove-stale: cgroup $root (a killed run's)"
  # Kill what still runs in it (a container, a shim), bounded, then remove
  # the cgroups deepest first.
  for _ in $(seq 50); do
    pids=$(find "$root" -name cgroup.procs -exec cat {} + 2>/dev/null || true)
    [ -z "$pids" ] && break
    kill -9 $pids 2>/dev/null || true
    sleep 0.1
  done
  find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  removed=$((removed + 1))
done
if [ "$removed" -gt 0 ]; then
  echo "remove-stale: removed $removed leftovers of an earlier run"
fi
