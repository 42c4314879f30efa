// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package wan

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/discovery/dnssd"
	"github.com/liqo-go/liqo/internal/discovery/dnssd/dnstest"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// TestSearchDomainListsAndWithdraws runs the SearchDomain reconciler alone
// against a real API server and an in-process DNS server: an instance the
// zone lists becomes a WAN ForeignCluster with the domain as its source, a
// malformed one is named in the Resolved condition, and an instance the
// zone drops is withdrawn.
func TestSearchDomainListsAndWithdraws(t *testing.T) {
	cfg := envtest.Start(t, "consumer")
	ctx := t.Context()
	if err := install.Install(ctx, cfg, install.Options{}); err != nil {
		t.Fatal(err)
	}
	const zone = "liqo.test"
	dns, err := dnstest.Start(zone)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dns.Close)
	instance := func(id string) *dnssd.Instance {
		return &dnssd.Instance{
			Name: id, Service: dnssd.DefaultService, Domain: zone, Host: id, Port: 1,
			IPs:          []net.IP{net.ParseIP("127.0.0.1")},
			Announcement: dnssd.Announcement{ClusterID: id, ClusterName: id, AuthURL: "https://127.0.0.1:1", Namespace: install.DefaultNamespace},
		}
	}
	listed := instance("peer-1")
	dns.Register(listed, 30)
	bad := instance("peer-2")
	bad.Announcement.AuthURL = "ftp://127.0.0.1:1"
	dns.Register(bad, 30)

	mgr := envtest.StartManager(t, cfg, func(mgr ctrl.Manager) error {
		c := mgr.GetClient()
		registry := &foreigncluster.Registry{
			Client: c, APIReader: mgr.GetAPIReader(), LocalClusterID: "local",
			Choices:  &foreigncluster.Choices{Client: c, Namespace: install.DefaultNamespace},
			AutoJoin: func() bool { return false },
		}
		return (&Reconciler{
			Client: c, Registry: registry, Resolver: &dnssd.Resolver{Server: dns.Addr},
			Service:  func() string { return dnssd.DefaultService },
			Interval: func() time.Duration { return 250 * time.Millisecond },
		}).SetupWithManager(mgr)
	})
	c := mgr.GetClient()

	sd := &discoveryv1alpha1.SearchDomain{ObjectMeta: metav1.ObjectMeta{Name: "test-zone"}, Spec: discoveryv1alpha1.SearchDomainSpec{Domain: zone}}
	if err := c.Create(ctx, sd); err != nil {
		t.Fatal(err)
	}
	source := Source(sd.Name)
	hasSource := func(fc *discoveryv1alpha1.ForeignCluster) bool {
		return fc != nil && slices.ContainsFunc(fc.Status.Sources, func(s discoveryv1alpha1.DiscoverySource) bool { return s.Name == source })
	}
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		fc, err := foreigncluster.Find(ctx, c, "peer-1")
		switch {
		case err != nil:
			return err
		case !hasSource(fc):
			return fmt.Errorf("ForeignCluster of peer-1 %+v, want one with source %s", fc, source)
		case fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] != string(discoveryv1alpha1.WanDiscovery):
			return fmt.Errorf("ForeignCluster of peer-1 labelled %v, want WAN discovery", fc.Labels)
		}
		var got discoveryv1alpha1.SearchDomain
		if err := c.Get(ctx, client.ObjectKeyFromObject(sd), &got); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, discoveryv1alpha1.ConditionResolved)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != discoveryv1alpha1.ReasonRecordsDropped {
			return fmt.Errorf("Resolved %+v, want True/%s for the malformed peer-2", cond, discoveryv1alpha1.ReasonRecordsDropped)
		}
		return nil
	})
	if fc, err := foreigncluster.Find(ctx, c, "peer-2"); err != nil || fc != nil {
		t.Fatalf("the malformed instance was recorded: %+v, %v", fc, err)
	}

	dns.Deregister(listed)
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		fc, err := foreigncluster.Find(ctx, c, "peer-1")
		if err != nil {
			return err
		}
		if hasSource(fc) {
			return errors.New("peer-1 is still listed by the domain after it left the zone")
		}
		return nil
	})
}
