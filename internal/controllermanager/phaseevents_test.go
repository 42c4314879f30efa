// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package controllermanager

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

func fcWith(conds ...metav1.Condition) *discoveryv1alpha1.ForeignCluster {
	return &discoveryv1alpha1.ForeignCluster{Status: discoveryv1alpha1.ForeignClusterStatus{Conditions: conds}}
}

func cond(t string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg}
}

// TestPhaseChanges: a condition that appears, or changes its status or
// reason, is a change (a warning when False); a new message alone is not;
// an Advertisement's decision is one.
func TestPhaseChanges(t *testing.T) {
	auth := discoveryv1alpha1.ConditionAuthenticated
	old := fcWith(cond(auth, metav1.ConditionFalse, "Pending", "waiting"))
	if got := phaseChanges(old, fcWith(cond(auth, metav1.ConditionFalse, "Pending", "still waiting"))); len(got) != 0 {
		t.Errorf("a new message alone: %+v", got)
	}
	got := phaseChanges(old, fcWith(cond(auth, metav1.ConditionTrue, "Authenticated", "done"),
		cond(discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, "Refused", "no")))
	if len(got) != 2 || got[0].eventType != corev1.EventTypeNormal || got[0].reason != "Authenticated" || got[0].action != auth ||
		got[1].eventType != corev1.EventTypeWarning || got[1].reason != "Refused" {
		t.Errorf("a status change and a new False condition: %+v", got)
	}
	if got := phaseChanges(old, fcWith(cond(auth, metav1.ConditionFalse, "Expired", "again"))); len(got) != 1 || got[0].reason != "Expired" {
		t.Errorf("a new reason: %+v", got)
	}
	before, after := &sharingv1alpha1.Advertisement{}, &sharingv1alpha1.Advertisement{}
	after.Status.Phase, after.Status.Reason, after.Status.Message = sharingv1alpha1.AdvertisementRefused, "OverMax", "too much"
	if got := phaseChanges(before, after); len(got) != 1 || got[0].eventType != corev1.EventTypeWarning || got[0].reason != "OverMax" {
		t.Errorf("an offer refused: %+v", got)
	}
}

// TestPhaseEventsRecorded: against a real API server, a ForeignCluster
// whose condition changes gets an event saying so, and one whose message
// alone changes gets none.
func TestPhaseEventsRecorded(t *testing.T) {
	cfg, c := envtest.StartInstalled(t, "events")
	envtest.StartManager(t, cfg, setupPhaseEvents)
	ctx := t.Context()
	fc := &discoveryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "provider-1", Labels: map[string]string{discoveryv1alpha1.ClusterIDLabel: "provider-1"}},
		Spec:       discoveryv1alpha1.ForeignClusterSpec{ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: "provider-1"}},
	}
	if err := c.Create(ctx, fc); err != nil {
		t.Fatal(err)
	}
	setStatus := func(conds ...metav1.Condition) {
		t.Helper()
		for i := range conds {
			conds[i].LastTransitionTime = metav1.Now()
		}
		fc.Status.Conditions = conds
		if err := c.Status().Update(ctx, fc); err != nil {
			t.Fatal(err)
		}
	}
	eventsAbout := func(ctx context.Context) ([]eventsv1.Event, error) {
		var list eventsv1.EventList
		if err := c.List(ctx, &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			return nil, err
		}
		var out []eventsv1.Event
		for _, e := range list.Items {
			if e.Regarding.Name == fc.Name && e.Regarding.Kind == "ForeignCluster" {
				out = append(out, e)
			}
		}
		return out, nil
	}
	// The handler sees updates once the manager's cache holds the
	// object and the controller runs: change the reason until an event
	// shows it does.
	probe := 0
	envtest.Eventually(t, 20*time.Second, func(ctx context.Context) error {
		probe++
		setStatus(cond(discoveryv1alpha1.ConditionReachable, metav1.ConditionTrue, fmt.Sprintf("Probe%d", probe), "answered"))
		evs, err := eventsAbout(ctx)
		if err == nil && len(evs) == 0 {
			err = fmt.Errorf("no event about the ForeignCluster yet")
		}
		return err
	})
	// A new message alone, then a new condition.
	setStatus(cond(discoveryv1alpha1.ConditionReachable, metav1.ConditionTrue, fmt.Sprintf("Probe%d", probe), "answered again"))
	setStatus(cond(discoveryv1alpha1.ConditionReachable, metav1.ConditionTrue, fmt.Sprintf("Probe%d", probe), "answered again"),
		cond(discoveryv1alpha1.ConditionCATrusted, metav1.ConditionFalse, "CAChanged", "The remote CA changed"))
	var evs []eventsv1.Event
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) (err error) {
		if evs, err = eventsAbout(ctx); err != nil {
			return err
		}
		for _, e := range evs {
			if e.Reason == "CAChanged" && e.Type == corev1.EventTypeWarning && e.Action == discoveryv1alpha1.ConditionCATrusted {
				return nil
			}
		}
		return fmt.Errorf("no warning CAChanged among %d events", len(evs))
	})
	// The handler saw the message's change before the CA's: had it made
	// an event, it would be there by now.
	for _, e := range evs {
		if strings.Contains(e.Note, "answered again") {
			t.Fatalf("an event for a new message alone: %+v", e)
		}
	}
}
