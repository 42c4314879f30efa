// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package clusterconfig

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// TestClusterConfigInForce runs the ClusterConfig reconciler alone against
// a real API server: the singleton's status says the identity, name and
// auth URL in force; a spec change reaches the Store and its subscribers;
// a deleted singleton comes back with the defaults; the schema refuses a
// second ClusterConfig, naming the field.
func TestClusterConfigInForce(t *testing.T) {
	cfg, c := envtest.StartInstalled(t, "cluster")
	ctx := t.Context()
	if err := EnsureDefault(ctx, c, configv1alpha1.NetworkConfig{}); err != nil {
		t.Fatal(err)
	}
	store := &Store{}
	changed := store.Subscribe()
	envtest.StartManager(t, cfg, func(mgr ctrl.Manager) error {
		return (&Reconciler{Client: mgr.GetClient(), ClusterID: "0123456789abcdef", AuthURL: "https://127.0.0.1:30443", Store: store}).SetupWithManager(mgr)
	})
	key := client.ObjectKey{Name: configv1alpha1.ClusterConfigName}
	inForce := func(name string) {
		t.Helper()
		envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
			var cc configv1alpha1.ClusterConfig
			if err := c.Get(ctx, key, &cc); err != nil {
				return err
			}
			st := cc.Status
			ready := meta.FindStatusCondition(st.Conditions, configv1alpha1.ConditionReady)
			switch {
			case st.ClusterID != "0123456789abcdef" || st.AuthURL != "https://127.0.0.1:30443":
				return fmt.Errorf("status ClusterID %q, auth URL %q", st.ClusterID, st.AuthURL)
			case st.ClusterName != name:
				return fmt.Errorf("status cluster name %q, want %q", st.ClusterName, name)
			case ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != cc.Generation:
				return fmt.Errorf("Ready %+v at generation %d", ready, cc.Generation)
			}
			if got := store.Get(); got == nil || got.Spec.ClusterName != cc.Spec.ClusterName {
				return fmt.Errorf("the Store holds %+v, not the spec in force", got)
			}
			return nil
		})
	}
	inForce("cluster-01234567")

	var cc configv1alpha1.ClusterConfig
	if err := c.Get(ctx, key, &cc); err != nil {
		t.Fatal(err)
	}
	drain(changed)
	patch := client.MergeFrom(cc.DeepCopy())
	cc.Spec.ClusterName = "rome"
	if err := c.Patch(ctx, &cc, patch); err != nil {
		t.Fatal(err)
	}
	inForce("rome")
	select {
	case <-changed:
	default:
		t.Error("the Store's subscriber was not told of the change")
	}

	if err := c.Delete(ctx, &cc); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		var again configv1alpha1.ClusterConfig
		if err := c.Get(ctx, key, &again); err != nil {
			return err
		}
		if again.UID == cc.UID || again.Spec.ClusterName != "" {
			return fmt.Errorf("ClusterConfig %s (name %q) not recreated with the defaults", again.UID, again.Spec.ClusterName)
		}
		return nil
	})
	inForce("cluster-01234567")

	err := c.Create(ctx, &configv1alpha1.ClusterConfig{ObjectMeta: metav1.ObjectMeta{Name: "another"}})
	if err == nil || !strings.Contains(err.Error(), "metadata.name") {
		t.Errorf("creating a second ClusterConfig: %v, want a refusal naming metadata.name", err)
	}
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// TestEnsureDefaultSeedsAddressRanges: the ranges liqoctl detected fill a
// new ClusterConfig, and only the empty ranges of an existing one; what
// the schema refuses is refused with the field named.
func TestEnsureDefaultSeedsAddressRanges(t *testing.T) {
	_, c := envtest.StartInstalled(t, "cluster")
	ctx := t.Context()
	key := client.ObjectKey{Name: configv1alpha1.ClusterConfigName}
	if err := EnsureDefault(ctx, c, configv1alpha1.NetworkConfig{PodCIDR: "10.42.0.0/16"}); err != nil {
		t.Fatal(err)
	}
	var cc configv1alpha1.ClusterConfig
	if err := c.Get(ctx, key, &cc); err != nil {
		t.Fatal(err)
	}
	if got := cc.Spec.NetworkConfig; got.PodCIDR != "10.42.0.0/16" || got.ServiceCIDR != "" {
		t.Fatalf("new ClusterConfig's ranges %+v, want the pod CIDR seeded", got)
	}
	// An operator changes the pod CIDR; a restart with other flags
	// keeps it and fills only the service CIDR.
	patch := client.MergeFrom(cc.DeepCopy())
	cc.Spec.NetworkConfig.PodCIDR = "10.200.0.0/16"
	if err := c.Patch(ctx, &cc, patch); err != nil {
		t.Fatal(err)
	}
	if err := EnsureDefault(ctx, c, configv1alpha1.NetworkConfig{PodCIDR: "10.42.0.0/16", ServiceCIDR: "10.43.0.0/16"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, &cc); err != nil {
		t.Fatal(err)
	}
	if got := cc.Spec.NetworkConfig; got.PodCIDR != "10.200.0.0/16" || got.ServiceCIDR != "10.43.0.0/16" {
		t.Errorf("ranges %+v, want the operator's pod CIDR kept and the service CIDR filled", got)
	}
	if err := c.Delete(ctx, &cc); err != nil {
		t.Fatal(err)
	}
	err := EnsureDefault(ctx, c, configv1alpha1.NetworkConfig{ServiceCIDR: "10.43.0.1"})
	if err == nil || !strings.Contains(err.Error(), "serviceCIDR") {
		t.Errorf("seeding a service CIDR that is not one: %v, want an error naming serviceCIDR", err)
	}
}
