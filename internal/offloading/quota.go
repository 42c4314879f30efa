// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=resourcequotas;limitranges,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.liqo.io,resources=peeringrequests,verbs=get;list;watch

// OfferQuotaName is the ResourceQuota that holds a consumer, in each
// namespace made for it, to what it was offered.
const OfferQuotaName = "liqo-offer"

// DefaultsLimitRangeName is the LimitRange that gives containers without
// requests small ones, so that the quota counts them (a quota on
// requests.cpu refuses pods that request none).
const DefaultsLimitRangeName = "liqo-defaults"

// DefaultRequests are what a container that requests nothing is given in a
// consumer's namespace.
var DefaultRequests = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("10m"),
	corev1.ResourceMemory: resource.MustParse("32Mi"),
}

// QuotaOf returns the hard limits of the ResourceQuota for an offer:
// pods, requests.cpu and requests.memory, each zero when not offered (a
// consumer never offered anything runs nothing).
func QuotaOf(offered corev1.ResourceList) corev1.ResourceList {
	hard := corev1.ResourceList{}
	for quota, offer := range map[corev1.ResourceName]corev1.ResourceName{
		corev1.ResourcePods:           corev1.ResourcePods,
		corev1.ResourceRequestsCPU:    corev1.ResourceCPU,
		corev1.ResourceRequestsMemory: corev1.ResourceMemory,
	} {
		q, ok := offered[offer]
		if !ok || q.Sign() < 0 {
			q = *resource.NewQuantity(0, resource.DecimalSI)
		}
		hard[quota] = q
	}
	return hard
}

// offerOf returns what this cluster last offered consumer, nil for
// nothing (no PeeringRequest, or nothing advertised yet).
func offerOf(ctx context.Context, c client.Client, consumer string) (corev1.ResourceList, error) {
	var pr discoveryv1alpha1.PeeringRequest
	if err := c.Get(ctx, client.ObjectKey{Name: consumer}, &pr); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return pr.Status.OfferedResources, nil
}

// ensureQuota creates or updates the consumer's ResourceQuota and
// LimitRange in namespace, and reports the namespace Pending until the
// API server's quota controller has counted it (pods are refused before),
// Ready after.
func (r *NamespaceMapReconciler) ensureQuota(ctx context.Context, consumer, namespace string, offered corev1.ResourceList) (offloadingv1alpha1.MappedNamespaceStatus, error) {
	labels := map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer, discoveryv1alpha1.ManagedByLabel: discoveryv1alpha1.ManagedByValue}
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: DefaultsLimitRangeName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, lr, func() error {
		lr.Labels = labels
		lr.Spec.Limits = []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, DefaultRequest: DefaultRequests}}
		return nil
	}); err != nil {
		return apiFailure(namespace, fmt.Sprintf("LimitRange %s/%s: %v", namespace, DefaultsLimitRangeName, err))
	}
	hard := QuotaOf(offered)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: OfferQuotaName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, quota, func() error {
		quota.Labels = labels
		quota.Spec.Hard = hard
		return nil
	}); err != nil {
		return apiFailure(namespace, fmt.Sprintf("ResourceQuota %s/%s: %v", namespace, OfferQuotaName, err))
	}
	// Pods are refused until the quota controller has counted the
	// namespace once; after that a change of the offer applies when it
	// gets to it, the previous limits holding meanwhile, and the namespace
	// stays Ready (a consumer seeing it Pending would take back what it
	// reflected there).
	for name := range hard {
		if _, counted := quota.Status.Hard[name]; !counted {
			return offloadingv1alpha1.MappedNamespaceStatus{Namespace: namespace, Phase: offloadingv1alpha1.RemoteNamespacePending,
				Message: fmt.Sprintf("waiting for the quota controller to count namespace %s", namespace)}, nil
		}
	}
	return offloadingv1alpha1.MappedNamespaceStatus{Namespace: namespace, Phase: offloadingv1alpha1.RemoteNamespaceReady}, nil
}
