#!/usr/bin/env bash
# make conformance: upstream Kubernetes conformance on offloaded pods.
#
# Starts a playground with real nodes (a consumer, cluster-1, and a provider,
# cluster-2, each with a kubelet and containerd and a CoreDNS as cluster DNS;
# the suite's images imported, built here), cordons the consumer's own nodes so that only its virtual
# node takes pods, runs bin/e2e.test (every test namespace offloaded, see
# e2e_test.go) on the specs of focus.txt less those of skip.txt, and writes
# the JUnit report and a summary table by group to $OUT/$NAME.
#
# With BROKER=1 the playground adds a broker, which cluster-1 enables
# cluster-2 through (the playground's broker demo), and every test
# namespace goes to the broker alone, which offloads it to cluster-2 in
# turn: two hops.
#
# Environment: BIN (bin/), OUT (_output/conformance), MAPPING (DefaultName
# or EnforceSameName), BROKER (1: through the broker), POD_RANGES (shared,
# the default: every cluster has the same pod range, so each peer's is
# remapped; distinct: each its own, nothing remapped), DNS_PROXY (1, the
# default: every cluster runs Liqo's DNS proxy, so that under DefaultName
# offloaded pods reach Services by the consumer's namespace names; 0: off),
# PROCS (parallel suite processes, 4), FOCUS and SKIP
# (the lists), KEEP=1 (leave the playground up for a look; its directory is
# printed), TIMEOUT (of the whole suite, 4h).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BIN:-$root/bin}
OUT=${OUT:-$root/_output/conformance}
MAPPING=${MAPPING:-DefaultName}
PROCS=${PROCS:-4}
FOCUS=${FOCUS:-$here/focus.txt}
SKIP=${SKIP:-$here/skip.txt}
TIMEOUT=${TIMEOUT:-4h}
# The cluster DNS each cluster runs, from bin/conformance-images.tar
# (hack/conformance/images: CoreDNSImage).
COREDNS_IMAGE=registry.k8s.io/coredns/coredns:v1.15.0
case "${BROKER:-}" in
'' | 1) ;;
*) echo "BROKER must be 1 or empty, not $BROKER" >&2; exit 2 ;;
esac
POD_RANGES=${POD_RANGES:-shared}
DNS_PROXY=${DNS_PROXY:-1}
case "$DNS_PROXY" in
0 | 1) ;;
*) echo "DNS_PROXY must be 0 or 1, not $DNS_PROXY" >&2; exit 2 ;;
esac
case "$POD_RANGES" in
shared | distinct) ;;
*) echo "POD_RANGES must be shared or distinct, not $POD_RANGES" >&2; exit 2 ;;
esac
case "$MAPPING" in
DefaultName | EnforceSameName) ;;
*) echo "MAPPING must be DefaultName or EnforceSameName, not $MAPPING" >&2; exit 2 ;;
esac
if [ "$(id -u)" -ne 0 ]; then
  echo "make conformance needs root: the offloaded pods run in real containers (a playground with --network)" >&2
  exit 2
fi
name=direct-$MAPPING
up_args=()
if [ "${BROKER:-}" = 1 ]; then
  name=broker-$MAPPING
  up_args+=(--broker)
fi
if [ "$DNS_PROXY" = 1 ]; then
  up_args+=(--dns-proxy)
else
  name=$name-nodns
fi
if [ "$POD_RANGES" = distinct ]; then
  name=$name-distinct
  up_args+=(--distinct-pod-ranges)
fi
dir=$OUT/$name
pg=$dir/playground
mkdir -p "$dir"
rm -f "$dir"/junit_*.xml "$dir"/summary.*
"$BIN/liqoctl" playground down --dir "$pg" >/dev/null 2>&1 || true
down() {
  if [ -z "${KEEP:-}" ]; then
    "$BIN/liqoctl" playground down --dir "$pg" >/dev/null || echo "playground down failed: see $pg" >&2
  else
    echo "The playground is still up (KEEP=1): KUBECONFIG=$pg/cluster-1.kubeconfig; $BIN/liqoctl playground down --dir $pg"
  fi
}
trap down EXIT
echo "• Starting the playground (consumer cluster-1, provider cluster-2${BROKER:+, a broker between them}, real nodes) in $pg"
"$BIN/liqoctl" playground up --dir "$pg" --clusters 2 --network "${up_args[@]}" \
  --untainted-virtual-nodes cluster-1 --node-images "$BIN/conformance-images.tar" \
  --cluster-dns-image "$COREDNS_IMAGE" >"$dir/playground.log" 2>&1 ||
  { tail -20 "$dir/playground.log" >&2; exit 1; }
kc=$pg/cluster-1.kubeconfig
# The playground's demo (six offloaded pods) would hold part of the
# provider's offer for the whole run.
# (The broker demo's, too.)
"$BIN/kubectl" --kubeconfig "$kc" delete namespace demo brokered --ignore-not-found --wait=false >/dev/null
# The virtual node the suite's pods go to: cluster-2's, or the broker's.
suite_args=()
vn=offloading.liqo.io/type=virtual-node
if [ "${BROKER:-}" = 1 ]; then
  broker_id=$("$BIN/kubectl" --kubeconfig "$pg/broker.kubeconfig" get clusterconfig cluster -o jsonpath='{.status.clusterID}')
  [ -n "$broker_id" ] || { echo "the broker has no ClusterID" >&2; exit 1; }
  vn=$vn,offloading.liqo.io/remote-cluster-id=$broker_id
  suite_args+=(--liqo-provider "$broker_id")
fi
if [ "$MAPPING" = EnforceSameName ]; then
  # The suite's namespaces keep their names in the provider: the provider
  # lets its consumer use them (they all start with a letter; the
  # reserved default, kube-* and liqo-* stay refused).
  # (Through the broker, the broker lets cluster-1 use them, and
  # cluster-2 the broker.)
  providers=(cluster-2)
  [ "${BROKER:-}" = 1 ] && providers+=(broker)
  for p in "${providers[@]}"; do
    for fc in $("$BIN/kubectl" --kubeconfig "$pg/$p.kubeconfig" get foreignclusters -o name); do
      "$BIN/kubectl" --kubeconfig "$pg/$p.kubeconfig" patch "$fc" --type merge \
        -p '{"spec":{"offloadedNamespaces":{"prefixes":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q","r","s","t","u","v","w","x","y","z"]}}}' >/dev/null
    done
  done
fi
# The provider offers its whole node, as a cluster dedicated to a consumer
# would: some specs' pods have a CPU limit above half of this machine's
# two cores, and the provider's quota bounds limits by the offer.
# The virtual node's CPU is read before the patch: the new offer can reach
# it before a read that follows the patch.
before=$("$BIN/kubectl" --kubeconfig "$kc" get nodes -l "$vn" -o jsonpath='{.items[0].status.allocatable.cpu}')
# Through the broker, the broker offers what it is offered whole too.
sharers=(cluster-2)
[ "${BROKER:-}" = 1 ] && sharers+=(broker)
for p in "${sharers[@]}"; do
  "$BIN/kubectl" --kubeconfig "$pg/$p.kubeconfig" patch clusterconfig cluster --type merge \
    -p '{"spec":{"sharingConfig":{"sharePercentage":100}}}' >/dev/null
done
# Until the offer changed and then held for 3 s (through the broker it
# changes twice: the provider's share, then the broker's).
last=$before
steady=0
for _ in $(seq 1 120); do
  now=$("$BIN/kubectl" --kubeconfig "$kc" get nodes -l "$vn" -o jsonpath='{.items[0].status.allocatable.cpu}')
  if [ "$now" != "$last" ]; then steady=0; last=$now; else steady=$((steady + 1)); fi
  [ "$now" != "$before" ] && [ "$steady" -ge 6 ] && break
  sleep 0.5
done
echo "• The provider's offer: $before CPU, now $now"
# Only the virtual node takes the suite's pods.
"$BIN/kubectl" --kubeconfig "$kc" cordon -l 'offloading.liqo.io/type!=virtual-node' >/dev/null
if [ "${BROKER:-}" = 1 ]; then
  # The consumer's direct virtual node of cluster-2 takes nothing: the
  # test namespaces are offloaded to the broker alone. Cordoned, it would
  # still be given a DaemonSet's pod (which tolerates that), one it cannot
  # run; a taint no DaemonSet tolerates keeps it out of theirs too.
  direct="offloading.liqo.io/type=virtual-node,offloading.liqo.io/remote-cluster-id!=$broker_id"
  "$BIN/kubectl" --kubeconfig "$kc" cordon -l "$direct" >/dev/null
  "$BIN/kubectl" --kubeconfig "$kc" taint nodes -l "$direct" conformance.liqo.io/through-the-broker=only:NoSchedule >/dev/null
fi
"$BIN/kubectl" --kubeconfig "$kc" get nodes
args=()
while IFS= read -r l; do
  case "$l" in '' | '#'*) continue ;; esac
  args+=(--focus "$l")
done <"$FOCUS"
while IFS= read -r l; do
  case "$l" in '' | '#'*) continue ;; esac
  args+=(--skip "$l")
done <"$SKIP"
echo "• Running the suite ($PROCS processes, mapping $MAPPING${BROKER:+, through the broker}); the log is $dir/e2e.log"
start=$(date +%s)
rc=0
(cd "$dir" && "$BIN/ginkgo" --procs "$PROCS" --timeout "$TIMEOUT" --no-color --silence-skips "${args[@]}" "$BIN/e2e.test" -- \
  --kubeconfig "$kc" --report-dir "$dir" --liqo-namespace-mapping "$MAPPING" "${suite_args[@]}" \
  >"$dir/e2e.log" 2>&1) || rc=$?
elapsed=$(($(date +%s) - start))
(cd "$here" && go run ./report --focus "$FOCUS" --skip "$SKIP" "$dir"/junit_*.xml) | tee "$dir/summary.txt"
(cd "$here" && go run ./report --markdown --focus "$FOCUS" --skip "$SKIP" "$dir"/junit_*.xml) >"$dir/summary.md"
echo "Ran in $((elapsed / 60)) min $((elapsed % 60)) s on $(date -u +%Y-%m-%d); the suite exited $rc; JUnit: $dir/junit_01.xml; table: $dir/summary.md"
exit "$rc"
