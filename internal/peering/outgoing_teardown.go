// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/phase"
)

// teardownScope is what the phases of a teardown share.
type teardownScope struct {
	fc       *discoveryv1alpha1.ForeignCluster
	provider string
	// creds is the identity held in the provider, nil once it went.
	creds *identity.Credentials
	// refused is the Authenticated condition when the provider refused
	// the peering (the reason of the teardown), or nil.
	refused *metav1.Condition
	// decided: an earlier pass recorded the outcome and only the
	// finalizer is left.
	decided bool
	// forced: the local side goes without the provider.
	forced bool
	// outcome says, for people, what happened in the provider.
	outcome string
	// finished: the finalizer may go once the status is written.
	finished bool
}

// teardown deletes the PeeringRequest in the provider, then everything
// local; when the provider cannot be reached for ForceUnpeerAfter, the
// local side completes alone and the condition says so. The state of a
// teardown lives in the PeeringRequested condition's reason (Unpeering,
// RemovedInProvider, ForcingUnpeer, then Unpeered, ForceUnpeered or
// RefusedByProvider); each pass writes the status once, at its end, and
// the finalizer goes only after the final status is written.
func (r *Outgoing) teardown(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster) (result ctrl.Result, err error) {
	s := &teardownScope{fc: fc, provider: fc.Spec.ClusterIdentity.ClusterID}
	if s.creds, _, err = r.storedCredentials(ctx, s.provider); err != nil {
		return ctrl.Result{}, err
	}
	if c := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionAuthenticated); c != nil && c.Reason == discoveryv1alpha1.ReasonRefusedByProvider {
		s.refused = c
	}
	orig := fc.DeepCopy()
	defer func() {
		if perr := r.patchStatus(ctx, orig, fc); perr != nil {
			err = errors.Join(err, perr)
			return
		}
		if err != nil || !s.finished {
			return
		}
		if controllerutil.RemoveFinalizer(fc, discoveryv1alpha1.PeeringFinalizer) {
			if uerr := r.Client.Update(ctx, fc); uerr != nil {
				err = client.IgnoreNotFound(uerr)
				return
			}
		}
		ctrl.LoggerFrom(ctx).Info("Unpeered", "provider", s.provider, "forced", s.forced)
	}()
	// A phase that changed something in the provider ends the pass, so
	// that the status records it before the identity that could tell goes.
	return phase.Run(ctx, s, r.startTeardown, r.removeInProvider, r.removeLocal, r.recordOutcome)
}

// startTeardown reads where an earlier pass left the teardown, or starts
// it: the condition's transition time is when the unpeering started.
func (r *Outgoing) startTeardown(_ context.Context, s *teardownScope) (ctrl.Result, bool, error) {
	cond := meta.FindStatusCondition(s.fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested)
	reason := ""
	if cond != nil {
		reason = cond.Reason
	}
	switch reason {
	case discoveryv1alpha1.ReasonForceUnpeered, discoveryv1alpha1.ReasonUnpeered:
		// A pass that wrote its outcome and then failed to remove the
		// finalizer (another writer's change in between) leaves the
		// outcome for the next pass, which has no identity left to judge
		// by: keep it.
		s.decided = s.creds == nil
	case discoveryv1alpha1.ReasonUnpeering:
		return ctrl.Result{}, true, nil
	case discoveryv1alpha1.ReasonRemovedInProvider:
		s.outcome = cond.Message // what the pass that removed it wrote
		return ctrl.Result{}, true, nil
	case discoveryv1alpha1.ReasonForcingUnpeer:
		s.forced = true
		return ctrl.Result{}, true, nil
	}
	if !s.decided {
		// Drop the old condition so that a False of long ago does not count.
		meta.RemoveStatusCondition(&s.fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested)
		setCondition(s.fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonUnpeering,
			fmt.Sprintf("Deleting the PeeringRequest in %s", s.provider))
	}
	return ctrl.Result{}, true, nil
}

// removeInProvider deletes this cluster's PeeringRequest in the provider
// while an identity is held there, retrying for ForceUnpeerAfter, and
// records the outcome in the condition's reason before the identity goes.
func (r *Outgoing) removeInProvider(ctx context.Context, s *teardownScope) (ctrl.Result, bool, error) {
	cond := meta.FindStatusCondition(s.fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested)
	if s.decided || cond.Reason != discoveryv1alpha1.ReasonUnpeering {
		return ctrl.Result{}, true, nil // decided by an earlier pass
	}
	if s.creds == nil {
		s.outcome = "no identity was held in the provider; the local side was removed"
		return ctrl.Result{}, true, nil
	}
	outcome, err := r.deleteRemote(ctx, s.creds)
	if err != nil {
		limit := r.ForceUnpeerAfter
		if limit == 0 {
			limit = DefaultForceUnpeerAfter
		}
		if waited := time.Since(cond.LastTransitionTime.Time); waited < limit {
			setCondition(s.fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonUnpeering,
				fmt.Sprintf("Deleting the PeeringRequest in %s failed (%v); retrying, the local side is removed anyway in %s", s.provider, err, (limit-waited).Round(time.Second)))
			return ctrl.Result{RequeueAfter: 2 * time.Second}, false, nil
		}
		setCondition(s.fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonForcingUnpeer,
			"The provider stayed unreachable: removing the local side without it")
	} else {
		setCondition(s.fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonRemovedInProvider, outcome)
	}
	// Recorded, in the reason, before the identity goes: the next pass
	// removes the local side.
	return ctrl.Result{RequeueAfter: 10 * time.Millisecond}, false, nil
}

// removeLocal removes the identity, the provider's offer, and the tenant
// namespace unless the provider's own peering towards this cluster
// shares it.
func (r *Outgoing) removeLocal(ctx context.Context, s *teardownScope) (ctrl.Result, bool, error) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: identity.RemoteSecretName(s.provider)}}
	if err := r.Client.Delete(ctx, secret); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, false, err
	}
	adv := &sharingv1alpha1.Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: discoveryv1alpha1.TenantNamespace(s.provider), Name: sharingv1alpha1.AdvertisementName(s.provider)}}
	if err := r.Client.Delete(ctx, adv); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, false, err
	}
	meta.RemoveStatusCondition(&s.fc.Status.Conditions, discoveryv1alpha1.ConditionAdvertisementAccepted)
	var incoming discoveryv1alpha1.PeeringRequest
	err := r.Client.Get(ctx, client.ObjectKey{Name: s.provider}, &incoming)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, false, err
	}
	if err := releaseTenant(ctx, r.Client, s.provider, ProviderRole, VirtualKubeletRole, err == nil && incoming.DeletionTimestamp.IsZero()); err != nil {
		return ctrl.Result{}, false, err
	}
	return ctrl.Result{}, true, nil
}

// recordOutcome writes the teardown's outcome in the conditions; the
// finalizer goes once they are written.
func (r *Outgoing) recordOutcome(_ context.Context, s *teardownScope) (ctrl.Result, bool, error) {
	fc, provider := s.fc, s.provider
	setCondition(fc, discoveryv1alpha1.ConditionAuthenticated, metav1.ConditionFalse, discoveryv1alpha1.ReasonNotJoined, "Not joined: no identity is held in the cluster")
	switch {
	case s.decided:
		// Recorded by the pass that decided it.
	case s.refused != nil:
		setCondition(fc, discoveryv1alpha1.ConditionAuthenticated, metav1.ConditionFalse, discoveryv1alpha1.ReasonRefusedByProvider, s.refused.Message)
		setCondition(fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonRefusedByProvider, fmt.Sprintf(
			"%s refused the peering, so join was set to false and the local side removed; set join to true again once its operator allows it", provider))
	case s.forced:
		setCondition(fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonForceUnpeered, fmt.Sprintf(
			"%s was unreachable; the local side was removed without it. Its PeeringRequest %s may remain there until its operator deletes it (kubectl delete peeringrequest %s)",
			provider, r.LocalClusterID, r.LocalClusterID))
	default:
		setCondition(fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, discoveryv1alpha1.ReasonUnpeered, "Not joined: "+s.outcome)
	}
	s.finished = true
	return ctrl.Result{}, true, nil
}

// deleteRemote deletes this cluster's PeeringRequest in the provider. Gone
// already, or refused because the identity was revoked, both count as done.
func (r *Outgoing) deleteRemote(ctx context.Context, creds *identity.Credentials) (string, error) {
	cfg := creds.RESTConfig()
	cfg.Timeout = 5 * time.Second
	remote, err := r.clients.For(cfg, r.Scheme)
	if err != nil {
		return "", err
	}
	err = remote.Delete(ctx, &discoveryv1alpha1.PeeringRequest{ObjectMeta: metav1.ObjectMeta{Name: r.LocalClusterID}})
	// Gone, or this cluster's identity refused: the provider revokes it
	// exactly when its side of the peering is removed. Which of them, the
	// outcome says (and the log), for the operator who finds a
	// PeeringRequest left in the provider.
	switch {
	case err == nil:
		return "the peering was removed on both sides", nil
	case apierrors.IsNotFound(err):
		return "the peering was removed on both sides (its PeeringRequest was gone in the provider already)", nil
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		ctrl.LoggerFrom(ctx).Info("The provider refused this cluster's identity while unpeering: taken as its side removed", "error", err.Error())
		return "the peering was removed on both sides (the provider no longer accepts this cluster's identity, as when its side is removed)", nil
	}
	return "", err
}
