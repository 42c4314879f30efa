// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package foreigncluster

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// TestLANMovesAClusterOnceDNSNoLongerListsIt runs the registry against a
// real API server. A cluster found by DNS and on the LAN keeps the
// address DNS gives while a domain lists it: a LAN announcement elsewhere
// is not even checked. Once the domain withdraws it, the LAN is all that
// knows of it: the next LAN announcement at a new address is checked
// against the pinned key and moves it, and the label says LAN.
func TestLANMovesAClusterOnceDNSNoLongerListsIt(t *testing.T) {
	_, c := envtest.StartInstalled(t, "observer")
	ctx := t.Context()
	const (
		id      = "mover"
		oldURL  = "https://127.0.0.1:30001"
		newURL  = "https://127.0.0.1:30002"
		wanName = "searchdomain/zone"
	)
	var checks atomic.Int32
	r := &Registry{Client: c, LocalClusterID: "observer-1",
		Verify: func(_ context.Context, url string, o auth.ClientOptions) (*auth.Response, error) {
			checks.Add(1)
			if url != newURL || o.PinnedKey != "key-1" {
				return nil, fmt.Errorf("unexpected check of %s with key %q", url, o.PinnedKey)
			}
			return &auth.Response{ServingKey: "key-1", Identity: &auth.Identity{ClusterID: id}}, nil
		}}
	at := time.Now()
	seen := func(typ discoveryv1alpha1.DiscoveryType, source, url string) error {
		at = at.Add(3 * time.Second) // past the refresh interval: every sighting is considered
		return r.Seen(ctx, Discovery{Sighting: Sighting{ClusterID: id, AuthURL: url}, Source: source, Type: typ, At: at})
	}
	get := func() *discoveryv1alpha1.ForeignCluster {
		t.Helper()
		fc, err := Find(ctx, c, id)
		if err != nil || fc == nil {
			t.Fatalf("the ForeignCluster of %s: %v (found: %t)", id, err, fc != nil)
		}
		return fc
	}
	for _, s := range []struct {
		typ    discoveryv1alpha1.DiscoveryType
		source string
	}{{discoveryv1alpha1.WanDiscovery, wanName}, {discoveryv1alpha1.LanDiscovery, "mdns"}} {
		if err := seen(s.typ, s.source, oldURL); err != nil {
			t.Fatal(err)
		}
	}
	fc := get()
	patch := client.MergeFrom(fc.DeepCopy())
	fc.Status.AuthServiceKeyFingerprint = "key-1" // first contact pinned the key
	if err := c.Status().Patch(ctx, fc, patch); err != nil {
		t.Fatal(err)
	}

	// Listed by DNS: the LAN cannot move it.
	if err := seen(discoveryv1alpha1.LanDiscovery, "mdns", newURL); err != nil {
		t.Fatalf("a LAN sighting of a cluster DNS lists: %v", err)
	}
	if fc := get(); fc.Spec.ForeignAuthURL != oldURL || fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] != string(discoveryv1alpha1.WanDiscovery) {
		t.Fatalf("a LAN sighting changed a cluster DNS lists: URL %s, type %s", fc.Spec.ForeignAuthURL, fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel])
	}
	if n := checks.Load(); n != 0 {
		t.Fatalf("the LAN address of a cluster DNS lists was dialled %d times", n)
	}

	// The domain no longer lists it.
	if err := r.Withdrawn(ctx, id, wanName); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		err := seen(discoveryv1alpha1.LanDiscovery, "mdns", newURL)
		var refused *RefusedError
		if err != nil && (!errors.As(err, &refused) || refused.Reason != RefusedUnverifiedAddress) {
			t.Fatalf("a LAN sighting at a new address: %v", err)
		}
		fc := get()
		if fc.Spec.ForeignAuthURL != newURL || fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] != string(discoveryv1alpha1.LanDiscovery) {
			return fmt.Errorf("URL %s, type %s; want %s, LAN", fc.Spec.ForeignAuthURL, fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel], newURL)
		}
		return nil
	})
	if n := checks.Load(); n == 0 {
		t.Fatal("the new address was never checked against the pinned key")
	}
}
