// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package forge

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

// TestMetaForCluster: what a broker offloads in turn for a consumer names
// that consumer from the broker's own origin label; a consumer's own word
// (a label it set) never survives.
func TestMetaForCluster(t *testing.T) {
	local := &metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: map[string]string{
		offloadingv1alpha1.OriginClusterLabel: "consumer", offloadingv1alpha1.ForClusterLabel: "someone-else"}}
	got := Meta(local, "remote", "broker")
	if got.Labels[offloadingv1alpha1.ForClusterLabel] != "consumer" || got.Labels[offloadingv1alpha1.OriginClusterLabel] != "broker" {
		t.Fatalf("a broker's copy of a consumer's pod: %v, want for consumer, from broker", got.Labels)
	}
	own := &metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: map[string]string{offloadingv1alpha1.ForClusterLabel: "someone-else"}}
	if got := Meta(own, "remote", "consumer"); got.Labels[offloadingv1alpha1.ForClusterLabel] != "" {
		t.Fatalf("a cluster's own pod claims to be for %q", got.Labels[offloadingv1alpha1.ForClusterLabel])
	}
}
