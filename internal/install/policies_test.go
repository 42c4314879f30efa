// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package install_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// TestUnconfiguredClassesPolicySparesWorkloads: the API server cannot
// configure liqo-offloaded-pod-classes while its admission has not seen
// the ClusterConfig kind yet (a discovery cache refreshed every 30
// seconds, right after a first install). Made lasting here by a kind
// that does not exist, the policy then refuses what a consumer's virtual
// kubelet writes (it fails closed), and nothing else: the cluster's own
// pods are still admitted.
func TestUnconfiguredClassesPolicySparesWorkloads(t *testing.T) {
	cfg, admin := envtest.StartInstalled(t, "provider")
	ctx := t.Context()

	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	if err := admin.Get(ctx, client.ObjectKey{Name: "liqo-offloaded-pod-classes"}, &policy); err != nil {
		t.Fatal(err)
	}
	if policy.Spec.ParamKind == nil {
		t.Fatal("liqo-offloaded-pod-classes has no parameter kind")
	}
	policy.Spec.ParamKind.Kind = "NoSuchClusterConfig"
	if err := admin.Update(ctx, &policy); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "work"}},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000},
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(labels map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "work", Labels: labels},
			Spec: corev1.PodSpec{
				PriorityClassName: "high",
				Containers:        []corev1.Container{{Name: "web", Image: "registry.example/web:1"}},
			},
		}
	}

	// A consumer's virtual kubelet, with every right but its own name.
	vkCfg := rest.CopyConfig(cfg)
	vkCfg.Impersonate = rest.ImpersonationConfig{UserName: "liqo-virtual-kubelet-consumer-1", Groups: []string{"system:masters", "system:authenticated"}}
	vk, err := client.New(vkCfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	offloaded := map[string]string{offloadingv1alpha1.OriginClusterLabel: "consumer-1"}
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		err := vk.Create(ctx, pod(offloaded), client.DryRunAll)
		if err == nil {
			return errors.New("the consumer's pod was admitted by a policy that cannot be configured")
		}
		if !strings.Contains(err.Error(), "liqo-offloaded-pod-classes") || !strings.Contains(err.Error(), "failed to configure policy") {
			return fmt.Errorf("the consumer's pod was refused, not for the policy's configuration: %w", err)
		}
		return nil
	})

	// The policy's configuration error is now in force; the cluster's own
	// pods, with a priority class, and the administrator's copy of the
	// consumer's pod are not the virtual kubelet's writes.
	if err := admin.Create(ctx, pod(nil), client.DryRunAll); err != nil {
		t.Errorf("the cluster's own pod was refused: %v", err)
	}
	if err := vk.Create(ctx, pod(nil), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "offloading.liqo.io/origin-cluster-id") {
		t.Errorf("the virtual kubelet's pod without its origin label: %v, want refused by liqo-offloaded-objects", err)
	}
}
