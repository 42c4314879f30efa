#!/usr/bin/env bash
# Fails when a process built by this project (a control-plane component,
# kwok or a Liqo binary from bin/, or a test's own build) is still running:
# the tests must stop everything they start, also when they fail; then
# (unless --processes-only) when a network namespace or cgroup of the
# harness is left.
set -euo pipefail
processes_only=
case "${1:-}" in
'') ;;
--processes-only) processes_only=1 ;;
*) echo "usage: $0 [--processes-only]" >&2; exit 2 ;;
esac
bin=$(cd "$(dirname "$0")/.." && pwd)/bin
pattern="^($bin/|[^ ]*/liqo-(e2e|bench)-[^ ]*/)(etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kwok|liqo-controller-manager|liqo-gateway|kubelet|kube-proxy|harness-net|wireguard-go)( |$)"
left=$(pgrep -a -f "$pattern" || true)
if [ -n "$left" ]; then
  echo "Processes left behind by the tests:" >&2
  echo "$left" >&2
  exit 1
fi
# The headless Chromium of the dashboard's tests (internal/testenv/browser),
# and the processes it forks.
left=$(pgrep -a -f "^[^ ]*/(chrom(e|ium)[^ ]* .*(--headless|--type=)|chrome_crashpad_handler )" || true)
if [ -n "$left" ]; then
  echo "Browsers left behind by the tests:" >&2
  echo "$left" >&2
  exit 1
fi
left=$(pgrep -a -f "(dnsmasq|named) .*liqo-(dnsmasq|named)-" || true)
if [ -n "$left" ]; then
  echo "DNS servers left behind by the tests:" >&2
  echo "$left" >&2
  exit 1
fi
if [ -n "$processes_only" ]; then
  echo "No processes left behind."
  exit 0
fi
if command -v ip >/dev/null 2>&1 && ip netns list 2>/dev/null | grep -qE '^liqo-(lab|h)-'; then
  echo "Network namespaces left behind by the tests:" >&2
  ip netns list | grep -E '^liqo-(lab|h)-' >&2
  exit 1
fi
# The harness's real nodes: containerd, its shims and the containers
# live in the node's cgroups, which cannot be removed while they run.
left=$(ls -d /sys/fs/cgroup/*/liqo-h-* 2>/dev/null || true)
if [ -n "$left" ]; then
  echo "Cgroups left behind by the tests:" >&2
  echo "$left" >&2
  exit 1
fi
echo "No processes, network namespaces or cgroups left behind."
