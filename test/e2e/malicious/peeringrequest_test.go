// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestConsumerWatchesOnlyItsOwnPeeringRequest: the consumer's identity in
// a provider may list and watch its own PeeringRequest by name (to learn
// of the acceptance as it happens), and nothing else: not the list of
// every consumer's requests, not another consumer's by name, not a watch
// of them all.
func TestConsumerWatchesOnlyItsOwnPeeringRequest(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := t.Context()
	asConsumer, err := client.NewWithWatch(framework.IdentityConfig(t, a, b.ClusterID), client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	// Its own, by name: allowed (the credentials work).
	own := client.MatchingFields{"metadata.name": a.ClusterID}
	var list discoveryv1alpha1.PeeringRequestList
	if err := asConsumer.List(ctx, &list, own); err != nil {
		t.Fatalf("listing its own PeeringRequest by name: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != a.ClusterID {
		t.Fatalf("listing its own PeeringRequest by name gave %d items", len(list.Items))
	}
	w, err := asConsumer.Watch(ctx, &discoveryv1alpha1.PeeringRequestList{}, own)
	if err != nil {
		t.Fatalf("watching its own PeeringRequest by name: %v", err)
	}
	w.Stop()

	// Everything else: refused.
	framework.Denied(t, "listing every PeeringRequest", asConsumer.List(ctx, &discoveryv1alpha1.PeeringRequestList{}))
	other := client.MatchingFields{"metadata.name": c.ClusterID}
	framework.Denied(t, "listing another consumer's PeeringRequest by name", asConsumer.List(ctx, &discoveryv1alpha1.PeeringRequestList{}, other))
	_, err = asConsumer.Watch(ctx, &discoveryv1alpha1.PeeringRequestList{})
	framework.Denied(t, "watching every PeeringRequest", err)
	_, err = asConsumer.Watch(ctx, &discoveryv1alpha1.PeeringRequestList{}, other)
	framework.Denied(t, "watching another consumer's PeeringRequest by name", err)
	_, err = asConsumer.Watch(ctx, &discoveryv1alpha1.PeeringRequestList{}, &client.ListOptions{Raw: &metav1.ListOptions{LabelSelector: "a=b"}})
	framework.Denied(t, "watching PeeringRequests by label", err)
}
