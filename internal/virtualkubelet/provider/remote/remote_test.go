// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package remote_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider/providertest"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider/remote"
)

// TestContract: the remote-cluster provider answers as the contract says,
// against a real API server. One API server is both clusters here: the
// local namespace and the identity Secret on one side, the provider
// namespace, reached with that identity, on the other.
func TestContract(t *testing.T) {
	cfg := envtest.Start(t, "remote-provider")
	ctx := t.Context()
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	const (
		liqoNS, local, remoteNS = "liqo", "web", "consumer-web"
		providerID, consumerID  = "provider-1", "consumer-1"
		node                    = "provider-node"
	)
	objs := []client.Object{
		// Room for the suite's pod as it is resized: the API server
		// checks a resize against the node's allocatable.
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: resource.MustParse("10"),
		}}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: liqoNS, Name: identity.RemoteSecretName(providerID)},
			Data: map[string][]byte{
				identity.ServerKey: []byte(cfg.Host), identity.CAKey: cfg.CAData,
				identity.VirtualKubeletCertKey: cfg.CertData, identity.VirtualKubeletKeyKey: cfg.KeyData,
			},
		},
	}
	for _, ns := range []string{liqoNS, local, remoteNS} {
		objs = append([]client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}},
		}, objs...)
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	sessions := &remote.Sessions{
		Remotes: &identity.Remotes{Client: c, Namespace: liqoNS, Scheme: c.Scheme()}, Reader: c, LocalClusterID: consumerID,
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sessions.Start(sctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sessions: %v", err)
		}
	})

	providertest.Run(t, providertest.Harness{
		Providers: sessions, Provider: providerID, LocalClusterID: consumerID, Local: local, Remote: remoteNS, Node: node,
		// The local pod the provider's stands for; without it the cache
		// keeps a provider's pod as its name alone.
		Stands: func(ctx context.Context, kind provider.Kind, name string) error {
			if kind != provider.Pods {
				return fmt.Errorf("the suite offloads pods only, not %s", kind)
			}
			return c.Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: local, Name: name},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
			})
		},
		Remove: func(ctx context.Context, kind provider.Kind, name string) error {
			if kind != provider.Pods {
				return fmt.Errorf("the suite removes pods only, not %s", kind)
			}
			return c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: name}}, client.GracePeriodSeconds(0))
		},
		// The provider's metrics API, as a custom resource.
		Measure: func(ctx context.Context, pod string, at time.Time, usage map[string]corev1.ResourceList) error {
			if err := providertest.MetricsAPI(ctx, c); err != nil {
				return err
			}
			return providertest.WritePodMetrics(ctx, c, remoteNS, pod, at, usage)
		},
	})

	// What a provider's metrics API states is its word: figures beyond
	// any machine, or below zero, are dropped, the rest kept.
	at := time.Now().Truncate(time.Second)
	if err := providertest.WritePodMetrics(ctx, c, remoteNS, "impossible", at, map[string]corev1.ResourceList{
		"huge":     {corev1.ResourceCPU: resource.MustParse("1e30"), corev1.ResourceMemory: resource.MustParse("1e30")},
		"negative": {corev1.ResourceCPU: resource.MustParse("-1"), corev1.ResourceMemory: resource.MustParse("-1Mi")},
		"sane":     {corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("2Gi")},
	}); err != nil {
		t.Fatal(err)
	}
	got, err := sessions.PodUsage(ctx, providerID, remoteNS)
	if err != nil {
		t.Fatal(err)
	}
	u := got["impossible"].Containers
	if len(u["huge"]) != 0 || len(u["negative"]) != 0 {
		t.Errorf("a provider stating 1e30 and -1: %v and %v passed, want both dropped", u["huge"], u["negative"])
	}
	if sane := u["sane"]; sane.Cpu().Value() != 3 || sane.Memory().Value() != 2<<30 {
		t.Errorf("a sane figure: %v, want 3 cores and 2Gi", u["sane"])
	}
}
