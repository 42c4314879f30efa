// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/remotewatch"
)

// acceptanceWatchLimit bounds how long one watch of a provider's
// PeeringRequest runs; the reconciler's slower polling covers what comes
// after.
const acceptanceWatchLimit = 2 * time.Minute

// watchAcceptance watches, in the provider cfg reaches, the PeeringRequest
// name (the consumer's identity may list and watch it by name, nothing
// else) and wakes the Outgoing reconciler of ForeignCluster fcName on
// every change (the acceptance, a refusal, a deletion) until it is
// accepted. One watch per ForeignCluster at most.
func watchAcceptance(ctx context.Context, set *remotewatch.Set, fcName, name string, cfg *rest.Config, scheme *runtime.Scheme) {
	set.Start(ctx, fcName, func(ctx context.Context) (watch.Interface, error) {
		return remotewatch.ByName(ctx, cfg, scheme, &discoveryv1alpha1.PeeringRequestList{}, "", name)
	}, func(_ context.Context, obj runtime.Object) ([]client.Object, bool) {
		pr, ok := obj.(*discoveryv1alpha1.PeeringRequest)
		accepted := ok && meta.IsStatusConditionTrue(pr.Status.Conditions, discoveryv1alpha1.PeeringRequestAccepted)
		return []client.Object{&discoveryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: fcName}}}, accepted
	})
}
