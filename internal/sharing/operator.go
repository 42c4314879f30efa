// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package sharing

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/clusterconfig"
	"github.com/liqo-go/liqo/internal/foreigncluster"
)

// +kubebuilder:rbac:groups=sharing.liqo.io,resources=advertisements;advertisements/status,verbs=get;list;watch;create;update;patch;delete

// Operator is the consumer's Advertisement operator: it accepts or refuses
// each offer by policy and reflects the decision on the provider's
// ForeignCluster (condition AdvertisementAccepted).
type Operator struct {
	// Client reads and writes Advertisements and ForeignClusters.
	Client client.Client
	// APIReader, if set, reads a ForeignCluster again from the API server
	// when writing its status met another writer's change.
	APIReader client.Reader
	// Config returns the ClusterConfig in force.
	Config func() *configv1alpha1.ClusterConfig
	// Now is injectable for tests.
	Now func() time.Time
	// Changes receives a value when the ClusterConfig changed (the cap,
	// auto-accept): every offer is decided again.
	Changes <-chan struct{}
}

// Reconcile implements reconcile.Reconciler.
func (o *Operator) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var adv sharingv1alpha1.Advertisement
	if err := o.Client.Get(ctx, req.NamespacedName, &adv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !adv.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	now := time.Now()
	if o.Now != nil {
		now = o.Now()
	}
	provider, _ := ProviderOfTenant(adv.Namespace)
	if now.After(adv.Spec.TimeToLive.Time) {
		// An offer not refreshed in time is withdrawn; a live provider
		// writes a new one.
		ctrl.LoggerFrom(ctx).Info("Advertisement expired; deleting it", "provider", provider)
		return ctrl.Result{}, client.IgnoreNotFound(o.Client.Delete(ctx, &adv))
	}
	phase, reason, msg := o.decide(ctx, &adv)
	orig := adv.DeepCopy()
	adv.Status.Phase, adv.Status.Reason, adv.Status.Message = phase, reason, msg
	if orig.Status.Phase != phase || orig.Status.Reason != reason || orig.Status.Message != msg {
		if err := o.Client.Status().Patch(ctx, &adv, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	// Only the provider's own offer speaks for it on its ForeignCluster.
	if reason != sharingv1alpha1.ReasonWrongNamespace {
		if err := o.reflect(ctx, provider, phase, reason, msg); err != nil {
			return ctrl.Result{}, err
		}
	}
	// Look again when it would expire.
	return ctrl.Result{RequeueAfter: max(time.Until(adv.Spec.TimeToLive.Time), time.Second)}, nil
}

// decide applies the policy.
func (o *Operator) decide(ctx context.Context, adv *sharingv1alpha1.Advertisement) (sharingv1alpha1.AdvertisementPhase, string, string) {
	// The namespace says who wrote the offer (only that provider may
	// write there); its name and identity must agree with it.
	provider, ok := ProviderOfTenant(adv.Namespace)
	if !ok || adv.Name != sharingv1alpha1.AdvertisementName(provider) || adv.Spec.ClusterIdentity.ClusterID != provider {
		return sharingv1alpha1.AdvertisementRefused, sharingv1alpha1.ReasonWrongNamespace, fmt.Sprintf(
			"an Advertisement in namespace %s must be named %s and carry spec.clusterIdentity.clusterID %s", adv.Namespace, sharingv1alpha1.AdvertisementName(provider), provider)
	}
	fc, err := foreigncluster.Find(ctx, o.Client, provider)
	switch {
	case err != nil:
		return sharingv1alpha1.AdvertisementRefused, sharingv1alpha1.ReasonUnknownProvider, err.Error()
	case fc == nil:
		return sharingv1alpha1.AdvertisementRefused, sharingv1alpha1.ReasonUnknownProvider, fmt.Sprintf("no ForeignCluster for %s", provider)
	case !joined(fc, adv):
		return sharingv1alpha1.AdvertisementRefused, sharingv1alpha1.ReasonProviderNotJoined, fmt.Sprintf("this cluster has no peering with %s", provider)
	case fc.Labels[discoveryv1alpha1.IntroducedByLabel] != "":
		return sharingv1alpha1.AdvertisementRefused, sharingv1alpha1.ReasonNetworkOnly, fmt.Sprintf(
			"this cluster peers with %s for the network only, introduced by broker %s (its pods reach the pods the broker runs there); without the label %s on ForeignCluster %s, the offer is used",
			provider, fc.Labels[discoveryv1alpha1.IntroducedByLabel], discoveryv1alpha1.IntroducedByLabel, fc.Name)
	}
	var sc configv1alpha1.SharingConfig
	if cc := o.Config(); cc != nil {
		sc = cc.Spec.SharingConfig
	}
	if over := overCap(adv.Spec.Resources, sc.MaxAcceptedResources); len(over) > 0 {
		return sharingv1alpha1.AdvertisementRefused, sharingv1alpha1.ReasonOverCap,
			"the offer exceeds spec.sharingConfig.maxAcceptedResources: " + strings.Join(over, ", ")
	}
	// The cap binds the pools too: together they offer no more.
	if over := poolsOver(adv.Spec.Pools, adv.Spec.Resources); len(over) > 0 {
		return sharingv1alpha1.AdvertisementRefused, sharingv1alpha1.ReasonPoolsOverOffer,
			"spec.pools offer more than spec.resources: " + strings.Join(over, ", ")
	}
	if sc.AutoAccept != nil && !*sc.AutoAccept && adv.Annotations[sharingv1alpha1.AcceptAnnotation] != "true" {
		return sharingv1alpha1.AdvertisementRefused, sharingv1alpha1.ReasonAwaitingOperator, fmt.Sprintf(
			"spec.sharingConfig.autoAccept is off; accept this offer with: kubectl annotate advertisement -n %s %s %s=true", adv.Namespace, adv.Name, sharingv1alpha1.AcceptAnnotation)
	}
	return sharingv1alpha1.AdvertisementAccepted, sharingv1alpha1.ReasonAccepted, "Accepted: " + Describe(adv.Spec.Resources)
}

// joined says whether this cluster peers with the provider of adv. A
// provider that cannot be asked for a moment (its API server restarting:
// PeeringRequested False with reason RequestFailed) still counts for an
// offer already accepted, as refusing it would drain every pod its virtual
// node runs; the rest of the policy still applies.
func joined(fc *discoveryv1alpha1.ForeignCluster, adv *sharingv1alpha1.Advertisement) bool {
	c := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested)
	return c != nil && (c.Status == metav1.ConditionTrue ||
		(c.Reason == discoveryv1alpha1.ReasonRequestFailed && adv.Status.Phase == sharingv1alpha1.AdvertisementAccepted))
}

// overCap lists the resources of offer above their cap.
func overCap(offer, capList corev1.ResourceList) []string {
	var over []string
	for name, limit := range capList {
		if q, ok := offer[name]; ok && q.Cmp(limit) > 0 {
			over = append(over, fmt.Sprintf("%s %s > %s", name, q.String(), limit.String()))
		}
	}
	sort.Strings(over)
	return over
}

// poolsOver lists the resources pools offer together beyond offer's
// (a resource offer lacks counting as none).
func poolsOver(pools []sharingv1alpha1.AdvertisementPool, offer corev1.ResourceList) []string {
	var over []string
	for name, q := range SumOfPools(pools) {
		if limit := offer[name]; q.Cmp(limit) > 0 {
			over = append(over, fmt.Sprintf("%s %s > %s", name, q.String(), limit.String()))
		}
	}
	sort.Strings(over)
	return over
}

// reflect sets AdvertisementAccepted on the provider's ForeignCluster.
func (o *Operator) reflect(ctx context.Context, provider string, phase sharingv1alpha1.AdvertisementPhase, reason, msg string) error {
	fc, err := foreigncluster.Find(ctx, o.Client, provider)
	if err != nil || fc == nil {
		return err
	}
	status := metav1.ConditionFalse
	if phase == sharingv1alpha1.AdvertisementAccepted {
		status = metav1.ConditionTrue
	}
	if c := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionAdvertisementAccepted); c != nil &&
		c.Status == status && c.Reason == reason && c.Message == msg {
		return nil
	}
	orig := fc.DeepCopy()
	meta.SetStatusCondition(&fc.Status.Conditions, metav1.Condition{
		Type: discoveryv1alpha1.ConditionAdvertisementAccepted, Status: status, Reason: reason, Message: msg, ObservedGeneration: fc.Generation,
	})
	if err := foreigncluster.PatchStatus(ctx, o.Client, o.APIReader, orig, fc); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// SetupWithManager registers the operator.
func (o *Operator) SetupWithManager(mgr ctrl.Manager) error {
	all := enqueueAll(mgr, &sharingv1alpha1.AdvertisementList{})
	// A peering marked network-only, or no longer: its offer is decided
	// again.
	offerOf := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		id := o.GetLabels()[discoveryv1alpha1.ClusterIDLabel]
		if id == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: discoveryv1alpha1.TenantNamespace(id), Name: sharingv1alpha1.AdvertisementName(id)}}}
	})
	introducedChanged := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetLabels()[discoveryv1alpha1.IntroducedByLabel] != e.ObjectNew.GetLabels()[discoveryv1alpha1.IntroducedByLabel]
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&sharingv1alpha1.Advertisement{}).
		WatchesRawSource(clusterconfig.ChangeSource(mgr, o.Changes, &sharingv1alpha1.Advertisement{}, all)).
		Watches(&discoveryv1alpha1.ForeignCluster{}, offerOf, builder.WithPredicates(introducedChanged)).
		Named("advertisement").
		Complete(o)
}
