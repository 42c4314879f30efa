// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package discovery_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/discovery/dnssd"
	"github.com/liqo-go/liqo/internal/discovery/wan"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// dnsInstance is the DNS-SD registration of a cluster in domain.
func dnsInstance(t *testing.T, id, name, authURL, domain string) *dnssd.Instance {
	t.Helper()
	_, port, err := net.SplitHostPort(authURL[len("https://"):])
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return &dnssd.Instance{
		Name: id, Service: dnssd.DefaultService, Domain: domain, Host: id, Port: uint16(p), //nolint:gosec // a port
		IPs:          []net.IP{net.ParseIP("127.0.0.1")},
		Announcement: dnssd.Announcement{ClusterID: id, ClusterName: name, AuthURL: authURL, Namespace: install.DefaultNamespace},
	}
}

func memberInstance(t *testing.T, m *playground.Member, domain string) *dnssd.Instance {
	t.Helper()
	return dnsInstance(t, m.ClusterID, m.Name, m.AuthURL, domain)
}

func createSearchDomain(t *testing.T, c client.Client, name, domain string, autojoin *bool) *discoveryv1alpha1.SearchDomain {
	t.Helper()
	sd := &discoveryv1alpha1.SearchDomain{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       discoveryv1alpha1.SearchDomainSpec{Domain: domain, AutoJoin: autojoin},
	}
	if err := c.Create(t.Context(), sd); err != nil {
		t.Fatalf("creating SearchDomain %s: %v", name, err)
	}
	framework.DeleteOnCleanup(t, c, sd)
	return sd
}

// TestSearchDomain: a SearchDomain yields the clusters registered in its
// DNS domain; removing a record deletes the ForeignCluster; the autojoin of
// the SearchDomain overrides the ClusterConfig's; a domain that does not
// resolve sets a condition with the DNS error and changes nothing else.
func TestSearchDomain(t *testing.T) {
	m, b, c3 := member(0), member(1), member(2)
	framework.LogOnFailure(t, m)
	c := framework.Client(t, m)

	// WAN only on this cluster: no mDNS browsing, nothing known.
	setDiscovery(t, m, func(d *configv1alpha1.DiscoveryConfig) { d.EnableDiscovery = enable(false) })
	framework.Eventually(t, 5*time.Second, func() error {
		if v := framework.Metric(t, m, "liqo_discovery_mdns_browsing", nil); v != 0 {
			return fmt.Errorf("still browsing")
		}
		return nil
	})
	if err := c.DeleteAllOf(t.Context(), &discoveryv1alpha1.ForeignCluster{}); err != nil {
		t.Fatal(err)
	}

	for _, mm := range []*playground.Member{b, c3} {
		dnsServer.Register(memberInstance(t, mm, zone), 30)
		t.Cleanup(func() { dnsServer.Deregister(memberInstance(t, mm, zone)) })
	}
	sd := createSearchDomain(t, c, "test-zone", zone, nil)

	want := []string{b.ClusterID, c3.ClusterID}
	slices.Sort(want)
	framework.Eventually(t, 10*time.Second, func() error {
		for _, mm := range []*playground.Member{b, c3} {
			fc, err := foreignClusterOf(t, m, mm)
			if err != nil {
				return err
			}
			if fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] != string(discoveryv1alpha1.WanDiscovery) || fc.Spec.ForeignAuthURL != mm.AuthURL {
				return fmt.Errorf("ForeignCluster for %s: type %s, URL %s", mm.Name, fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel], fc.Spec.ForeignAuthURL)
			}
			if fc.Spec.Join {
				return fmt.Errorf("%s joined, but autojoin is off", mm.Name)
			}
		}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(sd), sd); err != nil {
			return err
		}
		if !slices.Equal(sd.Status.ForeignClusters, want) {
			return fmt.Errorf("SearchDomain lists %v, want %v", sd.Status.ForeignClusters, want)
		}
		return nil
	})

	dnsServer.Deregister(memberInstance(t, c3, zone))
	framework.Eventually(t, 10*time.Second, func() error {
		if _, err := foreignClusterOf(t, m, c3); err == nil {
			return fmt.Errorf("%s still known after its record was removed", c3.Name)
		}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(sd), sd); err != nil {
			return err
		}
		if !slices.Equal(sd.Status.ForeignClusters, []string{b.ClusterID}) {
			return fmt.Errorf("SearchDomain lists %v, want only %s", sd.Status.ForeignClusters, b.ClusterID)
		}
		return nil
	})

	// A cluster never seen before, in a domain that autojoins.
	auto := dnsInstance(t, "wan-only-cluster", "wan-only", b.AuthURL, "auto."+zone)
	dnsServer.Register(auto, 30)
	t.Cleanup(func() {
		dnsServer.Deregister(auto)
		// Joined, so withdrawing the domain keeps it: remove it by hand.
		_ = c.Delete(context.Background(), &discoveryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: auto.Name}})
	})
	createSearchDomain(t, c, "auto-zone", "auto."+zone, ptr.To(true))
	framework.Eventually(t, 10*time.Second, func() error {
		return joinedForeignCluster(t, c, "wan-only-cluster") // the SearchDomain autojoins
	})

	// Found by both mDNS and DNS-SD: still one ForeignCluster, with both
	// sources, named by the more explicit WAN discovery.
	setDiscovery(t, m, func(d *configv1alpha1.DiscoveryConfig) { d.EnableDiscovery = enable(true) })
	framework.Eventually(t, 10*time.Second, func() error {
		var list discoveryv1alpha1.ForeignClusterList
		if err := c.List(t.Context(), &list, client.MatchingLabels{discoveryv1alpha1.ClusterIDLabel: b.ClusterID}); err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d ForeignClusters for %s, want 1", len(list.Items), b.Name)
		}
		var names []string
		for _, s := range list.Items[0].Status.Sources {
			names = append(names, s.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"mdns", wan.Source(sd.Name)}) {
			return fmt.Errorf("sources %v, want mdns and %s", names, wan.Source(sd.Name))
		}
		if got := list.Items[0].Labels[discoveryv1alpha1.DiscoveryTypeLabel]; got != string(discoveryv1alpha1.WanDiscovery) {
			return fmt.Errorf("discovery type %s, want WAN", got)
		}
		return nil
	})

	// A domain that does not resolve.
	var before discoveryv1alpha1.ForeignClusterList
	if err := c.List(t.Context(), &before); err != nil {
		t.Fatal(err)
	}
	missing := createSearchDomain(t, c, "missing", "nothere.example.", nil)
	framework.Eventually(t, 10*time.Second, func() error {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(missing), missing); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(missing.Status.Conditions, discoveryv1alpha1.ConditionResolved)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "DNSError" || cond.Message == "" {
			return fmt.Errorf("Resolved condition %+v, want False/DNSError with the error", cond)
		}
		return nil
	})
	// Nothing comes of it, and nothing known goes: other discovery (mDNS
	// among the members) may add clusters meanwhile, so the check is by
	// source and by name, not by count.
	var after discoveryv1alpha1.ForeignClusterList
	if err := c.List(t.Context(), &after); err != nil {
		t.Fatal(err)
	}
	still := map[string]bool{}
	for _, fc := range after.Items {
		still[fc.Name] = true
		for _, src := range fc.Status.Sources {
			if src.Name == wan.Source(missing.Name) {
				t.Errorf("ForeignCluster %s has the unresolvable domain as a source", fc.Name)
			}
		}
	}
	for _, fc := range before.Items {
		if !still[fc.Name] {
			t.Errorf("ForeignCluster %s went when a domain failed to resolve", fc.Name)
		}
	}
	if len(missing.Status.ForeignClusters) != 0 {
		t.Fatalf("a failed resolution listed %v", missing.Status.ForeignClusters)
	}
	t.Logf("unresolvable domain: %s", meta.FindStatusCondition(missing.Status.Conditions, discoveryv1alpha1.ConditionResolved).Message)
}

// TestSearchDomainServedByOthers: two DNS servers this project did not
// write, each as an operator would run it, serve a zone listing a cluster
// and a malformed TXT record: Debian's dnsmasq from its own local records
// with its defaults (TTL 0, which in unicast DNS only says not to cache),
// and BIND 9's named from a zone file (reached through dnsmasq, which
// forwards its zone). The cluster is listed; the malformed record is
// counted as dropped and named in the SearchDomain's condition; once the
// records are removed from the server, every resolution that starts
// afterwards withdraws the SearchDomain as a source.
func TestSearchDomainServedByOthers(t *testing.T) {
	trim := func(s string) string { return strings.TrimSuffix(s, ".") }
	t.Run("dnsmasq", func(t *testing.T) {
		bad := dnsInstance(t, "bad-txt", "bad", "https://127.0.0.1:1", dnsmasqZone)
		// The zone exists whatever it lists, as a real zone has records
		// at its apex: dnsmasq answers its names, NXDOMAIN for those it
		// lacks.
		zoneLines := []string{"local=/" + trim(dnsmasqZone) + "/", "host-record=" + trim(dnsmasqZone) + ",127.0.0.1"}
		malformed := []string{
			"ptr-record=" + trim(bad.ServiceFQDN()) + "," + trim(bad.InstanceFQDN()),
			"txt-record=" + trim(bad.InstanceFQDN()) + `,"not a key and value"`,
		}
		searchDomainServedBy(t, "dnsmasq", dnsmasqZone, func(inst *dnssd.Instance) error {
			if inst == nil {
				return dnsmasq.Serve(nil, zoneLines...)
			}
			return dnsmasq.Serve([]*dnssd.Instance{inst}, append(zoneLines, malformed...)...)
		})
	})
	t.Run("named", func(t *testing.T) {
		bad := dnsInstance(t, "bad-txt", "bad", "https://127.0.0.1:1", bindZone)
		malformed := []string{
			bad.ServiceFQDN() + " IN PTR " + bad.InstanceFQDN(),
			bad.InstanceFQDN() + ` IN TXT "not a key and value"`,
		}
		searchDomainServedBy(t, "named", bindZone, func(inst *dnssd.Instance) error {
			if inst == nil {
				return named.Serve(nil)
			}
			return named.Serve([]*dnssd.Instance{inst}, malformed...)
		})
	})
}

// searchDomainServedBy checks a SearchDomain of zone, whose records serve
// puts in a server (an instance of a member and a malformed one; with
// nil, none).
func searchDomainServedBy(t *testing.T, server, zone string, serve func(*dnssd.Instance) error) {
	t.Helper()
	m, b := member(0), member(1)
	framework.LogOnFailure(t, m)
	c := framework.Client(t, m)
	if err := serve(memberInstance(t, b, zone)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := serve(nil); err != nil {
			t.Error(err)
		}
	})
	droppedLabels := map[string]string{"source": dnssd.SourceDNS, "reason": dnssd.ReasonMalformed}
	droppedBefore := framework.Metric(t, m, "liqo_discovery_dropped_total", droppedLabels)

	sd := createSearchDomain(t, c, server+"-zone", zone, nil)
	source := wan.Source(sd.Name)
	framework.Eventually(t, 10*time.Second, func() error {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(sd), sd); err != nil {
			return err
		}
		if !slices.Equal(sd.Status.ForeignClusters, []string{b.ClusterID}) {
			return fmt.Errorf("SearchDomain lists %v, want %s", sd.Status.ForeignClusters, b.ClusterID)
		}
		cond := meta.FindStatusCondition(sd.Status.Conditions, discoveryv1alpha1.ConditionResolved)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != discoveryv1alpha1.ReasonRecordsDropped ||
			!strings.Contains(cond.Message, "1 dropped") || !strings.Contains(cond.Message, dnssd.ReasonMalformed) ||
			!strings.Contains(cond.Message, "bad-txt") {
			return fmt.Errorf("Resolved condition %+v, want True/%s naming the malformed instance", cond, discoveryv1alpha1.ReasonRecordsDropped)
		}
		return hasSource(t, m, b, source, true)
	})
	if after := framework.Metric(t, m, "liqo_discovery_dropped_total", droppedLabels); after <= droppedBefore {
		t.Errorf("liqo_discovery_dropped_total%v = %v, was %v: the malformed record was not counted", droppedLabels, after, droppedBefore)
	}

	if err := serve(nil); err != nil {
		t.Fatal(err)
	}
	// The first resolution to end after the records went may have asked
	// before; the one after it asked afterwards, and must have withdrawn
	// the source. LastResolved has a precision of a second.
	var first *metav1.Time
	removed := metav1.Now()
	framework.Eventually(t, 20*time.Second, func() error {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(sd), sd); err != nil {
			return err
		}
		last := sd.Status.LastResolved
		switch {
		case last == nil || !last.After(removed.Time):
			return fmt.Errorf("not resolved since the records were removed")
		case first == nil:
			first = last
			return fmt.Errorf("resolved once since the records were removed")
		case !last.After(first.Time):
			return fmt.Errorf("not resolved a second time since the records were removed")
		}
		return nil
	})
	if len(sd.Status.ForeignClusters) != 0 {
		t.Fatalf("SearchDomain still lists %v after two resolutions without records", sd.Status.ForeignClusters)
	}
	if err := hasSource(t, m, b, source, false); err != nil {
		t.Fatal(err)
	}
}

// hasSource says whether member m's ForeignCluster of other lists source
// (a ForeignCluster that is gone lists nothing).
func hasSource(t *testing.T, m, other *playground.Member, source string, want bool) error {
	t.Helper()
	fc, err := foreigncluster.Find(t.Context(), framework.Client(t, m), other.ClusterID)
	switch {
	case err != nil:
		return err
	case fc == nil && want:
		return fmt.Errorf("%s has no ForeignCluster for %s", m.Name, other.Name)
	case fc == nil:
		return nil
	}
	got := slices.ContainsFunc(fc.Status.Sources, func(s discoveryv1alpha1.DiscoverySource) bool { return s.Name == source })
	if got != want {
		return fmt.Errorf("ForeignCluster of %s: source %s listed %v, want %v (sources %+v)", other.Name, source, got, want, fc.Status.Sources)
	}
	return nil
}
