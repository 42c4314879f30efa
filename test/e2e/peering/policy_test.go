// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/peering"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// setPeeringConfig changes m's peering policy and waits until the
// controller manager applied it; the change is undone at cleanup.
func setPeeringConfig(t *testing.T, m *playground.Member, change func(*configv1alpha1.PeeringConfig)) {
	t.Helper()
	var before configv1alpha1.ClusterConfig
	if err := framework.Client(t, m).Get(t.Context(), client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &before); err != nil {
		t.Fatal(err)
	}
	saved := before.Spec.PeeringConfig
	framework.SetClusterConfig(t, m, func(s *configv1alpha1.ClusterConfigSpec) { change(&s.PeeringConfig) })
	t.Cleanup(func() {
		framework.SetClusterConfig(t, m, func(s *configv1alpha1.ClusterConfigSpec) { s.PeeringConfig = saved })
	})
}

// TestWebhookPolicy: the provider's webhook rejects, with the rule in the
// message, a PeeringRequest from a denied ClusterID and one past the
// maximum number of incoming peerings; the same requests pass without the
// rules.
func TestWebhookPolicy(t *testing.T) {
	_, _, c := members()
	framework.LogOnFailure(t, c)
	ctx := t.Context()
	admin := framework.Client(t, c)
	create := func(id string) error {
		err := admin.Create(ctx, prFor(id))
		if err == nil {
			t.Cleanup(func() {
				_ = admin.Delete(context.Background(), prFor(id))
				framework.Eventually(t, 30*time.Second, func() error {
					err := admin.Get(context.Background(), client.ObjectKey{Name: id}, &discoveryv1alpha1.PeeringRequest{})
					if apierrors.IsNotFound(err) {
						return nil
					}
					return errorf("PeeringRequest %s still there (%v)", id, err)
				})
			})
		}
		return err
	}

	setPeeringConfig(t, c, func(pc *configv1alpha1.PeeringConfig) { pc.DeniedClusterIDs = []string{"denied-cluster"} })
	err := create("denied-cluster")
	if err == nil || !strings.Contains(err.Error(), "spec.peeringConfig.deniedClusterIDs") {
		t.Fatalf("PeeringRequest from a denied cluster: %v, want a refusal naming spec.peeringConfig.deniedClusterIDs", err)
	}
	// The refusal reaches the client as Forbidden, marked as the webhook's,
	// which is how a consumer tells it from missing rights.
	if !apierrors.IsForbidden(err) || !peering.RefusedByWebhook(err) {
		t.Fatalf("refusal %#v: want Forbidden with cause %s", err, discoveryv1alpha1.CausePeeringRefused)
	}
	if err := create("allowed-one"); err != nil {
		t.Fatalf("PeeringRequest from a cluster not denied: %v", err)
	}

	setPeeringConfig(t, c, func(pc *configv1alpha1.PeeringConfig) { pc.MaxIncomingPeerings = 2 })
	if err := create("allowed-two"); err != nil {
		t.Fatalf("second PeeringRequest with a maximum of 2: %v", err)
	}
	err = create("one-too-many")
	if err == nil || !strings.Contains(err.Error(), "spec.peeringConfig.maxIncomingPeerings") {
		t.Fatalf("third PeeringRequest with a maximum of 2: %v, want a refusal naming spec.peeringConfig.maxIncomingPeerings", err)
	}

	// An admitted request that the provider cannot verify is not accepted,
	// and says why.
	framework.Eventually(t, 10*time.Second, func() error {
		var pr discoveryv1alpha1.PeeringRequest
		if err := admin.Get(ctx, client.ObjectKey{Name: "allowed-one"}, &pr); err != nil {
			return err
		}
		for _, cond := range pr.Status.Conditions {
			if cond.Type == discoveryv1alpha1.PeeringRequestAccepted && cond.Status == metav1.ConditionFalse &&
				strings.Contains(conditionMessage(pr, discoveryv1alpha1.PeeringRequestConsumerVerified), "no token exchange") {
				return nil
			}
		}
		return errorf("PeeringRequest conditions %+v, want Accepted=False for lack of a token exchange", pr.Status.Conditions)
	})
}

func conditionMessage(pr discoveryv1alpha1.PeeringRequest, condType string) string {
	for _, c := range pr.Status.Conditions {
		if c.Type == condType {
			return c.Message
		}
	}
	return ""
}
