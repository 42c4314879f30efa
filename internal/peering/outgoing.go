// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/phase"
	"github.com/liqo-go/liqo/internal/remotewatch"
)

// DefaultForceUnpeerAfter bounds how long an unpeering waits for an
// unreachable provider before it completes on the local side alone.
const DefaultForceUnpeerAfter = 30 * time.Second

// Outgoing is the consumer's peering reconciler on ForeignClusters.
type Outgoing struct {
	// refusedSince records, per provider, when its API server first
	// refused the identity (401/403): an API server that just restarted
	// refuses everyone until its authorizer has synced, and that must not
	// cost a new identity (and the virtual node with it).
	refusedSince sync.Map

	// Client reads through to the API server and writes.
	Client client.Client
	// Scheme builds clients for the provider.
	Scheme *runtime.Scheme
	// Namespace is the Liqo namespace.
	Namespace string
	// LocalClusterID is this cluster's ID.
	LocalClusterID string
	// Local returns this cluster's identity (name, API server URL, CA).
	Local auth.IdentitySource
	// LocalAuthURL is this cluster's auth service.
	LocalAuthURL string
	// Config returns the ClusterConfig in force.
	Config func() *configv1alpha1.ClusterConfig
	// ForceUnpeerAfter bounds an unpeering from an unreachable provider;
	// DefaultForceUnpeerAfter when 0.
	ForceUnpeerAfter time.Duration
	// Lifetime of the certificates this cluster issues to the provider.
	Lifetime time.Duration

	clients    identity.Clients
	acceptance *remotewatch.Set
	joins      joinClock
}

// wantsPeering applies outgoingPeeringEnabled: Yes peers, No never does,
// Auto follows join.
func wantsPeering(fc *discoveryv1alpha1.ForeignCluster) bool {
	if !fc.DeletionTimestamp.IsZero() {
		return false
	}
	switch fc.Spec.OutgoingPeeringEnabled {
	case discoveryv1alpha1.PeeringEnabledYes:
		return true
	case discoveryv1alpha1.PeeringEnabledNo:
		return false
	default:
		return fc.Spec.Join
	}
}

// Reconcile implements reconcile.Reconciler.
func (r *Outgoing) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var fc discoveryv1alpha1.ForeignCluster
	if err := r.Client.Get(ctx, req.NamespacedName, &fc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	provider := fc.Spec.ClusterIdentity.ClusterID
	if provider == "" || fc.Labels[discoveryv1alpha1.ClusterIDLabel] == "" {
		return ctrl.Result{}, nil // not completed yet: the ForeignCluster reconciler fills it in
	}
	if !wantsPeering(&fc) {
		r.acceptance.Stop(fc.Name)
		r.joins.forget(fc.Name)
		if !controllerutil.ContainsFinalizer(&fc, discoveryv1alpha1.PeeringFinalizer) {
			return ctrl.Result{}, nil
		}
		return r.teardown(ctx, &fc)
	}
	orig := fc.DeepCopy()
	if controllerutil.AddFinalizer(&fc, discoveryv1alpha1.PeeringFinalizer) {
		if err := r.Client.Update(ctx, &fc); err != nil {
			return ctrl.Result{}, err
		}
		orig = fc.DeepCopy()
	}
	period := reconcilePeriod(r.Config)
	step := newSteps(ctx, "peering", "provider", provider)
	result, err := phase.Run(ctx, &fc, r.awaitPeer, r.request)
	step("peer")
	if perr := r.patchStatus(ctx, orig, &fc); perr != nil {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	step("status written")
	requested := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested)
	isRequested := requested != nil && requested.Status == metav1.ConditionTrue
	r.joins.observe(fc.Name, isRequested, isRequested && requested.Reason == discoveryv1alpha1.ReasonAccepted)
	if err != nil {
		return ctrl.Result{}, err
	}
	if c := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionAuthenticated); c != nil && c.Reason == discoveryv1alpha1.ReasonRefusedByProvider &&
		fc.Spec.Join && fc.Spec.OutgoingPeeringEnabled != discoveryv1alpha1.PeeringEnabledYes {
		// The provider's policy says no (it unpeered us, or never wanted
		// us): the cluster is no longer joined, and the teardown that
		// follows removes what is left here.
		patch := client.MergeFrom(fc.DeepCopy())
		fc.Spec.Join = false
		if err := r.Client.Patch(ctx, &fc, patch); err != nil {
			return ctrl.Result{}, err
		}
		ctrl.LoggerFrom(ctx).Info("The provider refused the peering; join set to false", "provider", provider, "reason", c.Message)
		return ctrl.Result{}, nil
	}
	if result.RequeueAfter == 0 || result.RequeueAfter > period {
		result.RequeueAfter = period
	}
	// A watch of the PeeringRequest in the provider wakes this up when it
	// accepts; should the watch fail or not be allowed (an identity issued
	// before it was), look again soon, backing off as the wait grows (a
	// quarter of the time waited, at least 200 ms, at most the period).
	if c := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested); c != nil && c.Reason == discoveryv1alpha1.ReasonPending {
		floor := 200 * time.Millisecond
		if r.acceptance.Watching(fc.Name) {
			floor = 2 * time.Second
		}
		result.RequeueAfter = min(result.RequeueAfter, max(floor, time.Since(c.LastTransitionTime.Time)/4))
	} else {
		r.acceptance.Stop(fc.Name)
	}
	return result, nil
}

// awaitPeer ends the pass until the cluster can be asked: its auth
// service answered, and its CA is trusted.
func (r *Outgoing) awaitPeer(_ context.Context, fc *discoveryv1alpha1.ForeignCluster) (ctrl.Result, bool, error) {
	switch {
	case fc.Spec.ForeignAuthURL == "" || fc.Status.APIServerURL == "":
		setCondition(fc, discoveryv1alpha1.ConditionAuthenticated, metav1.ConditionFalse, discoveryv1alpha1.ReasonWaitingForPeer,
			"Waiting for the cluster's auth service to answer with its identity (see the Reachable condition)")
		return ctrl.Result{RequeueAfter: 2 * time.Second}, false, nil
	case !meta.IsStatusConditionTrue(fc.Status.Conditions, discoveryv1alpha1.ConditionCATrusted):
		setCondition(fc, discoveryv1alpha1.ConditionAuthenticated, metav1.ConditionFalse, discoveryv1alpha1.ReasonCANotTrusted,
			"The cluster's CA is not trusted (see the CATrusted condition); nothing is sent to it until it is")
		return ctrl.Result{RequeueAfter: 5 * time.Second}, false, nil
	}
	return ctrl.Result{}, true, nil
}

// request brings the peering to PeeringRequested: an identity in the
// provider (authenticating when there is none, or it was refused), then
// the PeeringRequest, recording progress in the conditions.
func (r *Outgoing) request(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster) (ctrl.Result, bool, error) {
	result, err := r.requestPeering(ctx, fc)
	return result, err == nil, err
}

func (r *Outgoing) requestPeering(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster) (ctrl.Result, error) {
	provider := fc.Spec.ClusterIdentity.ClusterID
	// The tenant namespace, where the provider writes its Advertisement,
	// must exist before the PeeringRequest does; it is made while this
	// cluster authenticates, and never outlives this reconcile.
	tenant := make(chan error, 1)
	go func() {
		_, err := ensureTenant(ctx, r.Client, provider, ProviderRole, identity.ProviderUserPrefix+provider, providerRules)
		tenant <- err
	}()
	waitTenant := func() error {
		if tenant == nil {
			return nil
		}
		err := <-tenant
		tenant = nil
		return err
	}
	defer func() { _ = waitTenant() }()
	creds, secret, err := r.credentials(ctx, fc)
	if err != nil {
		return ctrl.Result{}, err
	}
	for attempt := 0; ; attempt++ {
		if creds == nil {
			if creds, secret, err = r.authenticate(ctx, fc); err != nil {
				// Recorded in the condition; retried soon at first (a LAN
				// peer may not have pinned this cluster yet), then every 5 s.
				delay := 5 * time.Second
				if c := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionAuthenticated); c != nil {
					delay = min(delay, max(500*time.Millisecond, time.Since(c.LastTransitionTime.Time)/4))
				}
				waits.WithLabelValues(waitAuthRetry).Inc()
				return ctrl.Result{RequeueAfter: delay}, nil
			}
		}
		if err := waitTenant(); err != nil {
			return ctrl.Result{}, err
		}
		err = r.ensurePeeringRequest(ctx, fc, creds, secret)
		refused := (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) && !RefusedByWebhook(err)
		if !refused {
			r.refusedSince.Delete(provider)
		} else if first, _ := r.refusedSince.LoadOrStore(provider, time.Now()); time.Since(first.(time.Time)) < refusalGrace && identity.Readyz(ctx, creds.RESTConfig()) != nil {
			setCondition(fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonRequestFailed,
				fmt.Sprintf("%s refuses the peering identity (%v); authenticating again if it still does after %s", provider, err, refusalGrace))
			waits.WithLabelValues(waitRefusalGrace).Inc()
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		if (errors.Is(err, errNotVerified) || refused) && attempt == 0 {
			r.refusedSince.Delete(provider)
			// The provider revoked the identity, its RBAC was lost, or it
			// cannot verify us with the key of the last exchange:
			// authenticate again once.
			ctrl.LoggerFrom(ctx).Info("The provider refused the peering identity; authenticating again", "provider", provider, "error", err.Error())
			creds = nil
			continue
		}
		break
	}
	if err != nil {
		setCondition(fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonRequestFailed,
			fmt.Sprintf("Creating the PeeringRequest in %s failed: %v", provider, err))
		waits.WithLabelValues(waitRequestRetry).Inc()
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// ensurePeeringRequest creates or repairs this cluster's PeeringRequest in
// the provider, and reflects the provider's answer in the conditions.
func (r *Outgoing) ensurePeeringRequest(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster, creds *identity.Credentials, secret *corev1.Secret) error {
	provider := fc.Spec.ClusterIdentity.ClusterID
	local, err := r.Local(ctx)
	if err != nil {
		return err
	}
	step := newSteps(ctx, "request", "provider", provider)
	// Polled every few hundred milliseconds while pending: one client
	// per identity, not one (and an API discovery) per call.
	remote, err := r.clients.For(creds.RESTConfig(), r.Scheme)
	if err != nil {
		return err
	}
	step("client")
	setCondition(fc, discoveryv1alpha1.ConditionAuthenticated, metav1.ConditionTrue, "IdentityIssued",
		fmt.Sprintf("%s issued the identity %s%s (authenticated by %s)", provider, identity.ConsumerUserPrefix, r.LocalClusterID, secret.Annotations[discoveryv1alpha1.AuthenticatedByAnnotation]))
	want := discoveryv1alpha1.PeeringRequestSpec{
		ClusterIdentity:     discoveryv1alpha1.ClusterIdentity{ClusterID: r.LocalClusterID, ClusterName: local.ClusterName},
		Namespace:           r.Namespace,
		AuthURL:             r.LocalAuthURL,
		APIServerURL:        local.APIServerURL,
		CACert:              local.CACert,
		ProviderCertificate: string(secret.Data[identity.ProviderCertKey]),
		VirtualKubeletCSR:   string(secret.Data[identity.VirtualKubeletCSRKey]),
	}
	var pr discoveryv1alpha1.PeeringRequest
	err = remote.Get(ctx, client.ObjectKey{Name: r.LocalClusterID}, &pr)
	step("get")
	switch {
	case apierrors.IsNotFound(err):
		pr = discoveryv1alpha1.PeeringRequest{ObjectMeta: metav1.ObjectMeta{Name: r.LocalClusterID}, Spec: want}
		if err := remote.Create(ctx, &pr); err != nil {
			return err
		}
		step("create")
		ctrl.LoggerFrom(ctx).Info("PeeringRequest created", "provider", provider)
	case err != nil:
		return err
	case !pr.DeletionTimestamp.IsZero():
		return fmt.Errorf("the PeeringRequest in %s is being deleted; it is created again once gone", provider)
	case !reflect.DeepEqual(pr.Spec, want):
		pr.Spec = want
		if err := remote.Update(ctx, &pr); err != nil {
			return err
		}
	}
	if err := r.storeVirtualKubeletIdentity(ctx, secret, creds, &pr); err != nil {
		return err
	}
	if v := meta.FindStatusCondition(pr.Status.Conditions, discoveryv1alpha1.PeeringRequestConsumerVerified); v != nil &&
		v.Status == metav1.ConditionFalse && v.ObservedGeneration == pr.Generation {
		return fmt.Errorf("%w: %s", errNotVerified, v.Message)
	}
	if c := meta.FindStatusCondition(pr.Status.Conditions, discoveryv1alpha1.PeeringRequestAccepted); c != nil && c.Status == metav1.ConditionTrue {
		setCondition(fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionTrue, discoveryv1alpha1.ReasonAccepted,
			fmt.Sprintf("%s admitted and accepted the PeeringRequest: %s", provider, c.Message))
	} else {
		watchAcceptance(ctx, r.acceptance, fc.Name, r.LocalClusterID, creds.RESTConfig(), r.Scheme)
		msg := fmt.Sprintf("%s admitted the PeeringRequest; waiting for it to accept", provider)
		if c != nil {
			msg += ": " + c.Message
		}
		setCondition(fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionTrue, discoveryv1alpha1.ReasonPending, msg)
	}
	return nil
}

func setCondition(fc *discoveryv1alpha1.ForeignCluster, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&fc.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: fc.Generation})
}

func (r *Outgoing) patchStatus(ctx context.Context, orig, fc *discoveryv1alpha1.ForeignCluster) error {
	if equality.Semantic.DeepEqual(orig.Status, fc.Status) {
		return nil
	}
	return client.IgnoreNotFound(foreigncluster.PatchStatus(ctx, r.Client, nil, orig, fc))
}

// SetupWithManager registers the reconciler. Besides spec changes, it
// reacts to the status changes that unblock a peering: the CA trusted, the
// API server address known.
func (r *Outgoing) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Local == nil || r.LocalClusterID == "" || r.Namespace == "" {
		return errors.New("peering.Outgoing needs Client, Local, LocalClusterID and Namespace")
	}
	r.acceptance = remotewatch.New(acceptanceWatchLimit)
	unblocked := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*discoveryv1alpha1.ForeignCluster)
		n, ok2 := e.ObjectNew.(*discoveryv1alpha1.ForeignCluster)
		if !ok1 || !ok2 {
			return false
		}
		return o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() || o.Status.APIServerURL != n.Status.APIServerURL || o.Status.TrustedCAFingerprint != n.Status.TrustedCAFingerprint ||
			meta.IsStatusConditionTrue(o.Status.Conditions, discoveryv1alpha1.ConditionCATrusted) != meta.IsStatusConditionTrue(n.Status.Conditions, discoveryv1alpha1.ConditionCATrusted)
	}}
	return ctrl.NewControllerManagedBy(mgr).
		For(&discoveryv1alpha1.ForeignCluster{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, unblocked))).
		// A token stored by liqoctl add is tried at once.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			id := o.GetLabels()[discoveryv1alpha1.ClusterIDLabel]
			if id == "" || o.GetName() != auth.RemoteTokenSecretName(id) {
				return nil
			}
			fc, err := foreigncluster.Find(ctx, mgr.GetClient(), id)
			if err != nil || fc == nil {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(fc)}}
		})).
		// A peering waiting for its tenant namespace to finish going
		// (a fresh one is made once it is gone) starts again at once.
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			fc, err := foreigncluster.Find(ctx, mgr.GetClient(), o.GetLabels()[discoveryv1alpha1.ClusterIDLabel])
			if err != nil || fc == nil {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(fc)}}
		}), builder.WithPredicates(tenantGone)).
		// The provider accepting (or refusing) a PeeringRequest.
		WatchesRawSource(source.Channel(r.acceptance.Events, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		Named("peering").
		Complete(r)
}
