// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package discovery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/discovery/dnssd"
	"github.com/liqo-go/liqo/internal/discovery/mdns"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestJoinedClusterIsKeptWhenSilent: a joined cluster that stops
// advertising is not deleted but marked unreachable, and reachable again
// when it comes back.
func TestJoinedClusterIsKeptWhenSilent(t *testing.T) {
	m, quiet := member(0), member(2)
	framework.LogOnFailure(t, m, quiet)
	c := framework.Client(t, m)
	framework.Eventually(t, 10*time.Second, func() error { return seenByMDNS(t, m, quiet) })
	fc, err := foreignClusterOf(t, m, quiet)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(fc.DeepCopy())
	fc.Spec.Join = true
	if err := c.Patch(t.Context(), fc, patch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var cur discoveryv1alpha1.ForeignCluster
		if c.Get(context.Background(), client.ObjectKeyFromObject(fc), &cur) == nil {
			p := client.MergeFrom(cur.DeepCopy())
			cur.Spec.Join = false
			_ = c.Patch(context.Background(), &cur, p)
		}
	})

	setDiscovery(t, quiet, func(d *configv1alpha1.DiscoveryConfig) { d.EnableAdvertisement = enable(false) })
	framework.Eventually(t, 20*time.Second, func() error {
		cur, err := foreignClusterOf(t, m, quiet)
		if err != nil {
			return fmt.Errorf("the joined cluster was deleted: %w", err)
		}
		if cond := condition(cur, discoveryv1alpha1.ConditionReachable); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "NoLongerAnnounced" {
			return fmt.Errorf("Reachable = %+v, want False/NoLongerAnnounced", cond)
		}
		return nil
	})
	// Still there for three more intervals.
	framework.Consistently(t, 3*interval, func() error {
		if _, err := foreignClusterOf(t, m, quiet); err != nil {
			return fmt.Errorf("the joined cluster was deleted: %w", err)
		}
		return nil
	})

	setDiscovery(t, quiet, func(d *configv1alpha1.DiscoveryConfig) { d.EnableAdvertisement = enable(true) })
	framework.Eventually(t, 10*time.Second, func() error {
		cur, err := foreignClusterOf(t, m, quiet)
		if err != nil {
			return err
		}
		if cond := condition(cur, discoveryv1alpha1.ConditionReachable); cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Reachable = %+v, want True once announced again", cond)
		}
		return nil
	})
}

// TestManualClusterIsKeptWhenUnreachable: a cluster inserted by hand whose
// auth service does not answer is marked unreachable after the missed
// checks, never deleted.
func TestManualClusterIsKeptWhenUnreachable(t *testing.T) {
	m := member(0)
	framework.LogOnFailure(t, m)
	c := framework.Client(t, m)
	port, err := localcluster.FreePort() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	fc := &discoveryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "gone-by-hand"},
		Spec: discoveryv1alpha1.ForeignClusterSpec{
			ForeignAuthURL: fmt.Sprintf("https://127.0.0.1:%d", port), InsecureSkipTLSVerify: ptr.To(true),
		},
	}
	if err := c.Create(t.Context(), fc); err != nil {
		t.Fatal(err)
	}
	framework.DeleteOnCleanup(t, c, fc)
	framework.Eventually(t, 20*time.Second, func() error {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(fc), fc); err != nil {
			return fmt.Errorf("the manual ForeignCluster is gone: %w", err)
		}
		if fc.Status.MissedHealthChecks < 3 {
			return fmt.Errorf("%d missed health checks so far", fc.Status.MissedHealthChecks)
		}
		if cond := condition(fc, discoveryv1alpha1.ConditionReachable); cond == nil || cond.Status != metav1.ConditionFalse {
			return fmt.Errorf("Reachable = %+v, want False", cond)
		}
		return nil
	})
}

// TestAutojoinDefault: with autojoin on in the ClusterConfig, a cluster
// never seen before is joined as soon as it is discovered.
func TestAutojoinDefault(t *testing.T) {
	m := member(0)
	framework.LogOnFailure(t, m)
	c := framework.Client(t, m)
	// Autojoin applies to clusters seen for the first time: the other
	// members must be known before it is on (a test before may have
	// removed them), or m would join them, and a test after would find
	// them joined.
	for _, other := range suite.Members {
		if other != m {
			framework.Eventually(t, 30*time.Second, func() error { _, err := foreignClusterOf(t, m, other); return err })
		}
	}
	setDiscovery(t, m, func(d *configv1alpha1.DiscoveryConfig) { d.AutoJoin = enable(true) })

	conn, err := mdns.Listen(t.Context(), "lo", suite.MDNSPort)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := mdns.NewServer(conn, mdns.Options{Service: dnssd.DefaultService, Handler: mdns.NopHandler{}})
	go func() { _ = s.Serve(ctx) }()
	const id = "fresh-autojoin"
	inst := &dnssd.Instance{Name: id, Service: dnssd.DefaultService, Domain: "local.", Host: id, Port: 1,
		Announcement: dnssd.Announcement{ClusterID: id, ClusterName: id, AuthURL: "https://127.0.0.1:1"}}
	// Every member hears the announcement on the shared port, not only m:
	// withdraw it, then remove what each of them recorded.
	framework.Cleanup(t, func(ctx context.Context) {
		_ = s.Withdraw()
		for _, each := range suite.Members {
			var list discoveryv1alpha1.ForeignClusterList
			cc := framework.Client(t, each)
			if err := cc.List(ctx, &list, client.MatchingLabels{discoveryv1alpha1.ClusterIDLabel: id}); err != nil {
				t.Errorf("cleanup: listing %s's ForeignClusters: %v", each.Name, err)
				continue
			}
			for i := range list.Items {
				if err := cc.Delete(ctx, &list.Items[i]); client.IgnoreNotFound(err) != nil {
					t.Errorf("cleanup: deleting %s's ForeignCluster %s: %v", each.Name, list.Items[i].Name, err)
				}
			}
		}
	})
	// Publish until recorded: the autojoin setting takes a moment to apply.
	framework.Eventually(t, 10*time.Second, func() error {
		if err := s.Publish(ctx, inst); err != nil {
			return err
		}
		return joinedForeignCluster(t, c, id) // autojoin is on
	})
}
