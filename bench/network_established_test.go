// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package bench

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/internal/testenv"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// BenchmarkNetworkEstablished times a peering to its network: on a fresh
// playground with a network in every run (two clusters with a real node
// each, the chart's gateways as pods, one pod range), the consumer joins
// the provider, and the time from join=true, and from the peering's
// acceptance, to NetworkEstablished on the consumer's ForeignCluster is
// measured. The baseline, in the same run, is the data plane alone: the
// same gateway configured by hand on both ends in bare namespaces, from
// configuration to the first probe answered. Goal (issue 16): established
// within 5 s of the peering.
func BenchmarkNetworkEstablished(b *testing.B) {
	bin, err := localcluster.FindBinDir()
	if err != nil {
		b.Fatal(err)
	}
	if err := localcluster.RealNodesSupported(bin); err != nil {
		testenv.Unsupported(b, "no real nodes: "+err.Error())
	}
	gatewayImage, err := framework.PlaygroundGatewayImage(b.Context(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	nb := startNetBench(b)
	var fromJoin, fromAccepted, dataPlane []time.Duration
	for b.Loop() {
		start := time.Now()
		stopGateways, _ := nb.gateways()
		dataPlane = append(dataPlane, time.Since(start))
		stopGateways()

		p, stop := startStoppablePlayground(b, playground.Options{
			Clusters: 2, Network: true, GatewayImage: gatewayImage,
			ClusterConfig: func(_ string, spec *configv1alpha1.ClusterConfigSpec) {
				spec.DiscoveryConfig.EnableDiscovery = ptr.To(false)
				spec.DiscoveryConfig.EnableAdvertisement = ptr.To(false)
			},
		}, 5*time.Minute)
		consumer, provider := p.Members[0], p.Members[1]
		c, err := client.New(consumer.RESTConfig, client.Options{Scheme: api.NewScheme()})
		if err != nil {
			b.Fatal(err)
		}
		addStopped(b, c, provider)
		// The gateways run before the peering, as in a cluster where Liqo
		// is installed: their start is not what is timed.
		for _, m := range p.Members {
			waitGatewayReady(b, m)
		}
		join, accepted, established := timeNetwork(b, c, provider.ClusterID)
		fromJoin = append(fromJoin, established-join)
		fromAccepted = append(fromAccepted, established-accepted)
		stop()
	}
	med := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	b.ReportMetric(med(fromJoin).Seconds(), "s-join-to-established")
	b.ReportMetric(med(fromAccepted).Seconds(), "s-accepted-to-established")
	b.ReportMetric(med(dataPlane).Seconds(), "s-dataplane-alone")
	b.ReportMetric(med(fromAccepted).Seconds()/med(dataPlane).Seconds(), "ratio-to-dataplane")
	b.Logf("medians of %d fresh run(s): join=true -> NetworkEstablished %s, peering Accepted -> NetworkEstablished %s (goal: within 5 s); "+
		"the data plane alone, two gateways configured by hand, established %s after configuration: ratio %.2f",
		len(fromJoin), med(fromJoin).Round(time.Millisecond), med(fromAccepted).Round(time.Millisecond),
		med(dataPlane).Round(time.Millisecond), med(fromAccepted).Seconds()/med(dataPlane).Seconds())
}

// waitGatewayReady waits for m's gateway pod to be Ready.
func waitGatewayReady(b *testing.B, m *playground.Member) {
	b.Helper()
	c, err := client.New(m.RESTConfig, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var pods corev1.PodList
		if err := c.List(b.Context(), &pods, client.InNamespace(install.DefaultNamespace),
			client.MatchingLabels{netv1alpha1.GatewayComponentLabel: netv1alpha1.GatewayComponentValue}); err != nil {
			b.Fatal(err)
		}
		for _, p := range pods.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: no gateway pod Ready after 2 minutes", m.Name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// timeNetwork sets join=true on the consumer's ForeignCluster of the
// provider and polls it: it returns when the join was made, when the
// peering was Accepted and when NetworkEstablished became True, as
// offsets from the same origin.
func timeNetwork(b *testing.B, c client.Client, providerID string) (join, accepted, established time.Duration) {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), 2*time.Minute)
	defer cancel()
	origin := time.Now()
	fc := &discoveryv1alpha1.ForeignCluster{}
	fc.Name = providerID
	if err := c.Patch(ctx, fc, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"join":true}}`))); err != nil {
		b.Fatal(err)
	}
	join = time.Since(origin)
	accepted = -1
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
			b.Fatal(err)
		}
		now := time.Since(origin)
		if cond := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested); accepted < 0 && cond != nil && cond.Reason == discoveryv1alpha1.ReasonAccepted {
			accepted = now
		}
		if accepted >= 0 && meta.IsStatusConditionTrue(fc.Status.Conditions, discoveryv1alpha1.ConditionNetworkEstablished) {
			return join, accepted, now
		}
		if ctx.Err() != nil {
			b.Fatalf("the network to %s not established within 2 minutes of join=true: %+v", providerID, fc.Status.Conditions)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
