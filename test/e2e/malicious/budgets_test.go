// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"strings"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestConsumerCannotHoldUpDrains: a consumer's PodDisruptionBudget in a
// provider would hold up the provider's own node drains (kubectl drain
// evicts within budgets). With its virtual kubelet's real identity, the
// consumer cannot write one in a namespace the provider made for it:
// only a broker lets it, in the namespaces it orchestrates for it
// (test/e2e/broker).
func TestConsumerCannotHoldUpDrains(t *testing.T) {
	peered(t)
	a, b, _ := members()
	remote := remoteNamespaceOf(t, offload(t, "budgets", offloadingv1alpha1.NamespaceOffloadingSpec{}, 2), b.ClusterID)
	vk := framework.ClientFor(t, framework.VirtualKubeletConfig(t, a, b))
	pdb := labelled(&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: remote, Name: "hold-everything"},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{}, MinAvailable: ptr.To(intstr.FromString("100%"))}}, a)
	err := vk.Create(t.Context(), pdb)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot create resource") {
		t.Errorf("the consumer's virtual kubelet creating a PodDisruptionBudget in %s of %s: %v, want refused by RBAC", remote, b.Name, err)
	}
}
