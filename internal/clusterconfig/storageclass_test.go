// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package clusterconfig

import (
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
)

// TestConsumerStorageClass: the class the spec names, else the default
// class (the newest of several, as the API server picks; the beta
// annotation too) unless its volumes are made by hand, else none.
func TestConsumerStorageClass(t *testing.T) {
	now := time.Now()
	class := func(name string, def bool, age time.Duration) *storagev1.StorageClass {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))}, Provisioner: "example.com/disk"}
		if def {
			sc.Annotations = map[string]string{DefaultStorageClassAnnotation: "true"}
		}
		return sc
	}
	beta := class("beta", false, 0)
	beta.Annotations = map[string]string{betaDefaultStorageClassAnnotation: "true"}
	byHand := class("local", true, 0)
	byHand.Provisioner = NoProvisioner
	for _, tc := range []struct {
		name    string
		named   string
		classes []client.Object
		want    string
	}{
		{"no class", "", nil, ""},
		{"no default", "", []client.Object{class("slow", false, 0)}, ""},
		{"the default", "", []client.Object{class("slow", false, 0), class("fast", true, time.Hour)}, "fast"},
		{"the newest default", "", []client.Object{class("old", true, 2*time.Hour), class("new", true, time.Hour)}, "new"},
		{"named", "slow", []client.Object{class("slow", false, 0), class("fast", true, time.Hour)}, "slow"},
		{"the beta annotation", "", []client.Object{beta}, "beta"},
		{"a default of volumes made by hand", "", []client.Object{byHand}, ""},
		{"volumes made by hand, named", "local", []client.Object{byHand}, "local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithObjects(tc.classes...).Build()
			cfg := &configv1alpha1.ClusterConfig{}
			cfg.Spec.SharingConfig.ConsumerStorageClass = tc.named
			got, err := ConsumerStorageClass(t.Context(), c, cfg)
			if err != nil || got != tc.want {
				t.Errorf("ConsumerStorageClass = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
