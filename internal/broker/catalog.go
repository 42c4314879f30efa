// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/broker/measure"
	"github.com/liqo-go/liqo/internal/sharing"
	"github.com/liqo-go/liqo/internal/virtualkubelet/node"
)

// pocCluster is a ForeignCluster as the original broker answered GET
// /api/clusters: every field present, as its clients read them.
type pocCluster struct {
	Kind       string      `json:"kind"`
	APIVersion string      `json:"apiVersion"`
	Metadata   pocMetadata `json:"metadata"`
	Spec       pocSpec     `json:"spec"`
}

type pocMetadata struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

type pocSpec struct {
	ClusterIdentity        pocIdentity `json:"clusterIdentity"`
	OutgoingPeeringEnabled string      `json:"outgoingPeeringEnabled"`
	IncomingPeeringEnabled string      `json:"incomingPeeringEnabled"`
	NetworkingEnabled      string      `json:"networkingEnabled"`
	ForeignAuthURL         string      `json:"foreignAuthUrl"`
	InsecureSkipTLSVerify  bool        `json:"insecureSkipTLSVerify"`
	TTL                    int32       `json:"ttl"`
}

type pocIdentity struct {
	ClusterID   string `json:"clusterID"`
	ClusterName string `json:"clusterName"`
}

// Cluster is a cluster of the catalog in the v1 API: who it is, how it is
// peered with the broker, what it offers and what is free of it now.
type Cluster struct {
	ClusterID   string `json:"clusterID"`
	ClusterName string `json:"clusterName"`
	// AuthURL is the cluster's auth service.
	AuthURL string `json:"authURL,omitempty"`
	// Provider is true when the broker consumes the cluster's resources
	// (the cluster can be orchestrated to); Consumer when the cluster
	// consumes the broker's.
	Provider bool `json:"provider"`
	Consumer bool `json:"consumer"`
	// Offer is what the cluster offers the broker, from its
	// Advertisement; absent for a cluster that offers nothing.
	Offer *Offer `json:"offer,omitempty"`
	// Free is the offer less what the broker's pods use of it now.
	Free corev1.ResourceList `json:"free,omitempty"`
	// Reserved is what consumers' policies hold of the offer (their
	// share of their requests, whether their pods run there yet or not).
	Reserved corev1.ResourceList `json:"reserved,omitempty"`
	// Ready says whether the broker's virtual node for the cluster is
	// Ready.
	Ready bool `json:"ready"`
	// KPIs are what the broker measures itself of a provider.
	KPIs *KPIs `json:"kpis,omitempty"`
}

// KPIs are what the broker measures itself of a provider: its own health
// checks of the provider's API server (internal/broker/measure), and the
// pods it runs there.
type KPIs struct {
	// Measured is when the provider was last probed; AgeSeconds, how long
	// before this answer. Absent before the first probe.
	Measured   *metav1.Time `json:"measured,omitempty"`
	AgeSeconds *float64     `json:"ageSeconds,omitempty"`
	// Reachable says whether the last probe was answered ready;
	// UnreachableSince when they began to fail, while they do.
	Reachable        bool         `json:"reachable"`
	UnreachableSince *metav1.Time `json:"unreachableSince,omitempty"`
	LastError        string       `json:"lastError,omitempty"`
	// Uptime over each window (1h, 24h, 7d), from 0 to 1: the share of
	// the probes answered. A window without probes is absent.
	Uptime map[brokerv1alpha1.UptimeWindow]float64 `json:"uptime,omitempty"`
	// LatencyMillis is the median round trip of the answered probes of
	// the last 15 s.
	LatencyMillis *float64 `json:"latencyMillis,omitempty"`
	// TunnelLatencyMillis is the round trip through the network fabric's
	// tunnel to the provider's gateway, as the broker cluster's gateway
	// measures it (a probe a second); absent while no tunnel to the
	// provider is established.
	TunnelLatencyMillis *float64 `json:"tunnelLatencyMillis,omitempty"`
	// History is the last hour, a point a minute, oldest first.
	History []Point `json:"history,omitempty"`
	// Pods are the broker's pods there, by phase.
	Pods PodHealth `json:"pods"`
}

// Point is a minute of a provider's history.
type Point struct {
	Start metav1.Time `json:"start"`
	// Up is the share of the minute's probes answered, from 0 to 1.
	Up float64 `json:"up"`
	// LatencyMillis is the median round trip of those answered.
	LatencyMillis float64 `json:"latencyMillis"`
}

// PodHealth is how the broker's pods fare at a provider.
type PodHealth struct {
	Running int `json:"running"`
	Pending int `json:"pending"`
	Failed  int `json:"failed"`
	// StartMillis is the median time from a pod's creation to its
	// readiness, over those Ready now.
	StartMillis *float64 `json:"startMillis,omitempty"`
}

// Offer is a provider's Advertisement as the catalog shows it.
type Offer struct {
	Resources  corev1.ResourceList `json:"resources"`
	Labels     map[string]string   `json:"labels,omitempty"`
	Properties map[string]string   `json:"properties,omitempty"`
	Prices     corev1.ResourceList `json:"prices,omitempty"`
	// Currency and Period of Prices.
	Currency string      `json:"currency,omitempty"`
	Period   string      `json:"period,omitempty"`
	Expires  metav1.Time `json:"expires"`
}

// ClusterList is the v1 catalog.
type ClusterList struct {
	Kind       string    `json:"kind"`
	APIVersion string    `json:"apiVersion"`
	Items      []Cluster `json:"items"`
}

// APIVersion of the broker's v1 API objects.
const APIVersion = "broker.liqo.io/v1"

// readCatalog checks the caller may read the catalog. A consumer of the
// orchestrator, which may read its own selection, reads the providers it
// chooses among (providersOnly), without the catalog's right.
func (s *Server) readCatalog(r *http.Request) (providersOnly bool, err error) {
	if s.PublicCatalog {
		return false, nil
	}
	err = s.authorize(r, "get", CatalogResource, "", "")
	var forbidden *apiError
	if err == nil || !s.Modes.Orchestrator || !errors.As(err, &forbidden) || forbidden.code != http.StatusForbidden {
		return false, err
	}
	if r.URL.Query().Has("consumer") {
		return false, err
	}
	if _, serr := s.selectionFor(r, "get"); serr != nil {
		return false, err
	}
	return true, nil
}

// clusters answers the original GET /api/clusters: the broker's peers as
// ForeignClusters (in orchestrator mode alone, the providers).
func (s *Server) clusters(w http.ResponseWriter, r *http.Request) error {
	providersOnly, err := s.readCatalog(r)
	if err != nil {
		return err
	}
	cs, err := s.catalog(r.Context())
	if err != nil {
		return err
	}
	out := make([]pocCluster, 0, len(cs))
	for _, c := range cs {
		if (!s.Modes.Catalog || providersOnly) && !c.Provider {
			continue
		}
		fc := c.fc
		dtype := fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel]
		if dtype == "" {
			dtype = string(discoveryv1alpha1.ManualDiscovery)
		}
		out = append(out, pocCluster{
			Kind: "ForeignCluster", APIVersion: discoveryv1alpha1.GroupVersion.String(),
			Metadata: pocMetadata{Name: fc.Name, Labels: map[string]string{
				discoveryv1alpha1.ClusterIDLabel: fc.Spec.ClusterIdentity.ClusterID, discoveryv1alpha1.DiscoveryTypeLabel: dtype,
			}},
			Spec: pocSpec{
				ClusterIdentity:        pocIdentity{ClusterID: fc.Spec.ClusterIdentity.ClusterID, ClusterName: fc.Spec.ClusterIdentity.ClusterName},
				OutgoingPeeringEnabled: orAuto(fc.Spec.OutgoingPeeringEnabled),
				IncomingPeeringEnabled: orAuto(fc.Spec.IncomingPeeringEnabled),
				NetworkingEnabled:      orAuto(fc.Spec.NetworkingEnabled),
				ForeignAuthURL:         fc.Spec.ForeignAuthURL,
				InsecureSkipTLSVerify:  fc.Spec.InsecureSkipTLSVerify != nil && *fc.Spec.InsecureSkipTLSVerify,
				TTL:                    fc.Spec.TTL,
			},
		})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func orAuto(p discoveryv1alpha1.PeeringEnabled) string {
	if p == "" {
		return string(discoveryv1alpha1.PeeringEnabledAuto)
	}
	return string(p)
}

// v1Clusters answers GET /api/v1/clusters.
func (s *Server) v1Clusters(w http.ResponseWriter, r *http.Request) error {
	providersOnly, err := s.readCatalog(r)
	if err != nil {
		return err
	}
	cs, err := s.catalog(r.Context())
	if err != nil {
		return err
	}
	out := ClusterList{Kind: "ClusterList", APIVersion: APIVersion, Items: make([]Cluster, 0, len(cs))}
	for _, c := range cs {
		if (!s.Modes.Catalog || providersOnly) && !c.Provider {
			continue
		}
		out.Items = append(out.Items, c.Cluster)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// v1Cluster answers GET /api/v1/clusters/{id}.
func (s *Server) v1Cluster(w http.ResponseWriter, r *http.Request) error {
	providersOnly, err := s.readCatalog(r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
		return errBadRequest(fmt.Sprintf("id: %q is not a cluster ID: %s", id, strings.Join(errs, "; ")))
	}
	cs, err := s.catalog(r.Context())
	if err != nil {
		return err
	}
	for _, c := range cs {
		if c.ClusterID == id && ((s.Modes.Catalog && !providersOnly) || c.Provider) {
			writeJSON(w, http.StatusOK, c.Cluster)
			return nil
		}
	}
	return errNotFound(fmt.Sprintf("the broker knows no cluster %s", id))
}

// entry is a catalog cluster with the ForeignCluster it comes from.
type entry struct {
	Cluster
	fc *discoveryv1alpha1.ForeignCluster
}

// catalog lists the clusters peered with the broker, either way, sorted
// by ClusterID.
func (s *Server) catalog(ctx context.Context) ([]entry, error) {
	var fcs discoveryv1alpha1.ForeignClusterList
	if err := s.Reader.List(ctx, &fcs); err != nil {
		return nil, fmt.Errorf("listing the ForeignClusters: %w", err)
	}
	var nodes corev1.NodeList
	if err := s.Reader.List(ctx, &nodes, client.MatchingLabels{offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue}); err != nil {
		return nil, fmt.Errorf("listing the virtual nodes: %w", err)
	}
	byProvider := map[string]*corev1.Node{}
	for i := range nodes.Items {
		byProvider[nodes.Items[i].Labels[offloadingv1alpha1.RemoteClusterLabel]] = &nodes.Items[i]
	}
	var out []entry
	for i := range fcs.Items {
		fc := &fcs.Items[i]
		id := fc.Spec.ClusterIdentity.ClusterID
		provider := outgoingAccepted(fc)
		if id == "" || (!provider && !fc.Status.IncomingPeering) {
			continue
		}
		c := Cluster{
			ClusterID: id, ClusterName: fc.Spec.ClusterIdentity.ClusterName, AuthURL: fc.Spec.ForeignAuthURL,
			Provider: provider, Consumer: fc.Status.IncomingPeering,
		}
		if provider {
			if err := s.kpis(ctx, &c); err != nil {
				return nil, err
			}
			if err := s.reserved(ctx, &c); err != nil {
				return nil, err
			}
			if err := s.offer(ctx, &c, byProvider[id]); err != nil {
				return nil, err
			}
		}
		out = append(out, entry{Cluster: c, fc: fc})
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.ClusterID, b.ClusterID) })
	return out, nil
}

// outgoingAccepted says whether the broker consumes fc: its
// PeeringRequest was accepted.
func outgoingAccepted(fc *discoveryv1alpha1.ForeignCluster) bool {
	c := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == discoveryv1alpha1.ReasonAccepted
}

// offer fills c's offer from the provider's Advertisement, and what is
// free of it from the virtual node's pods.
func (s *Server) offer(ctx context.Context, c *Cluster, vnode *corev1.Node) error {
	var adv sharingv1alpha1.Advertisement
	key := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(c.ClusterID), Name: sharingv1alpha1.AdvertisementName(c.ClusterID)}
	switch err := s.Reader.Get(ctx, key, &adv); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading the Advertisement of %s: %w", c.ClusterID, err)
	}
	c.Offer = &Offer{
		Resources: adv.Spec.Resources, Labels: adv.Spec.Labels, Properties: adv.Spec.Properties,
		Prices: adv.Spec.Prices, Currency: adv.Spec.Currency, Period: adv.Spec.PricePeriod, Expires: adv.Spec.TimeToLive,
	}
	if len(adv.Spec.Prices) > 0 && c.Offer.Period == "" {
		c.Offer.Period = string(brokerv1alpha1.PerHour)
	}
	if vnode == nil {
		return nil
	}
	c.Ready = node.Ready(vnode) == corev1.ConditionTrue
	var pods corev1.PodList
	if err := s.Reader.List(ctx, &pods, client.MatchingFields{node.PodsByNodeField: vnode.Name}); err != nil {
		return fmt.Errorf("listing the pods of %s: %w", vnode.Name, err)
	}
	// What the broker's own pods leave free of it, as its Broadcaster
	// counts a share: effective requests, finished pods freed.
	c.Free = sharing.SharedOn([]corev1.Node{*vnode}, pods.Items, "", 100, sharing.OnProviders([]string{c.ClusterID}))
	c.KPIs.Pods = podHealth(pods.Items)
	return nil
}

// kpis fills what the broker measured of provider c.
func (s *Server) kpis(ctx context.Context, c *Cluster) error {
	c.KPIs = &KPIs{}
	var m brokerv1alpha1.Measurement
	switch err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: c.ClusterID}, &m); {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading the measurement of %s: %w", c.ClusterID, err)
	}
	now := s.now()
	k, st := c.KPIs, &m.Status
	k.Reachable, k.UnreachableSince, k.LastError = st.Reachable, st.UnreachableSince, st.LastError
	if st.LastProbe != nil {
		k.Measured = st.LastProbe
		age := now.Sub(st.LastProbe.Time).Seconds()
		k.AgeSeconds = &age
	}
	if len(st.Minutes) > 0 {
		k.Uptime = measure.Uptime(st, now)
	}
	if st.LatencyMicros > 0 {
		ms := float64(st.LatencyMicros) / 1000
		k.LatencyMillis = &ms
	}
	if st.TunnelLatencyMicros > 0 {
		ms := float64(st.TunnelLatencyMicros) / 1000
		k.TunnelLatencyMillis = &ms
	}
	for _, b := range st.Minutes {
		p := Point{Start: b.Start, LatencyMillis: float64(b.LatencyMicros) / 1000}
		if b.Probes > 0 {
			p.Up = float64(b.Up) / float64(b.Probes)
		}
		k.History = append(k.History, p)
	}
	return nil
}

// reserved fills what consumers' policies hold of provider c.
func (s *Server) reserved(ctx context.Context, c *Cluster) error {
	var r brokerv1alpha1.Reservation
	switch err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: c.ClusterID}, &r); {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading the reservations of %s: %w", c.ClusterID, err)
	}
	c.Reserved = r.Status.Reserved
	return nil
}

// podHealth counts the pods by phase, and their median start.
func podHealth(pods []corev1.Pod) PodHealth {
	var h PodHealth
	var starts []float64
	for i := range pods {
		p := &pods[i]
		switch p.Status.Phase {
		case corev1.PodSucceeded:
			// Done: neither running nor failing nor waiting.
			continue
		case corev1.PodRunning:
			h.Running++
		case corev1.PodFailed:
			h.Failed++
		default:
			h.Pending++
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
				starts = append(starts, float64(c.LastTransitionTime.Sub(p.CreationTimestamp.Time).Milliseconds()))
			}
		}
	}
	if len(starts) > 0 {
		slices.Sort(starts)
		h.StartMillis = &starts[len(starts)/2]
	}
	return h
}
