// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package controllermanager

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/sharing"
	vknode "github.com/liqo-go/liqo/internal/virtualkubelet/node"
)

var (
	peersDesc = prometheus.NewDesc("liqo_peers",
		"ForeignClusters by condition (Reachable, CATrusted, Authenticated, PeeringRequested, AdvertisementAccepted, NetworkEstablished, VirtualNodeReady) and its status.",
		[]string{"condition", "status"}, nil)
	offersDesc = prometheus.NewDesc("liqo_offers",
		"Offers (Advertisements) providers made this cluster, by phase (ACCEPTED, REFUSED, or empty while undecided) and reason.",
		[]string{"phase", "reason"}, nil)
	virtualNodesDesc = prometheus.NewDesc("liqo_virtual_nodes",
		"This cluster's virtual nodes, by provider and Ready status.", []string{"provider", "ready"}, nil)
	offloadedPodsDesc = prometheus.NewDesc("liqo_offloaded_pods",
		"Pods bound to this cluster's virtual nodes, by provider and phase.", []string{"provider", "phase"}, nil)
)

// stateCollector reports, at each scrape, what this cluster's cache holds
// of its peerings: the ForeignClusters' phases, the offers, the virtual
// nodes and their pods. Nothing is kept between scrapes, so nothing goes
// stale; a scrape costs a few list calls on the cache.
type stateCollector struct {
	reader client.Reader
	// elected is closed once this replica leads (nil: it always does):
	// only the leader reports, so that the replicas' series do not add
	// up to twice the peers.
	elected <-chan struct{}
}

// knownPhases are the pod phases reported; any other a provider writes
// counts as Unknown, so that it cannot make new series at will.
var knownPhases = map[corev1.PodPhase]bool{corev1.PodPending: true, corev1.PodRunning: true, corev1.PodSucceeded: true, corev1.PodFailed: true}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{peersDesc, offersDesc, virtualNodesDesc, offloadedPodsDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A list that fails leaves its
// metric out of this scrape: absent, not zero.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if c.elected != nil {
		select {
		case <-c.elected:
		default:
			return // a standby: the leader reports
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type key struct{ a, b string }
	emit := func(desc *prometheus.Desc, counts map[key]float64) {
		for k, v := range counts {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, k.a, k.b)
		}
	}

	var fcs discoveryv1alpha1.ForeignClusterList
	if err := c.reader.List(ctx, &fcs); err == nil {
		counts := map[key]float64{}
		for _, fc := range fcs.Items {
			for _, cond := range fc.Status.Conditions {
				counts[key{cond.Type, string(cond.Status)}]++
			}
		}
		emit(peersDesc, counts)
	}

	var ads sharingv1alpha1.AdvertisementList
	if err := c.reader.List(ctx, &ads); err == nil {
		counts := map[key]float64{}
		for _, ad := range ads.Items {
			counts[key{string(ad.Status.Phase), ad.Status.Reason}]++
		}
		emit(offersDesc, counts)
	}

	var nodes corev1.NodeList
	if err := c.reader.List(ctx, &nodes, client.MatchingLabels{offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue}); err != nil {
		return
	}
	nodeCounts, podCounts := map[key]float64{}, map[key]float64{}
	podsListed := true
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !sharing.IsVirtual(n) {
			continue
		}
		provider := n.Labels[offloadingv1alpha1.RemoteClusterLabel]
		nodeCounts[key{provider, string(vknode.Ready(n))}]++
		var list corev1.PodList
		if err := c.reader.List(ctx, &list, client.MatchingFields{vknode.PodsByNodeField: n.Name}); err != nil {
			podsListed = false
			continue
		}
		for _, p := range list.Items {
			phase := p.Status.Phase
			if !knownPhases[phase] {
				phase = corev1.PodUnknown
			}
			podCounts[key{provider, string(phase)}]++
		}
	}
	emit(virtualNodesDesc, nodeCounts)
	if podsListed {
		emit(offloadedPodsDesc, podCounts)
	}
}
