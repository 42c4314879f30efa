// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package direct_test runs the broker's direct data plane on real nodes:
// cluster-1 consumes through the broker, cluster-2 provides to it, and
// each of the three clusters (the playground's broker included) has a
// real node on one underlay with the chart's gateway and route agent.
// cluster-1 never peers with cluster-2 by hand: the broker introduces it,
// and cluster-1's controller manager peers with cluster-2 for the network
// only. Then the broker aggregates cluster-1, and its traffic to the same
// pod goes through the broker (transit).
package direct_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	brokerapi "github.com/liqo-go/liqo/internal/broker"
	ctlbroker "github.com/liqo-go/liqo/internal/ctl/broker"
	"github.com/liqo-go/liqo/internal/ctl/testnetwork"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/network/ipam"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

var suite *framework.Suite

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, framework.Options{
		Clusters: 2,
		Network:  true,
		Broker:   []string{"catalog", "orchestrator", "aggregator"},
		ClusterConfig: func(_ string, spec *configv1alpha1.ClusterConfigSpec) {
			spec.DiscoveryConfig.EnableDiscovery = ptr.To(false)
			spec.DiscoveryConfig.EnableAdvertisement = ptr.To(false)
			spec.PeeringConfig.ReconcilePeriodSeconds = 3
		},
	}, &suite))
}

// tunnelBytes is what crossed m's tunnel interface so far, both ways.
func tunnelBytes(t *testing.T, m *playground.Member) (rx, tx uint64) {
	t.Helper()
	rx, tx, err := m.TunnelBytes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return rx, tx
}

// established waits until m's tunnel to peer is Established.
func established(t *testing.T, m, peer *playground.Member) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, func() error {
		var tep netv1alpha1.TunnelEndpoint
		if err := framework.Client(t, m).Get(t.Context(), client.ObjectKey{Name: peer.ClusterID}, &tep); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(tep.Status.Conditions, netv1alpha1.ConditionEstablished) {
			return fmt.Errorf("%s's tunnel to %s is not established: %+v", m.Name, peer.Name, tep.Status.Conditions)
		}
		return nil
	})
}

// tunnelKPI waits until the broker's catalog shows, for provider, the
// round trip through the broker cluster's tunnel as its gateway measures
// it (TunnelEndpoint's latency): within what the prober lets drift
// before it writes (2 ms, or a fifth).
func tunnelKPI(t *testing.T, b, provider *playground.Member) {
	t.Helper()
	framework.Eventually(t, time.Minute, func() error {
		var tep netv1alpha1.TunnelEndpoint
		if err := framework.Client(t, b).Get(t.Context(), client.ObjectKey{Name: provider.ClusterID}, &tep); err != nil {
			return err
		}
		if tep.Status.Latency == nil {
			return fmt.Errorf("the broker's gateway has no latency to %s yet", provider.Name)
		}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, b.BrokerURL+"/api/v1/clusters/"+provider.ClusterID, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var c brokerapi.Cluster
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET the catalog's %s: %s", provider.Name, resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
			return fmt.Errorf("GET the catalog's %s: %w", provider.Name, err)
		}
		if c.KPIs == nil || c.KPIs.TunnelLatencyMillis == nil {
			return fmt.Errorf("the catalog shows no tunnel latency for %s: %+v", provider.Name, c.KPIs)
		}
		got, want := time.Duration(*c.KPIs.TunnelLatencyMillis*float64(time.Millisecond)), tep.Status.Latency.Duration
		if d := (got - want).Abs(); d > max(2*time.Millisecond, want/5) {
			return fmt.Errorf("the catalog's tunnel latency to %s %s, its gateway's %s", provider.Name, got, want)
		}
		t.Logf("the broker's catalog: %s %.2f ms away through the tunnel (its gateway: %s), %.2f ms to its API server", provider.Name,
			*c.KPIs.TunnelLatencyMillis, want, ptr.Deref(c.KPIs.LatencyMillis, 0))
		return nil
	})
}

// TestConsumerReachesOrchestratedPodDirectly: a consumer pod reaches a pod
// the broker runs on a provider at the address the consumer shows for it,
// through the consumer's own tunnel with that provider; what crosses the
// broker's tunnel meanwhile is far less than what the pod was sent.
func TestConsumerReachesOrchestratedPodDirectly(t *testing.T) {
	consumer, provider, b := suite.Members[0], suite.Members[1], suite.Broker
	framework.LogOnFailure(t, consumer, provider, b)
	ctx := t.Context()

	// The broker consumes the provider, the consumer the broker; the
	// provider accepts the broker's introductions, the consumer follows
	// the broker's.
	framework.AddWithToken(t, b, provider)
	framework.AddWithToken(t, consumer, b)
	framework.WaitVirtualNodesReady(t, b, provider)
	framework.WaitVirtualNodesReady(t, consumer, b)
	framework.SetClusterConfig(t, provider, func(spec *configv1alpha1.ClusterConfigSpec) {
		spec.PeeringConfig.Introducers = []string{b.ClusterID}
	})
	framework.SetClusterConfig(t, consumer, func(spec *configv1alpha1.ClusterConfigSpec) {
		spec.PeeringConfig.Brokers = []string{b.ClusterID}
	})
	o := &ctlbroker.Options{Kubeconfig: consumer.Kubeconfig, Namespace: install.DefaultNamespace, Broker: b.ClusterID, URL: b.BrokerURL,
		TTL: time.Hour, Timeout: 30 * time.Second}
	framework.Eventually(t, time.Minute, func() error { return o.Toggle(ctx, provider.ClusterID, true, io.Discard) })

	// The consumer peers with the provider on its own, for the network
	// only: no virtual node of the provider's.
	framework.Eventually(t, 2*time.Minute, func() error {
		var fc discoveryv1alpha1.ForeignCluster
		if err := framework.Client(t, consumer).Get(ctx, client.ObjectKey{Name: provider.ClusterID}, &fc); err != nil {
			return err
		}
		if fc.Labels[discoveryv1alpha1.IntroducedByLabel] != b.ClusterID {
			return fmt.Errorf("%s's ForeignCluster of %s is not introduced by the broker: %v", consumer.Name, provider.Name, fc.Labels)
		}
		return nil
	})
	established(t, consumer, provider)
	established(t, consumer, b)
	established(t, b, provider)
	tunnelKPI(t, b, provider)
	if n, err := framework.VirtualNode(framework.Client(t, consumer), provider.ClusterID); err == nil {
		t.Errorf("%s has a virtual node %s of %s, which it peered with for the network only", consumer.Name, n.Name, provider.Name)
	}

	const ns = "direct"
	framework.Offload(t, consumer, []*playground.Member{b}, ns, offloadingv1alpha1.NamespaceOffloadingSpec{
		PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote,
		ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{b.ClusterID}},
		}}}},
	}, 1)
	server := framework.CheckPod(t, consumer, ns, "server", map[string]string{offloadingv1alpha1.RemoteClusterLabel: b.ClusterID}, "serve", ":8080", "orchestrated")
	// The consumer shows the pod at the address it reaches it at through
	// its own tunnel with the provider.
	framework.Eventually(t, 2*time.Minute, func() error {
		if err := framework.Client(t, consumer).Get(ctx, client.ObjectKeyFromObject(server), server); err != nil {
			return err
		}
		for _, c := range server.Status.Conditions {
			if c.Type == offloadingv1alpha1.ConditionPodAddress && c.Reason == offloadingv1alpha1.ReasonAddressDirect && server.Status.PodIP != "" {
				return nil
			}
		}
		return fmt.Errorf("the orchestrated pod in %s: %s at %q, not at a direct address yet: %+v", consumer.Name, server.Status.Phase, server.Status.PodIP, server.Status.Conditions)
	})
	var onProvider corev1.PodList
	if err := framework.Client(t, provider).List(ctx, &onProvider, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: b.ClusterID}); err != nil {
		t.Fatal(err)
	}
	if len(onProvider.Items) != 1 {
		t.Fatalf("%s runs %d pods for the broker, want the orchestrated one", provider.Name, len(onProvider.Items))
	}
	t.Logf("the orchestrated pod runs in %s at %s, shown in %s at %s", provider.Name, onProvider.Items[0].Status.PodIP, consumer.Name, server.Status.PodIP)

	// A client on the consumer's real node fetches 200 kB from it six
	// times (netcheck's first answer and five timed requests).
	const size, fetches = 200_000, 6
	const clientNS = "direct-client"
	if err := framework.Client(t, consumer).Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clientNS}}); err != nil {
		t.Fatal(err)
	}
	framework.DeleteOnCleanup(t, framework.Client(t, consumer), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clientNS}})
	url := fmt.Sprintf("http://%s:8080/bytes/%d", server.Status.PodIP, size)
	brokerRX, brokerTX := tunnelBytes(t, b)
	consumerRX, _ := tunnelBytes(t, consumer)
	got := framework.CheckResults(t, consumer, framework.CheckPod(t, consumer, clientNS, "client", map[string]string{"kubernetes.io/hostname": consumer.RealNodeName(0)}, "get", url))
	brokerRX2, brokerTX2 := tunnelBytes(t, b)
	consumerRX2, _ := tunnelBytes(t, consumer)

	if r := got[url]; !r.OK || r.Answer != strings.Repeat("x", size) {
		t.Fatalf("the consumer's pod asking the orchestrated pod at %s: ok %v, %d bytes, error %q; want %d bytes", server.Status.PodIP, r.OK, len(r.Answer), r.Error, size)
	}
	through := consumerRX2 - consumerRX
	crossed := (brokerRX2 - brokerRX) + (brokerTX2 - brokerTX)
	t.Logf("during the fetches, %d bytes came in through %s's tunnel, %d crossed the broker's", through, consumer.Name, crossed)
	if through < size*fetches {
		t.Errorf("%d bytes came in through %s's tunnel, want at least the %d fetched", through, consumer.Name, size*fetches)
	}
	// What crosses the broker's tunnel meanwhile is its own probes and
	// the peerings' control traffic: a few kB, never the data.
	if crossed >= size/2 {
		t.Errorf("%d bytes crossed the broker's tunnel during the fetches, want the data to bypass it (under %d)", crossed, size/2)
	}

	t.Run("aggregated, the consumer reaches the pod through the broker, and a peer that is not its consumer does not", func(t *testing.T) {
		transit(t, consumer, provider, server, onProvider.Items[0].Status.PodIP)
	})
}

// transit has the broker's operator aggregate consumer: its pod server,
// which provider runs at providerIP, shows at an address of the broker's
// external range (in the consumer's view), names no provider; a client
// on the consumer's real node fetches from it there, and what it fetched
// crossed the broker's tunnel both ways; the provider, a peer of the
// broker's that is not its aggregated consumer, gets nothing at that
// address in its own view of the broker.
func transit(t *testing.T, consumer, provider *playground.Member, server *corev1.Pod, providerIP string) {
	t.Helper()
	ctx := t.Context()
	b := suite.Broker
	inBroker := framework.Client(t, b)
	key := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer.ClusterID), Name: brokerv1alpha1.SelectionName}
	var sel brokerv1alpha1.Selection
	if err := inBroker.Get(ctx, key, &sel); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(sel.DeepCopy())
	sel.Spec.Aggregate = &brokerv1alpha1.Aggregate{}
	if err := inBroker.Patch(ctx, &sel, patch); err != nil {
		t.Fatal(err)
	}
	var seenByConsumer netv1alpha1.TunnelEndpoint
	if err := framework.Client(t, consumer).Get(ctx, client.ObjectKey{Name: b.ClusterID}, &seenByConsumer); err != nil {
		t.Fatal(err)
	}
	external := netip.MustParsePrefix(seenByConsumer.Spec.RemoteSeenAs.ExternalCIDR)
	framework.Eventually(t, 2*time.Minute, func() error {
		if err := framework.Client(t, consumer).Get(ctx, client.ObjectKeyFromObject(server), server); err != nil {
			return err
		}
		addr, err := netip.ParseAddr(server.Status.PodIP)
		if err != nil || !external.Contains(addr) {
			return fmt.Errorf("the aggregated pod in %s at %q, not in the broker's external range as it sees it (%s) yet: %+v", consumer.Name, server.Status.PodIP, external, server.Status.Conditions)
		}
		raw, err := json.Marshal(server)
		if err != nil {
			return err
		}
		for _, hidden := range []string{provider.ClusterID, `"` + providerIP + `"`} {
			if strings.Contains(string(raw), hidden) {
				return fmt.Errorf("the aggregated pod in %s names %s: %s", consumer.Name, hidden, raw)
			}
		}
		return nil
	})
	// Only the consumer's TunnelEndpoint in the broker has transit.
	for _, m := range []*playground.Member{consumer, provider} {
		var tep netv1alpha1.TunnelEndpoint
		if err := inBroker.Get(ctx, client.ObjectKey{Name: m.ClusterID}, &tep); err != nil {
			t.Fatal(err)
		}
		if got := tep.Spec.Transit != nil && len(tep.Spec.Transit.Routes) > 0; got != (m == consumer) {
			t.Errorf("the broker's TunnelEndpoint of %s has transit routes: %v (%+v)", m.Name, got, tep.Spec.Transit)
		}
	}
	t.Logf("the aggregated pod runs in %s at %s, shown in %s at %s, through the broker", provider.Name, providerIP, consumer.Name, server.Status.PodIP)

	// A pod made once the consumer is aggregated, and the one made before
	// (whose affinity named the provider, made again): their copies in
	// the broker, which the consumer's identity there reads whole, name
	// no provider either (their node's name is opaque, their affinity
	// names that node).
	before := server.Name
	server = framework.CheckPod(t, consumer, server.Namespace, "aggregated", map[string]string{offloadingv1alpha1.RemoteClusterLabel: b.ClusterID}, "serve", ":8080", "aggregated")
	framework.Eventually(t, 2*time.Minute, func() error {
		var copies corev1.PodList
		if err := inBroker.List(ctx, &copies, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumer.ClusterID}); err != nil {
			return err
		}
		running := map[string]bool{}
		for i := range copies.Items {
			p := &copies.Items[i]
			raw, err := json.Marshal(p)
			if err != nil {
				return err
			}
			for _, hidden := range []string{provider.ClusterID, provider.Name} {
				if strings.Contains(string(raw), hidden) {
					return fmt.Errorf("the broker's copy of pod %s, which %s reads, names %s: %s", p.Name, consumer.Name, hidden, raw)
				}
			}
			running[p.Name] = p.Spec.NodeName != "" && p.Status.PodIP != "" && p.DeletionTimestamp == nil
		}
		for _, name := range []string{before, server.Name} {
			if !running[name] {
				return fmt.Errorf("the broker's copy of pod %s is not placed and running yet", name)
			}
		}
		return nil
	})
	if addr, err := netip.ParseAddr(server.Status.PodIP); err != nil || !external.Contains(addr) {
		t.Fatalf("the pod made once aggregated shows %q in %s, want an address of %s", server.Status.PodIP, consumer.Name, external)
	}

	const size, fetches = 200_000, 6
	const clientNS = "transit-client"
	if err := framework.Client(t, consumer).Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clientNS}}); err != nil {
		t.Fatal(err)
	}
	framework.DeleteOnCleanup(t, framework.Client(t, consumer), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clientNS}})
	url := fmt.Sprintf("http://%s:8080/bytes/%d", server.Status.PodIP, size)
	brokerRX, brokerTX := tunnelBytes(t, b)
	got := framework.CheckResults(t, consumer, framework.CheckPod(t, consumer, clientNS, "client", map[string]string{"kubernetes.io/hostname": consumer.RealNodeName(0)}, "get", url))
	brokerRX2, brokerTX2 := tunnelBytes(t, b)
	if r := got[url]; !r.OK || r.Answer != strings.Repeat("x", size) {
		t.Fatalf("the consumer's pod asking the aggregated pod at %s: ok %v, %d bytes, error %q; want %d bytes", server.Status.PodIP, r.OK, len(r.Answer), r.Error, size)
	}
	rx, tx := brokerRX2-brokerRX, brokerTX2-brokerTX
	t.Logf("during the fetches, the broker's tunnel received %d bytes and sent %d", rx, tx)
	if rx < size*fetches || tx < size*fetches {
		t.Errorf("the broker's tunnel received %d bytes and sent %d during the fetches, want the %d fetched both ways (in from %s, out to %s)", rx, tx, size*fetches, provider.Name, consumer.Name)
	}

	// The provider turns to the same address, in its own view of the
	// broker's external range: it is not the broker's aggregated
	// consumer, and gets nothing.
	var seenByProvider netv1alpha1.TunnelEndpoint
	if err := framework.Client(t, provider).Get(ctx, client.ObjectKey{Name: b.ClusterID}, &seenByProvider); err != nil {
		t.Fatal(err)
	}
	inBrokerRange, ok := ipam.Translate(netip.MustParseAddr(server.Status.PodIP), external, netip.MustParsePrefix(seenByConsumer.Spec.Remote.ExternalCIDR))
	if !ok {
		t.Fatalf("%s does not translate back into the broker's external range", server.Status.PodIP)
	}
	inProviderView, ok := ipam.Translate(inBrokerRange, netip.MustParsePrefix(seenByProvider.Spec.Remote.ExternalCIDR), netip.MustParsePrefix(seenByProvider.Spec.RemoteSeenAs.ExternalCIDR))
	if !ok {
		t.Fatalf("%s does not translate into %s's view of the broker", inBrokerRange, provider.Name)
	}
	const strangerNS = "transit-stranger"
	if err := framework.Client(t, provider).Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: strangerNS}}); err != nil {
		t.Fatal(err)
	}
	framework.DeleteOnCleanup(t, framework.Client(t, provider), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: strangerNS}})
	strangerURL := fmt.Sprintf("http://%s:8080/bytes/10", inProviderView)
	got = framework.CheckResults(t, provider, framework.CheckPod(t, provider, strangerNS, "stranger", map[string]string{"kubernetes.io/hostname": provider.RealNodeName(0)}, "get", strangerURL))
	if r := got[strangerURL]; r.OK {
		t.Errorf("%s, not the broker's aggregated consumer, reached the aggregated pod through the broker at %s: %q", provider.Name, inProviderView, r.Answer)
	}

	// Both ways, as an operator checks it: the consumer's client reaches
	// its pod the broker placed at the provider, by address and Service,
	// and that pod reaches the consumer's own through its copy of the
	// consumer's Service, at an address the broker's gateway leads into
	// the consumer (a route in the broker's TunnelEndpoint of the
	// provider, for the consumer's slice alone).
	framework.DeleteOnCleanup(t, framework.Client(t, consumer), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "test-liqo-network"}})
	var report bytes.Buffer
	if err := (&testnetwork.Options{Kubeconfig: consumer.Kubeconfig, Namespace: install.DefaultNamespace, TestNamespace: "test-liqo-network",
		Timeout: 3 * time.Minute, Keep: true}).Run(ctx, &report); err != nil {
		t.Fatalf("liqoctl test network from %s: %v\n%s", consumer.Name, err, report.String())
	}
	t.Logf("liqoctl test network from %s:\n%s", consumer.Name, report.String())
	if n := strings.Count(report.String(), " OK "); n != 3 || strings.Contains(report.String(), "SKIPPED") {
		t.Errorf("liqoctl test network from %s: %d checks OK, want 3 (to the broker by address and Service, and back by Service)", consumer.Name, n)
	}
	var tep netv1alpha1.TunnelEndpoint
	if err := inBroker.Get(ctx, client.ObjectKey{Name: provider.ClusterID}, &tep); err != nil {
		t.Fatal(err)
	}
	if tep.Spec.Transit == nil || len(tep.Spec.Transit.Routes) == 0 {
		t.Errorf("the broker's TunnelEndpoint of %s has no transit route, though its pod reached %s's Service", provider.Name, consumer.Name)
	} else {
		for _, r := range tep.Spec.Transit.Routes {
			if r.EndpointSlice == "" || r.Pod != "" || r.Provider != consumer.ClusterID {
				t.Errorf("the broker's TunnelEndpoint of %s routes %+v: want routes to %s's endpoints alone", provider.Name, r, consumer.Name)
			}
		}
	}

	t.Run("a slice the consumer names others' addresses in gets no transit to them", func(t *testing.T) {
		strangeSlice(t, consumer, provider, server.Namespace, tep.Spec.Transit.Routes)
	})
}

// strangeSlice writes, with the consumer's own virtual kubelet identity in
// the broker, EndpointSlices in its aggregated namespace there. One that
// names an address of the provider's pods, of the broker's own pods or of
// the broker's external range (a transit address itself), as the broker
// sees each, is refused, the address named; so is one labelled as the
// broker's EndpointSlice controller's (whose transit addresses the broker
// resolves for the providers), the label named. One that names, beside an
// address of the consumer's own pod range, one of its external range and
// one of its own pods the broker placed (both of which it may name) gets
// the provider a route to the first alone, and the routes the broker had
// (before) stay as they were.
func strangeSlice(t *testing.T, consumer, provider *playground.Member, ns string, before []netv1alpha1.TransitRoute) {
	t.Helper()
	ctx := t.Context()
	b := suite.Broker
	inBroker := framework.Client(t, b)
	var no offloadingv1alpha1.NamespaceOffloading
	if err := framework.Client(t, consumer).Get(ctx, client.ObjectKey{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
		t.Fatal(err)
	}
	remoteNS, ok := no.ReadyRemoteNamespace(b.ClusterID)
	if !ok {
		t.Fatalf("%s's namespace %s is not offloaded to the broker: %+v", consumer.Name, ns, no.Status.RemoteNamespaces)
	}
	var ofConsumer, ofProvider netv1alpha1.TunnelEndpoint
	if err := inBroker.Get(ctx, client.ObjectKey{Name: consumer.ClusterID}, &ofConsumer); err != nil {
		t.Fatal(err)
	}
	if err := inBroker.Get(ctx, client.ObjectKey{Name: provider.ClusterID}, &ofProvider); err != nil {
		t.Fatal(err)
	}
	// nth is the nth address of a range the broker's TunnelEndpoints
	// state.
	nth := func(cidr string, n int) string {
		t.Helper()
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			t.Fatalf("range %q: %v", cidr, err)
		}
		a := p.Masked().Addr()
		for range n {
			a = a.Next()
		}
		return a.String()
	}
	asConsumer := framework.ClientFor(t, framework.VirtualKubeletConfig(t, consumer, b))
	slice := func(name string, addrs ...string) *discoveryv1.EndpointSlice {
		es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: name, Labels: map[string]string{
			discoveryv1.LabelServiceName: "strange", discoveryv1.LabelManagedBy: offloadingv1alpha1.EndpointSliceManagedBy,
			offloadingv1alpha1.OriginClusterLabel: consumer.ClusterID}}, AddressType: discoveryv1.AddressTypeIPv4}
		for _, a := range addrs {
			es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
		}
		return es
	}
	own := nth(ofConsumer.Spec.RemoteSeenAs.PodCIDR, 77)
	for a, whose := range map[string]string{
		nth(ofProvider.Spec.RemoteSeenAs.PodCIDR, 5): "the provider's pods",
		nth(ofProvider.Spec.Local.PodCIDR, 5):        "the broker's own pods",
		before[0].Address:                            "a transit address of the broker's",
	} {
		err := asConsumer.Create(ctx, slice("refused", own, a))
		framework.Refused(t, fmt.Sprintf("a slice of %s's naming %s (%s)", consumer.Name, a, whose), err)
		if !strings.Contains(err.Error(), "endpoints[1].addresses[0]") {
			t.Errorf("the refusal of %s (%s) does not name the field: %v", a, whose, err)
		}
	}
	// Nor may it pass a slice off as the broker's EndpointSlice
	// controller's, whose transit addresses the broker resolves for
	// the providers (Behind) instead of checking them.
	controllers := slice("controllers", own)
	controllers.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
	err := asConsumer.Create(ctx, controllers)
	framework.Refused(t, fmt.Sprintf("a slice of %s's labelled as the EndpointSlice controller's", consumer.Name), err)
	if !strings.Contains(err.Error(), "metadata.labels["+discoveryv1.LabelManagedBy+"]") {
		t.Errorf("the refusal of a slice labelled as the EndpointSlice controller's does not name the label: %v", err)
	}
	var copies corev1.PodList
	if err := inBroker.List(ctx, &copies, client.InNamespace(remoteNS)); err != nil {
		t.Fatal(err)
	}
	placed := ""
	for _, p := range copies.Items {
		if p.Status.PodIP != "" {
			placed = p.Status.PodIP
		}
	}
	if placed == "" {
		t.Fatalf("no pod of %s's runs in the broker's %s", consumer.Name, remoteNS)
	}
	strange := slice("strange", own, nth(ofConsumer.Spec.RemoteSeenAs.ExternalCIDR, 9), placed)
	if err := asConsumer.Create(ctx, strange); err != nil {
		t.Fatalf("%s's virtual kubelet writing a slice of its own addresses into the broker: %v", consumer.Name, err)
	}
	framework.DeleteOnCleanup(t, inBroker, strange)
	key := remoteNS + "/strange"
	var through string // the transit address of the consumer's endpoint
	framework.Eventually(t, time.Minute, func() error {
		var tep netv1alpha1.TunnelEndpoint
		if err := inBroker.Get(ctx, client.ObjectKey{Name: provider.ClusterID}, &tep); err != nil {
			return err
		}
		var routes []netv1alpha1.TransitRoute
		if tep.Spec.Transit != nil {
			routes = tep.Spec.Transit.Routes
		}
		var targets []string
		for _, r := range routes {
			if r.EndpointSlice == key {
				targets = append(targets, r.Target)
				through = r.Address
			}
		}
		if len(targets) != 1 || targets[0] != own {
			return fmt.Errorf("the broker routes %v for the strange slice, want %s (of %s's pods) alone", targets, own, consumer.Name)
		}
		for _, r := range before {
			if !slices.Contains(routes, r) {
				return fmt.Errorf("the route %+v went, or changed, once %s wrote the strange slice", r, consumer.Name)
			}
		}
		return nil
	})
	// The provider's copy shows the consumer's endpoint at its transit
	// address, in the provider's view of the broker's external range.
	var seenByProvider netv1alpha1.TunnelEndpoint
	if err := framework.Client(t, provider).Get(ctx, client.ObjectKey{Name: b.ClusterID}, &seenByProvider); err != nil {
		t.Fatal(err)
	}
	shown, ok := ipam.Translate(netip.MustParseAddr(through), netip.MustParsePrefix(seenByProvider.Spec.Remote.ExternalCIDR),
		netip.MustParsePrefix(seenByProvider.Spec.RemoteSeenAs.ExternalCIDR))
	if !ok {
		t.Fatalf("the transit address %s does not translate into %s's view of the broker", through, provider.Name)
	}
	var copyOf discoveryv1.EndpointSlice
	framework.Eventually(t, time.Minute, func() error {
		var list discoveryv1.EndpointSliceList
		if err := framework.Client(t, provider).List(ctx, &list, client.MatchingLabels{discoveryv1.LabelServiceName: "strange"}); err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%s has %d copies of the strange slice, want 1", provider.Name, len(list.Items))
		}
		copyOf = list.Items[0]
		for _, ep := range copyOf.Endpoints {
			if slices.Contains(ep.Addresses, shown.String()) {
				return nil
			}
		}
		return fmt.Errorf("%s's copy of the strange slice does not show %s's endpoint at %s: %+v", provider.Name, consumer.Name, shown, copyOf.Endpoints)
	})
	addresses := func(es *discoveryv1.EndpointSlice) (out []string) {
		for _, ep := range es.Endpoints {
			out = append(out, ep.Addresses...)
		}
		return out
	}
	t.Logf("the strange slice names %v in the broker; its copy in %s: %v", addresses(strange), provider.Name, addresses(&copyOf))
}
