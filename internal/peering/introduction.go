// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/clusterconfig"
	"github.com/liqo-go/liqo/internal/foreigncluster"
)

// MaxIntroductionsPerIntroducer bounds how many consumers one introducer
// may have introduced at once: the ones after it (by name) are refused.
const MaxIntroductionsPerIntroducer = 1000

// introducerOf returns the cluster whose tenant namespace ns is, read from
// the namespace's labels (which this cluster wrote), or "".
func introducerOf(ctx context.Context, r client.Reader, ns string) (string, error) {
	id, ok := strings.CutPrefix(ns, discoveryv1alpha1.TenantNamespace(""))
	if !ok || id == "" {
		return "", nil
	}
	var n corev1.Namespace
	if err := r.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if n.Labels[discoveryv1alpha1.TenantLabel] != "true" || n.Labels[discoveryv1alpha1.ClusterIDLabel] != id {
		return "", nil
	}
	return id, nil
}

// acceptsIntroducer reports whether the ClusterConfig lists introducer.
func acceptsIntroducer(cfg *configv1alpha1.ClusterConfig, introducer string) bool {
	return cfg != nil && slices.Contains(cfg.Spec.PeeringConfig.Introducers, introducer)
}

// IntroductionToken is the auth service's lookup of an introduction: the
// token of the Introduction of consumer in introducer's tenant namespace,
// when it is accepted and the ClusterConfig still lists the introducer;
// "" otherwise.
func IntroductionToken(r client.Reader, config func() *configv1alpha1.ClusterConfig) func(ctx context.Context, introducer, consumer string) (string, error) {
	return func(ctx context.Context, introducer, consumer string) (string, error) {
		if !ValidClusterID(introducer) || !ValidClusterID(consumer) || !acceptsIntroducer(config(), introducer) {
			return "", nil
		}
		in, err := acceptedIntroduction(ctx, r, introducer, consumer)
		if err != nil || in == nil || auth.IntroducerOf(in.Status.Token) != introducer {
			return "", err
		}
		return in.Status.Token, nil
	}
}

// acceptedIntroduction returns the Introduction of consumer in
// introducer's tenant namespace when this cluster accepted it, or nil.
func acceptedIntroduction(ctx context.Context, r client.Reader, introducer, consumer string) (*discoveryv1alpha1.Introduction, error) {
	var in discoveryv1alpha1.Introduction
	err := r.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(introducer), Name: consumer}, &in)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if in.Spec.Consumer.ClusterID != consumer || !meta.IsStatusConditionTrue(in.Status.Conditions, discoveryv1alpha1.IntroductionAccepted) {
		return nil, nil
	}
	return &in, nil
}

// IntroducersOf returns the introducers that introduced consumer to this
// cluster, as accepted now: an accepted Introduction of consumer in their
// tenant namespace, and the ClusterConfig still lists them.
func IntroducersOf(r client.Reader, config func() *configv1alpha1.ClusterConfig) func(ctx context.Context, consumer string) ([]string, error) {
	return func(ctx context.Context, consumer string) ([]string, error) {
		cfg := config()
		if cfg == nil {
			return nil, nil
		}
		var out []string
		for _, introducer := range cfg.Spec.PeeringConfig.Introducers {
			if introducer == consumer || !ValidClusterID(introducer) {
				continue
			}
			in, err := acceptedIntroduction(ctx, r, introducer, consumer)
			if err != nil {
				return nil, err
			}
			if in != nil {
				out = append(out, introducer)
			}
		}
		return out, nil
	}
}

// +kubebuilder:rbac:groups=discovery.liqo.io,resources=introductions,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.liqo.io,resources=introductions/status,verbs=get;update;patch

// IntroductionsReceived is the provider's side of introductions: for each
// Introduction an introducer wrote in its tenant namespace here, it
// decides by the ClusterConfig (spec.peeringConfig.introducers) and writes
// its answer, with a token for that consumer alone when it accepts.
// Deleting the Introduction revokes its token; a new one gets a new token.
type IntroductionsReceived struct {
	Client         client.Client
	LocalClusterID string
	Config         func() *configv1alpha1.ClusterConfig
	// Changes receives a value when the ClusterConfig changed.
	Changes <-chan struct{}
}

// Reconcile answers one Introduction in a tenant namespace.
func (r *IntroductionsReceived) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var in discoveryv1alpha1.Introduction
	if err := r.Client.Get(ctx, req.NamespacedName, &in); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	introducer, err := introducerOf(ctx, r.Client, in.Namespace)
	if err != nil || introducer == "" {
		// Not in a tenant namespace: the introducer's own copies are
		// IntroductionsSent's.
		return ctrl.Result{}, err
	}
	reason, message := discoveryv1alpha1.IntroductionReasonAccepted, ""
	consumer := in.Spec.Consumer.ClusterID
	switch {
	case !acceptsIntroducer(r.Config(), introducer):
		reason, message = discoveryv1alpha1.IntroductionReasonNotAnIntroducer,
			fmt.Sprintf("this cluster accepts no introductions from %s (ClusterConfig spec.peeringConfig.introducers)", introducer)
	case in.Name != consumer || !ValidClusterID(consumer):
		reason, message = discoveryv1alpha1.IntroductionReasonInvalid, "metadata.name must be spec.consumer.clusterID, a DNS label"
	case consumer == introducer || consumer == r.LocalClusterID:
		reason, message = discoveryv1alpha1.IntroductionReasonInvalid, "spec.consumer.clusterID is the introducer or this cluster"
	case in.Spec.ProviderClusterID != "" && in.Spec.ProviderClusterID != r.LocalClusterID:
		reason, message = discoveryv1alpha1.IntroductionReasonInvalid, fmt.Sprintf("spec.providerClusterID %q is not this cluster", in.Spec.ProviderClusterID)
	default:
		var list discoveryv1alpha1.IntroductionList
		if err := r.Client.List(ctx, &list, client.InNamespace(in.Namespace)); err != nil {
			return ctrl.Result{}, err
		}
		names := make([]string, 0, len(list.Items))
		for _, o := range list.Items {
			names = append(names, o.Name)
		}
		slices.Sort(names)
		if i, _ := slices.BinarySearch(names, in.Name); i >= MaxIntroductionsPerIntroducer {
			reason, message = discoveryv1alpha1.IntroductionReasonInvalid,
				fmt.Sprintf("%s already introduced %d consumers, the most this cluster accepts", introducer, MaxIntroductionsPerIntroducer)
		}
	}
	patch := client.MergeFrom(in.DeepCopy())
	cond := metav1.Condition{Type: discoveryv1alpha1.IntroductionAccepted, Status: metav1.ConditionFalse, Reason: reason, Message: message, ObservedGeneration: in.Generation}
	if reason == discoveryv1alpha1.IntroductionReasonAccepted {
		cond.Status, cond.Message = metav1.ConditionTrue, fmt.Sprintf("%s may peer with this cluster with the token, introduced by %s", consumer, introducer)
		if auth.IntroducerOf(in.Status.Token) != introducer {
			b := make([]byte, 32)
			if _, err := rand.Read(b); err != nil {
				return ctrl.Result{}, err
			}
			in.Status.Token = introducer + auth.IntroductionSeparator + hex.EncodeToString(b)
		}
	} else {
		in.Status.Token = ""
	}
	meta.SetStatusCondition(&in.Status.Conditions, cond)
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Status().Patch(ctx, &in, patch))
}

// SetupWithManager registers the controller; a ClusterConfig change
// reconciles every Introduction.
func (r *IntroductionsReceived) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list discoveryv1alpha1.IntroductionList
		if err := r.Client.List(ctx, &list); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, o := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&o)})
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).Named("introductions-received").
		For(&discoveryv1alpha1.Introduction{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(clusterconfig.ChangeSource(mgr, r.Changes, &discoveryv1alpha1.Introduction{}, all)).
		Complete(r)
}

// RemoteClients gives this cluster's clients in its providers (the
// virtual kubelet's identity, identity.Remotes).
type RemoteClients interface {
	For(ctx context.Context, provider string) (client.Client, error)
}

// IntroductionFinalizer is on an introducer's own Introduction: the
// provider's copy (and its token) goes before it does.
const IntroductionFinalizer = "discovery.liqo.io/introduction"

// IntroductionsSent is the introducer's side: for each Introduction in
// this cluster's Liqo namespace (where peers cannot write), it writes the
// provider's copy in this cluster's tenant namespace there, with this
// cluster's identity in the provider, and brings the provider's answer
// back, with the provider's auth URL as this cluster knows it.
type IntroductionsSent struct {
	Client         client.Client
	Namespace      string
	LocalClusterID string
	Remotes        RemoteClients
	// Resync is how often a settled introduction is checked again in the
	// provider (which may revoke it); 30 s when 0.
	Resync time.Duration
}

// Reconcile carries one of this cluster's Introductions to its provider.
func (r *IntroductionsSent) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var in discoveryv1alpha1.Introduction
	if err := r.Client.Get(ctx, req.NamespacedName, &in); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	provider, consumer := in.Spec.ProviderClusterID, in.Spec.Consumer.ClusterID
	patch := client.MergeFrom(in.DeepCopy())
	setStatus := func(status metav1.ConditionStatus, reason, message string) error {
		meta.SetStatusCondition(&in.Status.Conditions, metav1.Condition{Type: discoveryv1alpha1.IntroductionAccepted, Status: status,
			Reason: reason, Message: message, ObservedGeneration: in.Generation})
		return client.IgnoreNotFound(r.Client.Status().Patch(ctx, &in, patch))
	}
	if !ValidClusterID(provider) || !ValidClusterID(consumer) {
		in.Status.Token = ""
		return ctrl.Result{}, setStatus(metav1.ConditionFalse, discoveryv1alpha1.IntroductionReasonInvalid, "spec.providerClusterID and spec.consumer.clusterID must be DNS labels")
	}
	remoteKey := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(r.LocalClusterID), Name: consumer}

	if !in.DeletionTimestamp.IsZero() {
		if remote, err := r.Remotes.For(ctx, provider); err == nil {
			err := remote.Delete(ctx, &discoveryv1alpha1.Introduction{ObjectMeta: metav1.ObjectMeta{Namespace: remoteKey.Namespace, Name: remoteKey.Name}})
			// Forbidden: the provider no longer accepts this cluster as
			// an introducer, which revoked every token of its own.
			if client.IgnoreNotFound(err) != nil && !apierrors.IsForbidden(err) {
				return ctrl.Result{}, fmt.Errorf("revoking the introduction of %s in %s: %w", consumer, provider, err)
			}
		}
		// A provider that cannot be reached any more has no peering to
		// revoke it in; its copy goes with the tenant namespace.
		controllerutil.RemoveFinalizer(&in, IntroductionFinalizer)
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Update(ctx, &in))
	}
	if controllerutil.AddFinalizer(&in, IntroductionFinalizer) {
		if err := r.Client.Update(ctx, &in); err != nil {
			return ctrl.Result{}, err
		}
		patch = client.MergeFrom(in.DeepCopy())
	}

	fc, err := foreigncluster.Find(ctx, r.Client, provider)
	if err != nil {
		return ctrl.Result{}, err
	}
	if fc != nil {
		in.Status.AuthURL, in.Status.ProviderClusterName = fc.Spec.ForeignAuthURL, fc.Spec.ClusterIdentity.ClusterName
	}
	remote, err := r.Remotes.For(ctx, provider)
	if err != nil {
		in.Status.Token = ""
		return ctrl.Result{RequeueAfter: 5 * time.Second}, setStatus(metav1.ConditionUnknown, discoveryv1alpha1.IntroductionReasonUnreachable,
			fmt.Sprintf("this cluster has no peering with %s to introduce through: %v", provider, err))
	}
	theirs := &discoveryv1alpha1.Introduction{ObjectMeta: metav1.ObjectMeta{Namespace: remoteKey.Namespace, Name: remoteKey.Name}}
	err = remote.Get(ctx, remoteKey, theirs)
	if apierrors.IsNotFound(err) {
		theirs.Spec = discoveryv1alpha1.IntroductionSpec{Consumer: in.Spec.Consumer, ProviderClusterID: provider}
		err = remote.Create(ctx, theirs)
	} else if err == nil && theirs.Spec.Consumer != in.Spec.Consumer {
		theirs.Spec = discoveryv1alpha1.IntroductionSpec{Consumer: in.Spec.Consumer, ProviderClusterID: provider}
		err = remote.Update(ctx, theirs)
	}
	resync := r.Resync
	if resync == 0 {
		resync = 30 * time.Second
	}
	if apierrors.IsForbidden(err) {
		// The provider grants the right to introduce only to the
		// introducers its ClusterConfig lists.
		in.Status.Token = ""
		return ctrl.Result{RequeueAfter: resync}, setStatus(metav1.ConditionFalse, discoveryv1alpha1.IntroductionReasonNotAnIntroducer,
			fmt.Sprintf("%s does not accept introductions from this cluster (not in its ClusterConfig's spec.peeringConfig.introducers)", provider))
	}
	if err != nil {
		in.Status.Token = ""
		return ctrl.Result{RequeueAfter: 5 * time.Second}, setStatus(metav1.ConditionUnknown, discoveryv1alpha1.IntroductionReasonUnreachable,
			fmt.Sprintf("writing the introduction in %s: %v", provider, err))
	}
	answer := meta.FindStatusCondition(theirs.Status.Conditions, discoveryv1alpha1.IntroductionAccepted)
	if answer == nil || answer.ObservedGeneration != theirs.Generation {
		in.Status.Token = ""
		return ctrl.Result{RequeueAfter: time.Second}, setStatus(metav1.ConditionUnknown, discoveryv1alpha1.IntroductionReasonPending,
			fmt.Sprintf("waiting for %s to answer", provider))
	}
	in.Status.Token = ""
	if answer.Status == metav1.ConditionTrue {
		in.Status.Token = theirs.Status.Token
	}
	return ctrl.Result{RequeueAfter: resync}, setStatus(answer.Status, answer.Reason, provider+": "+answer.Message)
}

// SetupWithManager registers the controller, for the Introductions of the
// Liqo namespace.
func (r *IntroductionsSent) SetupWithManager(mgr ctrl.Manager) error {
	inLiqoNamespace := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == r.Namespace })
	return ctrl.NewControllerManagedBy(mgr).Named("introductions-sent").
		For(&discoveryv1alpha1.Introduction{}, builder.WithPredicates(inLiqoNamespace, predicate.GenerationChangedPredicate{})).
		Complete(r)
}
