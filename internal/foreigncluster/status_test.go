// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package foreigncluster

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/liqo-go/liqo/api"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
)

// twoWriters stores a ForeignCluster, lets another writer change its
// status after this writer read it, and returns this writer's stale copy.
func twoWriters(t *testing.T, other func(fc *discoveryv1alpha1.ForeignCluster)) (client.Client, *discoveryv1alpha1.ForeignCluster) {
	t.Helper()
	ctx := context.Background()
	stored := &discoveryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: "peer"}}
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(stored).
		WithStatusSubresource(&discoveryv1alpha1.ForeignCluster{}).Build()
	var mine discoveryv1alpha1.ForeignCluster
	if err := c.Get(ctx, client.ObjectKey{Name: "peer"}, &mine); err != nil {
		t.Fatal(err)
	}
	var theirs discoveryv1alpha1.ForeignCluster
	if err := c.Get(ctx, client.ObjectKey{Name: "peer"}, &theirs); err != nil {
		t.Fatal(err)
	}
	orig := theirs.DeepCopy()
	other(&theirs)
	if err := c.Status().Patch(ctx, &theirs, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Fatal(err)
	}
	return c, &mine
}

func cond(t, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason, Message: "m"}
}

// TestPatchStatusKeepsTheOtherWritersConditions: a writer that read
// before another one wrote still gets its condition and field written,
// and the other's condition stays.
func TestPatchStatusKeepsTheOtherWritersConditions(t *testing.T) {
	c, mine := twoWriters(t, func(fc *discoveryv1alpha1.ForeignCluster) {
		meta.SetStatusCondition(&fc.Status.Conditions, cond(discoveryv1alpha1.ConditionAdvertisementAccepted, "Accepted"))
	})
	orig := mine.DeepCopy()
	meta.SetStatusCondition(&mine.Status.Conditions, cond(discoveryv1alpha1.ConditionPeeringRequested, "Accepted"))
	mine.Status.IncomingPeering = true
	if err := PatchStatus(context.Background(), c, nil, orig, mine); err != nil {
		t.Fatalf("PatchStatus after another writer: %v", err)
	}
	var got discoveryv1alpha1.ForeignCluster
	if err := c.Get(context.Background(), client.ObjectKey{Name: "peer"}, &got); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{discoveryv1alpha1.ConditionAdvertisementAccepted, discoveryv1alpha1.ConditionPeeringRequested} {
		if meta.FindStatusCondition(got.Status.Conditions, typ) == nil {
			t.Errorf("condition %s lost: %+v", typ, got.Status.Conditions)
		}
	}
	if !got.Status.IncomingPeering {
		t.Errorf("incomingPeering not written")
	}
	if mine.ResourceVersion != got.ResourceVersion {
		t.Errorf("the writer's copy is at %s, the stored one at %s", mine.ResourceVersion, got.ResourceVersion)
	}
}

// TestPatchStatusRemovesOnlyItsCondition: a condition the writer removed
// goes; one the other writer added meanwhile stays.
func TestPatchStatusRemovesOnlyItsCondition(t *testing.T) {
	ctx := context.Background()
	c, mine := twoWriters(t, func(fc *discoveryv1alpha1.ForeignCluster) {
		meta.SetStatusCondition(&fc.Status.Conditions, cond(discoveryv1alpha1.ConditionReachable, "AuthServiceAnswered"))
	})
	// Give this writer a condition of its own first, then remove it with a
	// copy that does not know the other writer's.
	orig := mine.DeepCopy()
	meta.SetStatusCondition(&mine.Status.Conditions, cond(discoveryv1alpha1.ConditionVirtualNodeReady, "Ready"))
	if err := PatchStatus(ctx, c, nil, orig, mine); err != nil {
		t.Fatal(err)
	}
	orig = mine.DeepCopy()
	meta.RemoveStatusCondition(&mine.Status.Conditions, discoveryv1alpha1.ConditionVirtualNodeReady)
	if err := PatchStatus(ctx, c, nil, orig, mine); err != nil {
		t.Fatal(err)
	}
	var got discoveryv1alpha1.ForeignCluster
	if err := c.Get(ctx, client.ObjectKey{Name: "peer"}, &got); err != nil {
		t.Fatal(err)
	}
	if meta.FindStatusCondition(got.Status.Conditions, discoveryv1alpha1.ConditionVirtualNodeReady) != nil {
		t.Errorf("the removed condition is still there: %+v", got.Status.Conditions)
	}
	if meta.FindStatusCondition(got.Status.Conditions, discoveryv1alpha1.ConditionReachable) == nil {
		t.Errorf("the other writer's condition was lost: %+v", got.Status.Conditions)
	}
}

// TestPatchStatusDoesNotMergeLists: a writer that replaced the sources list
// decided on the list it read; its conflict is returned, not merged.
func TestPatchStatusDoesNotMergeLists(t *testing.T) {
	c, mine := twoWriters(t, func(fc *discoveryv1alpha1.ForeignCluster) {
		fc.Status.Sources = []discoveryv1alpha1.DiscoverySource{{Name: "other", Type: discoveryv1alpha1.LanDiscovery}}
	})
	orig := mine.DeepCopy()
	mine.Status.Sources = []discoveryv1alpha1.DiscoverySource{{Name: "mine", Type: discoveryv1alpha1.WanDiscovery}}
	if err := PatchStatus(context.Background(), c, nil, orig, mine); !apierrors.IsConflict(err) {
		t.Fatalf("PatchStatus of a list after another writer: %v, want a conflict", err)
	}
}
