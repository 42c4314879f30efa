// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package foundation_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

func foreignCluster(name string, mutate func(*discoveryv1alpha1.ForeignCluster)) *discoveryv1alpha1.ForeignCluster {
	fc := &discoveryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: discoveryv1alpha1.ForeignClusterSpec{
			ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: name, ClusterName: "remote"},
			ForeignAuthURL:  "https://remote.example:8443",
		},
	}
	if mutate != nil {
		mutate(fc)
	}
	return fc
}

// TestAPIServerRejectsInvalidObjects creates objects in a real API server
// and checks that the invalid ones are refused with the offending field
// named, and that the valid ones are accepted.
func TestAPIServerRejectsInvalidObjects(t *testing.T) {
	cp, _ := members()
	framework.LogOnFailure(t, cp)
	c := framework.Client(t, cp)

	tests := []struct {
		name      string
		obj       client.Object
		wantField string // empty: the object is valid
	}{
		{"valid ForeignCluster", foreignCluster("valid-fc", nil), ""},
		{"ForeignCluster with only an auth URL", foreignCluster("url-only", func(fc *discoveryv1alpha1.ForeignCluster) {
			fc.Spec.ClusterIdentity = discoveryv1alpha1.ClusterIdentity{}
		}), ""},
		{"bad networkingEnabled", foreignCluster("bad-networking", func(fc *discoveryv1alpha1.ForeignCluster) {
			fc.Spec.NetworkingEnabled = "Maybe"
		}), "spec.networkingEnabled"},
		{"bad outgoingPeeringEnabled", foreignCluster("bad-outgoing", func(fc *discoveryv1alpha1.ForeignCluster) {
			fc.Spec.OutgoingPeeringEnabled = "true"
		}), "spec.outgoingPeeringEnabled"},
		{"missing clusterID", foreignCluster("missing-id", func(fc *discoveryv1alpha1.ForeignCluster) {
			fc.Spec.ClusterIdentity.ClusterID = ""
			fc.Spec.ForeignAuthURL = ""
		}), "spec.clusterIdentity.clusterID"},
		{"clusterID not a DNS label", foreignCluster("bad-id", func(fc *discoveryv1alpha1.ForeignCluster) {
			fc.Spec.ClusterIdentity.ClusterID = "Not_A_Label"
		}), "spec.clusterIdentity.clusterID"},
		{"auth URL not https", foreignCluster("http-url", func(fc *discoveryv1alpha1.ForeignCluster) {
			fc.Spec.ForeignAuthURL = "http://remote.example"
		}), "spec.foreignAuthUrl"},
		{"negative ttl", foreignCluster("negative-ttl", func(fc *discoveryv1alpha1.ForeignCluster) {
			fc.Spec.TTL = -1
		}), "spec.ttl"},
		{"PeeringRequest auth URL not https", peeringRequest("http://10.0.0.1:8443"), "spec.authUrl"},
		{"PeeringRequest auth URL without a host", peeringRequest("https:///ids"), "spec.authUrl"},
		{"second ClusterConfig", &configv1alpha1.ClusterConfig{ObjectMeta: metav1.ObjectMeta{Name: "another"}}, "metadata.name must be 'cluster'"},
		{"NamespaceOffloading SelectedName without a name", &offloadingv1alpha1.NamespaceOffloading{
			ObjectMeta: metav1.ObjectMeta{Name: offloadingv1alpha1.NamespaceOffloadingName, Namespace: "default"},
			Spec:       offloadingv1alpha1.NamespaceOffloadingSpec{NamespaceMappingStrategy: offloadingv1alpha1.SelectedNameMapping},
		}, "spec.remoteNamespaceName"},
		{"NamespaceOffloading bad strategy", &offloadingv1alpha1.NamespaceOffloading{
			ObjectMeta: metav1.ObjectMeta{Name: offloadingv1alpha1.NamespaceOffloadingName, Namespace: "default"},
			Spec:       offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: "Everywhere"},
		}, "spec.podOffloadingStrategy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Create(t.Context(), tt.obj)
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("valid object rejected: %v", err)
				}
				framework.DeleteOnCleanup(t, c, tt.obj)
				return
			}
			if err == nil {
				_ = c.Delete(t.Context(), tt.obj)
				t.Fatalf("invalid object accepted, want an error naming %s", tt.wantField)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want an Invalid error", err)
			}
			if !strings.Contains(err.Error(), tt.wantField) {
				t.Fatalf("error does not name %q: %v", tt.wantField, err)
			}
		})
	}
}

// peeringRequest returns a PeeringRequest that is valid but for authURL.
func peeringRequest(authURL string) *discoveryv1alpha1.PeeringRequest {
	return &discoveryv1alpha1.PeeringRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "some-consumer"},
		Spec: discoveryv1alpha1.PeeringRequestSpec{
			ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: "some-consumer"},
			Namespace:       "liqo", AuthURL: authURL, APIServerURL: "https://127.0.0.1:6443",
			CACert: "ca", ProviderCertificate: "cert",
		},
	}
}

// TestClusterIDImmutable checks that a ForeignCluster's ClusterID cannot be
// changed once set: a different ID is a different cluster.
func TestClusterIDImmutable(t *testing.T) {
	cp, _ := members()
	c := framework.Client(t, cp)
	fc := foreignCluster("immutable-id", nil)
	if err := c.Create(t.Context(), fc); err != nil {
		t.Fatalf("creating ForeignCluster: %v", err)
	}
	framework.DeleteOnCleanup(t, c, fc)
	// The controller manager writes the object's status meanwhile: a
	// conflict is tried again on a fresh copy; only the answer to the
	// change itself counts.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(fc), fc); err != nil {
			return err
		}
		fc.Spec.ClusterIdentity.ClusterID = "someone-else"
		return c.Update(t.Context(), fc)
	})
	if err == nil || !strings.Contains(err.Error(), "clusterID is immutable") {
		t.Fatalf("changing the ClusterID: got %v, want an immutability error", err)
	}
}

// TestClusterConfigDefaultsAndValidation checks the singleton the controller
// manager creates: schema defaults filled in, an invalid edit refused with
// the field named, and the singleton recreated when deleted.
func TestClusterConfigDefaultsAndValidation(t *testing.T) {
	cp, _ := members()
	framework.LogOnFailure(t, cp)
	c := framework.Client(t, cp)
	key := client.ObjectKey{Name: configv1alpha1.ClusterConfigName}

	var cfg configv1alpha1.ClusterConfig
	if err := c.Get(t.Context(), key, &cfg); err != nil {
		t.Fatalf("reading ClusterConfig: %v", err)
	}
	if got := cfg.Spec.SharingConfig.SharePercentage; got != 50 {
		t.Errorf("default sharePercentage = %d, want 50", got)
	}
	if d := cfg.Spec.DiscoveryConfig; d.EnableDiscovery == nil || !*d.EnableDiscovery || d.HealthCheckIntervalSeconds != 30 || d.ServiceName != "_liqo_auth._tcp" {
		t.Errorf("discovery defaults not applied: %+v", d)
	}
	if p := cfg.Spec.PeeringConfig; p.RequireToken == nil || !*p.RequireToken {
		t.Errorf("requireToken should default to true: %+v", p)
	}

	bad := cfg.DeepCopy()
	bad.Spec.SharingConfig.SharePercentage = 150
	if err := c.Update(t.Context(), bad); err == nil || !strings.Contains(err.Error(), "spec.sharingConfig.sharePercentage") {
		t.Errorf("sharePercentage 150: got %v, want an error naming spec.sharingConfig.sharePercentage", err)
	}
	bad = cfg.DeepCopy()
	bad.Spec.PeeringConfig.AllowedClusterIDs = []string{"a", "b"}
	bad.Spec.PeeringConfig.DeniedClusterIDs = []string{"b"}
	if err := c.Update(t.Context(), bad); err == nil || !strings.Contains(err.Error(), "spec.peeringConfig.deniedClusterIDs") {
		t.Errorf("allowed and denied overlap: got %v, want an error naming spec.peeringConfig.deniedClusterIDs", err)
	}
	bad = cfg.DeepCopy()
	bad.Spec.NetworkConfig.PodCIDR = "10.0.0.0"
	if err := c.Update(t.Context(), bad); err == nil || !strings.Contains(err.Error(), "spec.networkConfig.podCIDR") {
		t.Errorf("podCIDR without a prefix: got %v, want an error naming spec.networkConfig.podCIDR", err)
	}

	if err := c.Delete(t.Context(), &cfg); err != nil {
		t.Fatalf("deleting ClusterConfig: %v", err)
	}
	framework.Eventually(t, 30*time.Second, func() error {
		var again configv1alpha1.ClusterConfig
		if err := c.Get(t.Context(), key, &again); err != nil {
			return err
		}
		if again.UID == cfg.UID {
			return fmt.Errorf("still the deleted object")
		}
		if again.Status.ClusterID == "" {
			return fmt.Errorf("recreated, but status.clusterID not published yet")
		}
		return nil
	})
}
