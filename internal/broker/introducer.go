// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/foreigncluster"
)

// Introducer introduces each consumer to the providers its Selection
// enables or asks an introduction to: it keeps one Introduction per pair
// in the Liqo namespace (the broker cluster's controller manager carries
// it to the provider, whose own policy answers), and copies the answers,
// tokens included, into the Selection's status, which only that consumer
// reads. A provider the consumer no longer names has its Introduction
// withdrawn, which revokes the token.
type Introducer struct {
	Client client.Client
	// Namespace is the Liqo namespace.
	Namespace string
}

// consumerLabel marks the Introductions the broker keeps for a consumer.
const consumerLabel = "broker.liqo.io/consumer"

// +kubebuilder:rbac:groups=discovery.liqo.io,resources=introductions,verbs=get;list;watch;create;update;patch;delete

// Reconcile introduces one consumer (the request's name) to its providers.
func (i *Introducer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	consumer := req.Name
	var sel brokerv1alpha1.Selection
	err := i.Client.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer), Name: brokerv1alpha1.SelectionName}, &sel)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	wanted := map[string]bool{}
	// An aggregated consumer is introduced to no one: it never learns its
	// providers (those made before it was aggregated are withdrawn).
	if err == nil && sel.DeletionTimestamp.IsZero() && !sel.Aggregated() {
		for _, p := range slices.Concat(sel.InUse(), sel.Spec.Introductions) {
			if p != consumer {
				wanted[p] = true
			}
		}
	}
	var have discoveryv1alpha1.IntroductionList
	if err := i.Client.List(ctx, &have, client.InNamespace(i.Namespace), client.MatchingLabels{consumerLabel: consumer}); err != nil {
		return ctrl.Result{}, err
	}
	byProvider := map[string]*discoveryv1alpha1.Introduction{}
	for k := range have.Items {
		in := &have.Items[k]
		if !wanted[in.Spec.ProviderClusterID] {
			if err := i.Client.Delete(ctx, in); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("withdrawing the introduction of %s to %s: %w", consumer, in.Spec.ProviderClusterID, err)
			}
			continue
		}
		byProvider[in.Spec.ProviderClusterID] = in
	}
	if len(wanted) == 0 && sel.Name == "" {
		return ctrl.Result{}, nil
	}
	var name string
	if fc, err := foreigncluster.Find(ctx, i.Client, consumer); err == nil && fc != nil {
		name = fc.Spec.ClusterIdentity.ClusterName
	}
	var answers []brokerv1alpha1.IntroducedProvider
	for p := range wanted {
		answer := brokerv1alpha1.IntroducedProvider{ClusterID: p, State: brokerv1alpha1.IntroductionPending}
		in, ok := byProvider[p]
		if !ok {
			in = &discoveryv1alpha1.Introduction{
				ObjectMeta: metav1.ObjectMeta{Namespace: i.Namespace, Name: discoveryv1alpha1.IntroductionName(consumer, p),
					Labels: map[string]string{consumerLabel: consumer}},
				Spec: discoveryv1alpha1.IntroductionSpec{Consumer: discoveryv1alpha1.ClusterIdentity{ClusterID: consumer, ClusterName: name}, ProviderClusterID: p},
			}
			if err := i.Client.Create(ctx, in); err != nil && !apierrors.IsAlreadyExists(err) {
				return ctrl.Result{}, fmt.Errorf("introducing %s to %s: %w", consumer, p, err)
			}
			answer.Message = "the broker is introducing this consumer"
		}
		answer.ClusterName, answer.AuthURL = in.Status.ProviderClusterName, in.Status.AuthURL
		if c := meta.FindStatusCondition(in.Status.Conditions, discoveryv1alpha1.IntroductionAccepted); c != nil {
			answer.Message = c.Message
			switch c.Status {
			case metav1.ConditionTrue:
				if in.Status.Token != "" {
					answer.State, answer.Token = brokerv1alpha1.IntroductionAccepted, in.Status.Token
				}
			case metav1.ConditionFalse:
				answer.State = brokerv1alpha1.IntroductionRefused
			}
		}
		answers = append(answers, answer)
	}
	if sel.Name == "" {
		return ctrl.Result{}, nil
	}
	slices.SortFunc(answers, func(a, b brokerv1alpha1.IntroducedProvider) int { return strings.Compare(a.ClusterID, b.ClusterID) })
	if equality.Semantic.DeepEqual(answers, sel.Status.Introductions) {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(sel.DeepCopy())
	sel.Status.Introductions = answers
	return ctrl.Result{}, client.IgnoreNotFound(i.Client.Status().Patch(ctx, &sel, patch))
}

// SetupWithManager registers the introducer: a consumer is reconciled when
// its Selection or one of its Introductions changes.
func (i *Introducer) SetupWithManager(mgr ctrl.Manager) error {
	ofSelection := func(_ context.Context, obj client.Object) []reconcile.Request {
		if c, ok := strings.CutPrefix(obj.GetNamespace(), discoveryv1alpha1.TenantNamespace("")); ok && c != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: c}}}
		}
		return nil
	}
	ofIntroduction := func(_ context.Context, obj client.Object) []reconcile.Request {
		if c := obj.GetLabels()[consumerLabel]; c != "" && obj.GetNamespace() == i.Namespace {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: c}}}
		}
		return nil
	}
	return ctrl.NewControllerManagedBy(mgr).Named("broker-introducer").
		Watches(&brokerv1alpha1.Selection{}, handler.EnqueueRequestsFromMapFunc(ofSelection)).
		Watches(&discoveryv1alpha1.Introduction{}, handler.EnqueueRequestsFromMapFunc(ofIntroduction)).
		Complete(i)
}
