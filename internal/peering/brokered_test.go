// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"context"
	"errors"
	"slices"
	"strings"
	gosync "sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// TestBrokeredPeerings runs the consumer's side of a broker's
// introductions against two real API servers, the consumer's and the
// broker's: the consumer peers, for the network only, with the enabled
// providers the broker introduced it to, and with none else; it keeps the
// token up to date, never touches a peering made by hand, and unpeers a
// provider the Selection dropped only after the grace period.
func TestBrokeredPeerings(t *testing.T) {
	const consumerID, brokerID = "consumer-1", "broker-1"
	consumer := envtest.StartCluster(t, "consumer")
	broker := envtest.StartCluster(t, "broker")
	ctx := t.Context()
	inConsumer, inBroker := installed(t, consumer), installed(t, broker)

	tenant := discoveryv1alpha1.TenantNamespace(consumerID)
	if err := inBroker.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}); err != nil {
		t.Fatal(err)
	}
	token := func(introducer, secret string) string {
		return introducer + auth.IntroductionSeparator + strings.Repeat(secret, 32)
	}
	sel := &brokerv1alpha1.Selection{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: brokerv1alpha1.SelectionName},
		Spec: brokerv1alpha1.SelectionSpec{Providers: []string{"p1", "p2", "p4", "p5"}}}
	if err := inBroker.Create(ctx, sel); err != nil {
		t.Fatal(err)
	}
	accepted := func(id, tok string) brokerv1alpha1.IntroducedProvider {
		return brokerv1alpha1.IntroducedProvider{ClusterID: id, ClusterName: id + "-name", AuthURL: "https://127.0.0.1:1", Token: tok, State: brokerv1alpha1.IntroductionAccepted}
	}
	setStatus := func(in ...brokerv1alpha1.IntroducedProvider) {
		t.Helper()
		if err := inBroker.Get(ctx, client.ObjectKeyFromObject(sel), sel); err != nil {
			t.Fatal(err)
		}
		sel.Status.Introductions = in
		if err := inBroker.Status().Update(ctx, sel); err != nil {
			t.Fatal(err)
		}
	}
	setStatus(
		accepted("p1", token(brokerID, "a1")),
		brokerv1alpha1.IntroducedProvider{ClusterID: "p2", State: brokerv1alpha1.IntroductionRefused, Message: "no"},
		accepted("p3", token(brokerID, "a3")),    // introduced, not enabled
		accepted("p4", token(brokerID, "a4")),    // peered by hand already
		accepted("p5", token("elsewhere", "a5")), // a token of another introducer
	)
	hand := &discoveryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: "p4", Labels: map[string]string{discoveryv1alpha1.ClusterIDLabel: "p4"}},
		Spec: discoveryv1alpha1.ForeignClusterSpec{ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: "p4"}, ForeignAuthURL: "https://127.0.0.2:1"}}
	if err := inConsumer.Create(ctx, hand); err != nil {
		t.Fatal(err)
	}

	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	b := &Brokered{
		Client: inConsumer, Namespace: install.DefaultNamespace, LocalClusterID: consumerID,
		Config: func() *configv1alpha1.ClusterConfig {
			return &configv1alpha1.ClusterConfig{Spec: configv1alpha1.ClusterConfigSpec{PeeringConfig: configv1alpha1.PeeringConfig{
				Brokers: []string{brokerID}, BrokeredUnpeerAfterSeconds: 60}}}
		},
		Brokers: func(_ context.Context, id string) (client.Client, error) {
			if id != brokerID {
				t.Fatalf("asked for a client in %s", id)
			}
			return inBroker, nil
		},
		Now: func() time.Time { return now },
	}
	sync := func() {
		t.Helper()
		if err := b.Sync(ctx, brokerID); err != nil {
			t.Fatal(err)
		}
	}
	fcOf := func(id string) *discoveryv1alpha1.ForeignCluster {
		t.Helper()
		var fc discoveryv1alpha1.ForeignCluster
		err := inConsumer.Get(ctx, client.ObjectKey{Name: id}, &fc)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return &fc
	}
	tokenOf := func(id string) string {
		t.Helper()
		var s corev1.Secret
		err := inConsumer.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: auth.RemoteTokenSecretName(id)}, &s)
		if apierrors.IsNotFound(err) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(s.Data[auth.TokenKey])
	}

	sync()
	fc := fcOf("p1")
	if fc == nil || !fc.Spec.Join || fc.Spec.NetworkingEnabled != discoveryv1alpha1.PeeringEnabledYes || fc.Labels[discoveryv1alpha1.IntroducedByLabel] != brokerID ||
		fc.Spec.ForeignAuthURL != "https://127.0.0.1:1" || fc.Spec.ClusterIdentity.ClusterName != "p1-name" {
		t.Fatalf("the ForeignCluster of p1, enabled and introduced: %+v", fc)
	}
	if got := tokenOf("p1"); got != token(brokerID, "a1") {
		t.Fatalf("p1's token: %q", got)
	}
	for _, id := range []string{"p2", "p3", "p5"} {
		if fcOf(id) != nil || tokenOf(id) != "" {
			t.Errorf("%s (refused, not enabled, or another introducer's token) got a peering", id)
		}
	}
	if got := fcOf("p4"); got.Labels[discoveryv1alpha1.IntroducedByLabel] != "" || got.Spec.Join || got.Spec.ForeignAuthURL != "https://127.0.0.2:1" || tokenOf("p4") != "" {
		t.Errorf("the peering made by hand with p4 was changed: %+v, token %q", got, tokenOf("p4"))
	}

	// A new token (the provider revoked the old one) replaces it.
	setStatus(accepted("p1", token(brokerID, "b1")))
	sync()
	if got := tokenOf("p1"); got != token(brokerID, "b1") {
		t.Fatalf("p1's token after the broker's new introduction: %q", got)
	}

	// Dropped from the Selection: kept for the grace period, then
	// unpeered; enabled again within it, kept.
	sel.Spec.Providers = []string{"p2"}
	if err := inBroker.Update(ctx, sel); err != nil {
		t.Fatal(err)
	}
	sync()
	if fc := fcOf("p1"); !fc.Spec.Join || fc.Annotations[discoveryv1alpha1.UnusedSinceAnnotation] == "" {
		t.Fatalf("p1 just dropped: %+v, want joined and marked unused", fc.Annotations)
	}
	now = now.Add(30 * time.Second)
	sync()
	if !fcOf("p1").Spec.Join {
		t.Fatal("p1 unpeered before the grace period")
	}
	if err := inBroker.Get(ctx, client.ObjectKeyFromObject(sel), sel); err != nil {
		t.Fatal(err)
	}
	sel.Spec.Providers = []string{"p1"}
	if err := inBroker.Update(ctx, sel); err != nil {
		t.Fatal(err)
	}
	sync()
	if fc := fcOf("p1"); !fc.Spec.Join || fc.Annotations[discoveryv1alpha1.UnusedSinceAnnotation] != "" {
		t.Fatalf("p1 enabled again: %+v, want joined and not marked", fc.Annotations)
	}
	sel.Spec.Providers = nil
	if err := inBroker.Update(ctx, sel); err != nil {
		t.Fatal(err)
	}
	sync()
	now = now.Add(61 * time.Second)
	sync()
	if fcOf("p1").Spec.Join {
		t.Fatal("p1 still joined after the grace period")
	}
	if got := fcOf("p4"); got.Spec.Join || got.Labels[discoveryv1alpha1.IntroducedByLabel] != "" {
		t.Errorf("the peering made by hand with p4 was changed: %+v", got)
	}

	// What this cluster's own checks find of the providers in use goes
	// into its view in the broker, which the broker made.
	view := &brokerv1alpha1.ConsumerView{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: brokerv1alpha1.ConsumerViewName}}
	if err := inBroker.Create(ctx, view); err != nil {
		t.Fatal(err)
	}
	var mu gosync.Mutex
	var checked []string
	b.Check = func(_ context.Context, id string) error {
		mu.Lock()
		defer mu.Unlock()
		checked = append(checked, id)
		if id == "p1" {
			return nil
		}
		return errors.New("connection refused")
	}
	setStatus(accepted("p1", token(brokerID, "b1")), accepted("p3", token(brokerID, "a3")), accepted("p4", token(brokerID, "a4")))
	if err := inBroker.Get(ctx, client.ObjectKeyFromObject(sel), sel); err != nil {
		t.Fatal(err)
	}
	sel.Spec.Providers = []string{"p1", "p4"}
	if err := inBroker.Update(ctx, sel); err != nil {
		t.Fatal(err)
	}
	sync()
	if err := inBroker.Get(ctx, client.ObjectKeyFromObject(view), view); err != nil {
		t.Fatal(err)
	}
	want := []brokerv1alpha1.ProviderSight{{ClusterID: "p1", Answered: true}, {ClusterID: "p4", Error: "connection refused"}}
	if !slices.Equal(view.Spec.Providers, want) || view.Spec.CheckedAt == nil || !view.Spec.CheckedAt.Time.Equal(now) {
		t.Errorf("the view: %+v at %v, want %+v at %v", view.Spec.Providers, view.Spec.CheckedAt, want, now)
	}
	if slices.Contains(checked, "p3") {
		t.Errorf("checked %v: p3, introduced but not in use, is none of this cluster's business", checked)
	}
	// p1's introduction is no longer accepted now (a broker that lost its
	// path to p1 cannot renew it): p1, still in use, is still checked,
	// and its peering kept, past the grace period too.
	setStatus(brokerv1alpha1.IntroducedProvider{ClusterID: "p1", State: brokerv1alpha1.IntroductionPending, Message: "unreachable"},
		accepted("p4", token(brokerID, "a4")))
	sync()
	now = now.Add(2 * time.Minute)
	sync()
	if err := inBroker.Get(ctx, client.ObjectKeyFromObject(view), view); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(view.Spec.Providers, want) || !view.Spec.CheckedAt.Time.Equal(now) {
		t.Errorf("the view with p1's introduction pending: %+v at %v, want %+v at %v", view.Spec.Providers, view.Spec.CheckedAt, want, now)
	}
	if fc := fcOf("p1"); !fc.Spec.Join || fc.Annotations[discoveryv1alpha1.UnusedSinceAnnotation] != "" {
		t.Errorf("p1 in use, its introduction pending: join %v, annotations %v; want kept, not marked unused", fc.Spec.Join, fc.Annotations)
	}
	// None in use any more: the view says so.
	sel.Spec.Providers = nil
	if err := inBroker.Update(ctx, sel); err != nil {
		t.Fatal(err)
	}
	sync()
	if err := inBroker.Get(ctx, client.ObjectKeyFromObject(view), view); err != nil || len(view.Spec.Providers) != 0 {
		t.Errorf("the view with no provider in use: %+v (%v)", view.Spec.Providers, err)
	}
}
