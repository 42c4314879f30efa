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
# Environment: BIN (bin/), OUT (_output/conformance), MAPPING (DefaultName
# or EnforceSameName), PROCS (parallel suite processes, 4), FOCUS and SKIP
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
case "$MAPPING" in
DefaultName | EnforceSameName) ;;
*) echo "MAPPING must be DefaultName or EnforceSameName, not $MAPPING" >&2; exit 2 ;;
esac
if [ "$(id -u)" -ne 0 ]; then
  echo "make conformance needs root: the offloaded pods run in real containers (a playground with --network)" >&2
  exit 2
fi
name=direct-$MAPPING
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
echo "• Starting the playground (consumer cluster-1, provider cluster-2, real nodes) in $pg"
"$BIN/liqoctl" playground up --dir "$pg" --clusters 2 --network \
  --untainted-virtual-nodes cluster-1 --node-images "$BIN/conformance-images.tar" \
  --cluster-dns-image "$COREDNS_IMAGE" >"$dir/playground.log" 2>&1 ||
  { tail -20 "$dir/playground.log" >&2; exit 1; }
kc=$pg/cluster-1.kubeconfig
# The playground's demo (six offloaded pods) would hold part of the
# provider's offer for the whole run.
"$BIN/kubectl" --kubeconfig "$kc" delete namespace demo --ignore-not-found --wait=false >/dev/null
if [ "$MAPPING" = EnforceSameName ]; then
  # The suite's namespaces keep their names in the provider: the provider
  # lets its consumer use them (they all start with a letter; the
  # reserved default, kube-* and liqo-* stay refused).
  fc=$("$BIN/kubectl" --kubeconfig "$pg/cluster-2.kubeconfig" get foreignclusters -o jsonpath='{.items[0].metadata.name}')
  "$BIN/kubectl" --kubeconfig "$pg/cluster-2.kubeconfig" patch foreigncluster "$fc" --type merge \
    -p '{"spec":{"offloadedNamespaces":{"prefixes":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q","r","s","t","u","v","w","x","y","z"]}}}' >/dev/null
fi
# The provider offers its whole node, as a cluster dedicated to a consumer
# would: some specs' pods have a CPU limit above half of this machine's
# two cores, and the provider's quota bounds limits by the offer.
# The virtual node's CPU is read before the patch: the new offer can reach
# it before a read that follows the patch.
before=$("$BIN/kubectl" --kubeconfig "$kc" get nodes -l offloading.liqo.io/type=virtual-node -o jsonpath='{.items[0].status.allocatable.cpu}')
"$BIN/kubectl" --kubeconfig "$pg/cluster-2.kubeconfig" patch clusterconfig cluster --type merge \
  -p '{"spec":{"sharingConfig":{"sharePercentage":100}}}' >/dev/null
for _ in $(seq 1 120); do
  now=$("$BIN/kubectl" --kubeconfig "$kc" get nodes -l offloading.liqo.io/type=virtual-node -o jsonpath='{.items[0].status.allocatable.cpu}')
  [ "$now" != "$before" ] && break
  sleep 0.5
done
echo "• The provider's offer: $before CPU, now $now"
# Only the virtual node takes the suite's pods.
"$BIN/kubectl" --kubeconfig "$kc" cordon -l 'offloading.liqo.io/type!=virtual-node' >/dev/null
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
echo "• Running the suite ($PROCS processes, mapping $MAPPING); the log is $dir/e2e.log"
start=$(date +%s)
rc=0
(cd "$dir" && "$BIN/ginkgo" --procs "$PROCS" --timeout "$TIMEOUT" --no-color --silence-skips "${args[@]}" "$BIN/e2e.test" -- \
  --kubeconfig "$kc" --report-dir "$dir" --liqo-namespace-mapping "$MAPPING" \
  >"$dir/e2e.log" 2>&1) || rc=$?
elapsed=$(($(date +%s) - start))
(cd "$here" && go run ./report --focus "$FOCUS" --skip "$SKIP" "$dir"/junit_*.xml) | tee "$dir/summary.txt"
(cd "$here" && go run ./report --markdown --focus "$FOCUS" --skip "$SKIP" "$dir"/junit_*.xml) >"$dir/summary.md"
echo "Ran in $((elapsed / 60)) min $((elapsed % 60)) s on $(date -u +%Y-%m-%d); the suite exited $rc; JUnit: $dir/junit_01.xml; table: $dir/summary.md"
exit "$rc"
