// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/peering"
	"github.com/liqo-go/liqo/internal/playground"
)

// peeringProviders is how many providers the large case joins at once.
// All are real clusters (kube-apiserver, etcd, controller manager,
// scheduler, kwok): about 0.55 GB each, well within the machine.
const peeringProviders = 8

// BenchmarkPeering times join=true to PeeringRequested (the provider's
// webhook admitted the request) and to Accepted (the provider verified
// the consumer and created the tenant), for 1 provider and for 8 joined at
// once, on 1+8 real clusters. The baseline is the irreducible part: an
// administrator creating the same PeeringRequest directly in the provider,
// through the same webhook.
func BenchmarkPeering(b *testing.B) {
	p := startPlayground(b, playground.Options{
		Clusters: 1 + peeringProviders, NodesPerCluster: 1,
		ClusterConfig: func(_ string, spec *configv1alpha1.ClusterConfigSpec) {
			spec.DiscoveryConfig.EnableDiscovery = ptr.To(false)
			spec.DiscoveryConfig.EnableAdvertisement = ptr.To(false)
		},
	}, 5*time.Minute)
	consumer := p.Members[0]
	c, err := client.New(consumer.RESTConfig, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	providers := p.Members[1:]
	for _, m := range providers {
		addStopped(b, c, m)
	}
	baseline := baselineCreate(b, providers[0])
	for _, n := range []int{1, peeringProviders} {
		b.Run(fmt.Sprintf("providers=%d", n), func(b *testing.B) {
			var requested, accepted []time.Duration
			for range b.N {
				r, a := joinAndTime(b, c, providers[:n])
				requested, accepted = append(requested, r...), append(accepted, a...)
				unpeerAll(b, c, providers[:n])
			}
			sort.Slice(requested, func(i, j int) bool { return requested[i] < requested[j] })
			sort.Slice(accepted, func(i, j int) bool { return accepted[i] < accepted[j] })
			last := requested[len(requested)-1]
			b.ReportMetric(last.Seconds(), "s-all-requested")
			b.ReportMetric(accepted[len(accepted)-1].Seconds(), "s-all-accepted")
			b.Logf("join=true -> PeeringRequested for %d provider(s): p50 %s, all %s; -> Accepted p50 %s, all %s; baseline (admin creates the PeeringRequest through the webhook) %s; ratio all-requested/baseline %.1f",
				n, requested[len(requested)/2].Round(time.Millisecond), last.Round(time.Millisecond),
				accepted[len(accepted)/2].Round(time.Millisecond), accepted[len(accepted)-1].Round(time.Millisecond),
				baseline.Round(time.Millisecond), last.Seconds()/baseline.Seconds())
		})
	}
}

func memberClient(b *testing.B, m *playground.Member) client.Client {
	b.Helper()
	c, err := client.New(m.RESTConfig, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// addStopped does what liqoctl add does, with join=false, and waits until
// the consumer trusts the provider's CA: discovery is not what is timed.
func addStopped(b *testing.B, c client.Client, m *playground.Member) {
	b.Helper()
	ctx := context.Background()
	var token corev1.Secret
	mc, err := client.New(m.RESTConfig, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	if err := mc.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: auth.TokenSecret}, &token); err != nil {
		b.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: install.DefaultNamespace, Name: auth.RemoteTokenSecretName(m.ClusterID),
			Labels: map[string]string{discoveryv1alpha1.ClusterIDLabel: m.ClusterID}},
		Data: map[string][]byte{auth.TokenKey: token.Data[auth.TokenKey]},
	}
	if err := c.Create(ctx, secret); err != nil {
		b.Fatal(err)
	}
	fc := &discoveryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: m.ClusterID, Labels: map[string]string{
			discoveryv1alpha1.ClusterIDLabel: m.ClusterID, discoveryv1alpha1.DiscoveryTypeLabel: string(discoveryv1alpha1.ManualDiscovery),
		}},
		Spec: discoveryv1alpha1.ForeignClusterSpec{
			ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: m.ClusterID}, ForeignAuthURL: m.AuthURL, InsecureSkipTLSVerify: ptr.To(true),
		},
	}
	if err := c.Create(ctx, fc); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
			b.Fatal(err)
		}
		if meta.IsStatusConditionTrue(fc.Status.Conditions, discoveryv1alpha1.ConditionCATrusted) && fc.Status.APIServerURL != "" {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("ForeignCluster %s never trusted: %+v", fc.Name, fc.Status.Conditions)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// joinAndTime sets join=true on every provider's ForeignCluster at once and
// returns, per provider, when PeeringRequested became True and when the
// provider accepted.
func joinAndTime(b *testing.B, c client.Client, providers []*playground.Member) (requested, accepted []time.Duration) {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(providers))
	for _, m := range providers {
		wg.Go(func() {
			fc := &discoveryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: m.ClusterID}}
			errs <- c.Patch(ctx, fc, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"join":true}}`)))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	req, acc := map[string]time.Duration{}, map[string]time.Duration{}
	for len(acc) < len(providers) {
		var list discoveryv1alpha1.ForeignClusterList
		if err := c.List(ctx, &list); err != nil {
			b.Fatal(err)
		}
		now := time.Since(start)
		for _, fc := range list.Items {
			cond := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested)
			if !fc.Spec.Join || cond == nil || cond.Status != metav1.ConditionTrue {
				continue
			}
			if _, ok := req[fc.Name]; !ok {
				req[fc.Name] = now
			}
			if _, ok := acc[fc.Name]; !ok && cond.Reason == peering.ReasonAccepted {
				acc[fc.Name] = now
			}
		}
		if now > time.Minute {
			b.Fatalf("only %d of %d peerings accepted after a minute", len(acc), len(providers))
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, d := range req {
		requested = append(requested, d)
	}
	for _, d := range acc {
		accepted = append(accepted, d)
	}
	return requested, accepted
}

// unpeerAll sets join=false and waits until every teardown finished.
func unpeerAll(b *testing.B, c client.Client, providers []*playground.Member) {
	b.Helper()
	ctx := context.Background()
	for _, m := range providers {
		fc := &discoveryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: m.ClusterID}}
		if err := c.Patch(ctx, fc, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"join":false}}`))); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, m := range providers {
		for {
			var fc discoveryv1alpha1.ForeignCluster
			if err := c.Get(ctx, client.ObjectKey{Name: m.ClusterID}, &fc); err != nil {
				b.Fatal(err)
			}
			if len(fc.Finalizers) == 0 && tenantGone(ctx, c, m.ClusterID) && tenantGone(ctx, memberClient(b, m), consumerID(b, c)) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("unpeering from %s did not finish", m.Name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// tenantGone reports whether the tenant namespace for peer is gone: the
// namespace controller takes seconds to empty one, and a new peering waits
// for it, so the next round starts only after.
func tenantGone(ctx context.Context, c client.Client, peer string) bool {
	err := c.Get(ctx, client.ObjectKey{Name: discoveryv1alpha1.TenantNamespace(peer)}, &corev1.Namespace{})
	return apierrors.IsNotFound(err)
}

func consumerID(b *testing.B, c client.Client) string {
	b.Helper()
	var cc configv1alpha1.ClusterConfig
	if err := c.Get(context.Background(), client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cc); err != nil {
		b.Fatal(err)
	}
	return cc.Status.ClusterID
}

// baselineCreate times an administrator creating a PeeringRequest in the
// provider, through the webhook, and deletes it again.
func baselineCreate(b *testing.B, m *playground.Member) time.Duration {
	b.Helper()
	ctx := context.Background()
	mc, err := client.New(m.RESTConfig, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	pr := &discoveryv1alpha1.PeeringRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "baseline"},
		Spec: discoveryv1alpha1.PeeringRequestSpec{
			ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: "baseline"},
			Namespace:       "liqo", APIServerURL: "https://127.0.0.1:1", CACert: "x", ProviderCertificate: "x",
		},
	}
	start := time.Now()
	if err := mc.Create(ctx, pr); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	if err := mc.Delete(ctx, pr); err != nil {
		b.Fatal(err)
	}
	return took
}
