// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package controllermanager

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/virtualkubelet/pods"
)

// phaseChange is one change of an object's phase, as an event says it.
type phaseChange struct {
	eventType, reason, action, note string
}

// phaseChanges lists what changed between two versions of an object: each
// condition that appeared or changed its status or reason (a message alone
// is no new phase); for an Advertisement, also its decision.
func phaseChanges(old, cur client.Object) []phaseChange {
	var out []phaseChange
	if o, c := conditionsOf(old), conditionsOf(cur); c != nil {
		for _, cond := range *c {
			var before *metav1.Condition
			if o != nil {
				before = meta.FindStatusCondition(*o, cond.Type)
			}
			if before != nil && before.Status == cond.Status && before.Reason == cond.Reason {
				continue
			}
			t := corev1.EventTypeNormal
			if cond.Status == metav1.ConditionFalse {
				t = corev1.EventTypeWarning
			}
			out = append(out, phaseChange{eventType: t, reason: cond.Reason, action: cond.Type,
				note: fmt.Sprintf("%s=%s: %s", cond.Type, cond.Status, cond.Message)})
		}
	}
	if o, ok := old.(*sharingv1alpha1.Advertisement); ok {
		c := cur.(*sharingv1alpha1.Advertisement)
		if c.Status.Phase != "" && c.Status.Phase != o.Status.Phase {
			t := corev1.EventTypeNormal
			if c.Status.Phase != sharingv1alpha1.AdvertisementAccepted {
				t = corev1.EventTypeWarning
			}
			reason := c.Status.Reason
			if reason == "" {
				reason = string(c.Status.Phase)
			}
			out = append(out, phaseChange{eventType: t, reason: reason, action: "Decide",
				note: fmt.Sprintf("Offer %s: %s", c.Status.Phase, c.Status.Message)})
		}
	}
	return out
}

// conditionsOf is the object's status conditions, nil for a kind without.
func conditionsOf(o client.Object) *[]metav1.Condition {
	switch o := o.(type) {
	case *discoveryv1alpha1.ForeignCluster:
		return &o.Status.Conditions
	case *sharingv1alpha1.Advertisement:
		return &o.Status.Conditions
	case *offloadingv1alpha1.NamespaceOffloading:
		return &o.Status.Conditions
	}
	return nil
}

// setupPhaseEvents records an event on a ForeignCluster, an Advertisement
// or a NamespaceOffloading at each change of its phase (phaseChanges), so
// that kubectl describe and kubectl events show a peering's history. The
// TunnelEndpoint's events are its own controller's. The events are
// recorded as the cache sees each update, by the leader alone; nothing is
// reconciled.
func setupPhaseEvents(mgr ctrl.Manager) error {
	// None into a namespace that is going (a NamespaceOffloading's
	// conditions change as its namespace is deleted), and none too long
	// for the API server (a condition's message may quote a peer).
	rec := pods.LiveNamespaces{EventRecorder: mgr.GetEventRecorder("liqo-controller-manager"), Reader: mgr.GetClient(), Live: mgr.GetAPIReader()}
	h := phaseEventHandler(rec)
	return ctrl.NewControllerManagedBy(mgr).
		Named("phase-events").
		Watches(&discoveryv1alpha1.ForeignCluster{}, h).
		Watches(&sharingv1alpha1.Advertisement{}, h).
		Watches(&offloadingv1alpha1.NamespaceOffloading{}, h).
		Complete(reconcile.Func(func(context.Context, reconcile.Request) (ctrl.Result, error) { return ctrl.Result{}, nil }))
}

// phaseEventHandler records the phase changes of each update with rec and
// enqueues nothing.
func phaseEventHandler(rec events.EventRecorder) handler.EventHandler {
	return handler.Funcs{
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			for _, ch := range phaseChanges(e.ObjectOld, e.ObjectNew) {
				rec.Eventf(e.ObjectNew, nil, ch.eventType, ch.reason, ch.action, "%s", ch.note)
			}
		},
	}
}
