// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/liqo-go/liqo/api"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// ownNamespaces is a provider that is not one peer: it makes the
// namespaces its own way, here at once, and records what it was asked.
type ownNamespaces struct {
	mu       sync.Mutex
	made     map[string]string // local -> remote
	released []string
	events   chan event.GenericEvent
}

func (o *ownNamespaces) Request(_ context.Context, provider, local, remote string, _ corev1.ResourceList) (offloadingv1alpha1.RemoteNamespaceStatus, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.made[local] = remote
	return offloadingv1alpha1.RemoteNamespaceStatus{ClusterID: provider, Namespace: remote, Phase: offloadingv1alpha1.RemoteNamespaceReady}, nil
}

func (o *ownNamespaces) Release(_ context.Context, _, local string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.made, local)
	o.released = append(o.released, local)
	return nil
}

func (o *ownNamespaces) Watch(context.Context, string)     {}
func (o *ownNamespaces) Events() <-chan event.GenericEvent { return o.events }

// TestOffloadingThroughProviderNamespaces: a provider the consumer reaches
// by no peering (no identity, no NamespaceMap) takes the namespaces
// through ProviderNamespaces; the offloading lists it by its provider ID,
// Ready, and releases it when deleted.
func TestOffloadingThroughProviderNamespaces(t *testing.T) {
	const consumerID, providerID = "consumer-1", "aggregate-1"
	consumer := envtest.StartCluster(t, "consumer")
	ctx := t.Context()
	if err := install.Install(ctx, consumer.RESTConfig, install.Options{}); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(consumer.RESTConfig, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	own := &ownNamespaces{made: map[string]string{}, events: make(chan event.GenericEvent)}
	envtest.StartManager(t, consumer.RESTConfig, func(mgr ctrl.Manager) error {
		return (&NamespaceOffloadingReconciler{Client: mgr.GetClient(), Namespaces: own, LocalClusterID: consumerID}).SetupWithManager(mgr)
	})
	for _, obj := range []client.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "liqo-aggregate", Labels: map[string]string{
			offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue, offloadingv1alpha1.RemoteClusterLabel: providerID,
		}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	no := &offloadingv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: offloadingv1alpha1.NamespaceOffloadingName}}
	if err := c.Create(ctx, no); err != nil {
		t.Fatal(err)
	}
	remote := RemoteNamespaceName("web", consumerID, &no.Spec)
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(no), no); err != nil {
			return err
		}
		if got, ok := no.ReadyRemoteNamespace(providerID); !ok || got != remote {
			return fmt.Errorf("remote namespaces %+v, want %s ready in %s", no.Status.RemoteNamespaces, remote, providerID)
		}
		return nil
	})
	own.mu.Lock()
	if own.made["web"] != remote {
		t.Errorf("the provider was asked for %v, want web -> %s", own.made, remote)
	}
	own.mu.Unlock()

	if err := c.Delete(ctx, no); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 30*time.Second, func(context.Context) error {
		own.mu.Lock()
		defer own.mu.Unlock()
		if !slices.Contains(own.released, "web") {
			return fmt.Errorf("web not released in the provider (released: %v)", own.released)
		}
		return nil
	})
}

// TestValidDNS: what a provider says of its DNS is taken only when the
// NamespaceOffloading's schema would hold it, so that one provider's word
// never keeps the others' out of the status.
func TestValidDNS(t *testing.T) {
	for _, tc := range []struct {
		in *offloadingv1alpha1.ConsumerDNS
		ok bool
	}{
		{nil, false},
		{&offloadingv1alpha1.ConsumerDNS{Nameserver: "10.96.0.42", Domain: "cluster.local"}, true},
		{&offloadingv1alpha1.ConsumerDNS{Nameserver: "fd00::53", Domain: "example.org"}, true},
		{&offloadingv1alpha1.ConsumerDNS{Nameserver: "dns.example.org", Domain: "cluster.local"}, false},
		{&offloadingv1alpha1.ConsumerDNS{Nameserver: "fe80::1%eth0", Domain: "cluster.local"}, false},
		{&offloadingv1alpha1.ConsumerDNS{Nameserver: "::ffff:10.96.0.42", Domain: "cluster.local"}, false},
		{&offloadingv1alpha1.ConsumerDNS{Nameserver: "10.96.0.42", Domain: "Not A Domain"}, false},
		{&offloadingv1alpha1.ConsumerDNS{Nameserver: "10.96.0.42", Domain: strings.Repeat("a.", 130) + "org"}, false},
	} {
		if got := validDNS(tc.in); (got != nil) != tc.ok || (got != nil && *got != *tc.in) {
			t.Errorf("validDNS(%+v) = %+v, want taken %v", tc.in, got, tc.ok)
		}
	}
}
