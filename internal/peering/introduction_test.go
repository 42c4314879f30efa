// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// remoteClient is the introducer's client in its one provider.
type remoteClient struct{ c client.Client }

func (r remoteClient) For(_ context.Context, provider string) (client.Client, error) {
	if provider != "provider-1" {
		return nil, fmt.Errorf("no peering with %s", provider)
	}
	return r.c, nil
}

// TestIntroductions runs both sides of an introduction against two real
// API servers, a broker's and a provider's: the broker's own Introduction
// is carried to the provider, which answers by its ClusterConfig alone;
// the token it writes works for that consumer only, stops working when the
// provider stops accepting the introducer, and is revoked when the broker
// withdraws the introduction. What a peer writes outside a tenant
// namespace, or under another consumer's name, gets no token.
func TestIntroductions(t *testing.T) {
	const brokerID, providerID, consumerID = "broker-1", "provider-1", "consumer-1"
	broker := envtest.StartCluster(t, "broker")
	provider := envtest.StartCluster(t, "provider")
	ctx := t.Context()
	inBroker, inProvider := installed(t, broker), installed(t, provider)
	// The broker's tenant namespace in the provider, as a peering makes it.
	tenant := discoveryv1alpha1.TenantNamespace(brokerID)
	if err := inProvider.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant,
		Labels: map[string]string{discoveryv1alpha1.TenantLabel: "true", discoveryv1alpha1.ClusterIDLabel: brokerID}}}); err != nil {
		t.Fatal(err)
	}
	var cfg atomic.Pointer[configv1alpha1.ClusterConfig]
	cfg.Store(&configv1alpha1.ClusterConfig{})
	config := cfg.Load
	changes := make(chan struct{}, 1)
	setIntroducers := func(ids ...string) {
		cfg.Store(&configv1alpha1.ClusterConfig{Spec: configv1alpha1.ClusterConfigSpec{PeeringConfig: configv1alpha1.PeeringConfig{Introducers: ids}}})
		changes <- struct{}{}
	}
	envtest.StartManager(t, provider.RESTConfig, func(mgr ctrl.Manager) error {
		return (&IntroductionsReceived{Client: mgr.GetClient(), LocalClusterID: providerID, Config: config, Changes: changes}).SetupWithManager(mgr)
	})
	envtest.StartManager(t, broker.RESTConfig, func(mgr ctrl.Manager) error {
		return (&IntroductionsSent{Client: mgr.GetClient(), Namespace: install.DefaultNamespace, LocalClusterID: brokerID,
			Remotes: remoteClient{inProvider}, Resync: 200 * time.Millisecond}).SetupWithManager(mgr)
	})
	lookup := IntroductionToken(inProvider, config)

	intro := &discoveryv1alpha1.Introduction{
		ObjectMeta: metav1.ObjectMeta{Namespace: install.DefaultNamespace, Name: discoveryv1alpha1.IntroductionName(consumerID, providerID)},
		Spec:       discoveryv1alpha1.IntroductionSpec{Consumer: discoveryv1alpha1.ClusterIdentity{ClusterID: consumerID}, ProviderClusterID: providerID},
	}
	if err := inBroker.Create(ctx, intro); err != nil {
		t.Fatal(err)
	}
	answered := func(status metav1.ConditionStatus, reason string) *discoveryv1alpha1.Introduction {
		t.Helper()
		var got discoveryv1alpha1.Introduction
		envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
			if err := inBroker.Get(ctx, client.ObjectKeyFromObject(intro), &got); err != nil {
				return err
			}
			c := meta.FindStatusCondition(got.Status.Conditions, discoveryv1alpha1.IntroductionAccepted)
			if c == nil || c.Status != status || c.Reason != reason {
				return fmt.Errorf("the broker's introduction says %+v, want %s %s", c, status, reason)
			}
			return nil
		})
		return &got
	}

	// Not an introducer of this provider: refused, no token anywhere.
	if got := answered(metav1.ConditionFalse, discoveryv1alpha1.IntroductionReasonNotAnIntroducer); got.Status.Token != "" {
		t.Fatalf("a refused introduction carries a token: %+v", got.Status)
	}
	var theirs discoveryv1alpha1.Introduction
	if err := inProvider.Get(ctx, client.ObjectKey{Namespace: tenant, Name: consumerID}, &theirs); err != nil || theirs.Status.Token != "" {
		t.Fatalf("the provider's copy: %+v, %v; want it there without a token", theirs.Status, err)
	}

	// Accepted: a token for this consumer, by this introducer.
	setIntroducers(brokerID)
	got := answered(metav1.ConditionTrue, discoveryv1alpha1.IntroductionReasonAccepted)
	if !strings.HasPrefix(got.Status.Token, brokerID+".") || len(got.Status.Token) < len(brokerID)+33 {
		t.Fatalf("the introduction's token %q is not the broker's", got.Status.Token)
	}
	token := got.Status.Token
	check := func(introducer, consumer, want string) {
		t.Helper()
		if tok, err := lookup(ctx, introducer, consumer); err != nil || tok != want {
			t.Fatalf("the auth service's lookup of %s introduced by %s: %q, %v; want %q", consumer, introducer, tok, err, want)
		}
	}
	check(brokerID, consumerID, token)
	check(brokerID, "consumer-2", "")
	check("elsewhere", consumerID, "")
	introducers := IntroducersOf(inProvider, config)
	if got, err := introducers(ctx, consumerID); err != nil || len(got) != 1 || got[0] != brokerID {
		t.Fatalf("the introducers of %s: %v, %v; want %s", consumerID, got, err, brokerID)
	}

	// What a peer writes by itself: another consumer's name on the
	// object, or an Introduction outside a tenant namespace.
	squat := &discoveryv1alpha1.Introduction{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "consumer-2"},
		Spec: discoveryv1alpha1.IntroductionSpec{Consumer: discoveryv1alpha1.ClusterIdentity{ClusterID: "consumer-3"}}}
	if err := inProvider.Create(ctx, squat); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		if err := inProvider.Get(ctx, client.ObjectKeyFromObject(squat), squat); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(squat.Status.Conditions, discoveryv1alpha1.IntroductionAccepted); c == nil || c.Reason != discoveryv1alpha1.IntroductionReasonInvalid {
			return fmt.Errorf("an introduction named after another consumer: %+v", squat.Status)
		}
		return nil
	})
	check(brokerID, "consumer-2", "")
	check(brokerID, "consumer-3", "")

	// No longer an introducer: the token stops working at once, and the
	// answer follows.
	setIntroducers()
	check(brokerID, consumerID, "")
	if got, err := introducers(ctx, consumerID); err != nil || len(got) != 0 {
		t.Fatalf("the introducers of %s once the broker is no longer accepted: %v, %v", consumerID, got, err)
	}
	answered(metav1.ConditionFalse, discoveryv1alpha1.IntroductionReasonNotAnIntroducer)

	// Accepted again, then withdrawn by the broker: the provider's copy
	// goes, and with it the token.
	setIntroducers(brokerID)
	token = answered(metav1.ConditionTrue, discoveryv1alpha1.IntroductionReasonAccepted).Status.Token
	check(brokerID, consumerID, token)
	if err := inBroker.Delete(ctx, intro); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		err := inProvider.Get(ctx, client.ObjectKey{Namespace: tenant, Name: consumerID}, &theirs)
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the provider's copy is still there (%w)", err)
		}
		if err := inBroker.Get(ctx, client.ObjectKeyFromObject(intro), intro); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the broker's introduction is still there (%w)", err)
		}
		return nil
	})
	check(brokerID, consumerID, "")
}
