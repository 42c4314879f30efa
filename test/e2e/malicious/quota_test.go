// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/offloading"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestConsumerRunsNoMoreThanOffered: each namespace a provider makes for a
// consumer carries a ResourceQuota of what it offered that consumer
// (pods, requests.cpu, requests.memory), so the consumer's virtual
// kubelet, used directly, cannot run more than the offer: a pod asking
// for more CPU than offered is refused for the quota, and a pod asking
// for nothing is given small requests, which the quota counts.
func TestConsumerRunsNoMoreThanOffered(t *testing.T) {
	peered(t)
	a, b, _ := members()
	ctx := t.Context()
	remoteNS := remoteNamespaceOf(t, offload(t, "bounded", offloadingv1alpha1.NamespaceOffloadingSpec{}, 2), b.ClusterID)
	inB := framework.Client(t, b)
	vk := framework.ClientFor(t, framework.VirtualKubeletConfig(t, a, b))

	var offered corev1.ResourceList
	framework.Eventually(t, 30*time.Second, func() error {
		var pr discoveryv1alpha1.PeeringRequest
		if err := inB.Get(ctx, client.ObjectKey{Name: a.ClusterID}, &pr); err != nil {
			return err
		}
		offered = pr.Status.OfferedResources
		var quota corev1.ResourceQuota
		if err := inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: offloading.OfferQuotaName}, &quota); err != nil {
			return err
		}
		if want := offloading.QuotaOf(offered); offered.Cpu().IsZero() || !equality.Semantic.DeepEqual(quota.Status.Hard, want) {
			return fmt.Errorf("quota %s/%s counts %v, want %v (the offer: %v)", remoteNS, offloading.OfferQuotaName, quota.Status.Hard, want, offered)
		}
		return nil
	})

	greedy := pausePod(remoteNS, "direct-greedy")
	more := offered.Cpu().DeepCopy()
	more.Add(resource.MustParse("1"))
	greedy.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: more}
	err := vk.Create(ctx, greedy)
	if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("a pod requesting %s CPU, %s offered: %v, want refused for the quota", more.String(), offered.Cpu().String(), err)
	}

	modest := pausePod(remoteNS, "direct-modest")
	framework.Allowed(t, "a pod requesting nothing (dry run)", vk.Create(ctx, modest, client.DryRunAll))
	got := modest.Spec.Containers[0].Resources.Requests
	for name, want := range offloading.DefaultRequests {
		if q, ok := got[name]; !ok || q.Cmp(want) != 0 {
			t.Fatalf("a pod requesting nothing got requests %v, want the defaults %v", got, offloading.DefaultRequests)
		}
	}
}
