// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/identity"
)

// BrokerClients gives this cluster's client in a broker, with its own
// consumer identity there (liqo-consumer-<this cluster>).
type BrokerClients func(ctx context.Context, broker string) (client.Client, error)

// Brokered is the consumer's side of a broker's introductions: for each
// broker its ClusterConfig lists (spec.peeringConfig.brokers), it reads
// its own Selection in the broker, and peers, for the network only, with
// every enabled provider the broker introduced it to, with the
// introduction's token, as liqoctl add would. It never touches a peering
// made otherwise (by hand, or by discovery); a provider the Selection no
// longer enables is unpeered after spec.peeringConfig.brokeredUnpeerAfterSeconds.
type Brokered struct {
	Client         client.Client
	Namespace      string
	LocalClusterID string
	Config         func() *configv1alpha1.ClusterConfig
	Brokers        BrokerClients
	// Period is how often each broker's Selection is read; 10 s when 0.
	Period time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Check asks a provider's API server whether it is ready, with this
	// cluster's own identity there; checkReady (the identity the peering
	// stored) when nil. What it finds of the providers in use is written
	// into this cluster's ConsumerView in the broker: the broker's second
	// opinion before a failover.
	Check func(ctx context.Context, provider string) error
}

func (b *Brokered) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// checkParallel bounds the checks of a round in flight.
const checkParallel = 16

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (b *Brokered) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable: it syncs every Period until ctx ends.
func (b *Brokered) Start(ctx context.Context) error {
	period := b.Period
	if period == 0 {
		period = 10 * time.Second
	}
	log := ctrl.Log.WithName("brokered-peerings")
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		cfg := b.Config()
		if cfg != nil {
			for _, broker := range cfg.Spec.PeeringConfig.Brokers {
				if err := b.Sync(ctx, broker); err != nil && ctx.Err() == nil {
					log.Error(err, "Following a broker's introductions", "broker", broker)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sync makes this cluster's peerings introduced by broker follow its
// Selection there.
func (b *Brokered) Sync(ctx context.Context, broker string) error {
	if !ValidClusterID(broker) || broker == b.LocalClusterID {
		return fmt.Errorf("spec.peeringConfig.brokers: %q is not another cluster's ID", broker)
	}
	bc, err := b.Brokers(ctx, broker)
	if err != nil {
		return fmt.Errorf("no identity in broker %s (does this cluster consume it?): %w", broker, err)
	}
	var sel brokerv1alpha1.Selection
	err = bc.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(b.LocalClusterID), Name: brokerv1alpha1.SelectionName}, &sel)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading this cluster's Selection in broker %s: %w", broker, err)
	}
	want := map[string]brokerv1alpha1.IntroducedProvider{}
	for _, in := range sel.Status.Introductions {
		if in.State == brokerv1alpha1.IntroductionAccepted && slices.Contains(sel.InUse(), in.ClusterID) &&
			ValidClusterID(in.ClusterID) && in.ClusterID != b.LocalClusterID && in.ClusterID != broker &&
			auth.IntroducerOf(in.Token) == broker && in.AuthURL != "" {
			want[in.ClusterID] = in
		}
	}
	for id, in := range want {
		if err := b.ensure(ctx, broker, in); err != nil {
			return fmt.Errorf("peering with %s, introduced by %s: %w", id, broker, err)
		}
	}
	// The providers in use keep their peering, and are checked, also
	// while their introduction is not accepted now: a broker that cannot
	// reach a provider cannot renew its introduction either, and that is
	// when what this cluster sees of it matters.
	inUse := map[string]bool{}
	for _, id := range sel.InUse() {
		if ValidClusterID(id) && id != b.LocalClusterID && id != broker {
			inUse[id] = true
		}
	}
	keep := maps.Clone(inUse)
	for id := range want {
		keep[id] = true
	}
	if err := b.release(ctx, broker, keep); err != nil {
		return err
	}
	return b.report(ctx, bc, slices.Sorted(maps.Keys(inUse)))
}

// report checks the providers in use itself and writes what it found into
// this cluster's ConsumerView in the broker (which the broker makes: none
// yet, or a broker without one, is no error).
func (b *Brokered) report(ctx context.Context, bc client.Client, providers []string) error {
	var v brokerv1alpha1.ConsumerView
	err := bc.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(b.LocalClusterID), Name: brokerv1alpha1.ConsumerViewName}, &v)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading this cluster's view in the broker: %w", err)
	case len(providers) == 0 && len(v.Spec.Providers) == 0:
		return nil // nothing to say, and nothing said
	}
	providers = providers[:min(len(providers), brokerv1alpha1.MaxViewedProviders)]
	sights := make([]brokerv1alpha1.ProviderSight, len(providers))
	check := b.Check
	if check == nil {
		check = b.checkReady
	}
	sem := make(chan struct{}, checkParallel)
	var wg sync.WaitGroup
	for i, id := range providers {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			sights[i] = brokerv1alpha1.ProviderSight{ClusterID: id, Answered: true}
			if err := check(ctx, id); err != nil {
				msg := err.Error()
				if len(msg) > 256 {
					msg = msg[:253] + "..."
				}
				sights[i] = brokerv1alpha1.ProviderSight{ClusterID: id, Error: msg}
			}
		})
	}
	wg.Wait()
	v.Spec = brokerv1alpha1.ConsumerViewSpec{CheckedAt: &metav1.Time{Time: b.now()}, Providers: sights}
	if err := bc.Update(ctx, &v); err != nil {
		return fmt.Errorf("writing this cluster's view in the broker: %w", err)
	}
	return nil
}

// checkReady asks provider's API server for /readyz with the identity this
// cluster's peering with it stored (its address as the token exchange
// authenticated it: nothing the broker or the provider names later).
func (b *Brokered) checkReady(ctx context.Context, provider string) error {
	var secret corev1.Secret
	if err := b.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: identity.RemoteSecretName(provider)}, &secret); err != nil {
		return fmt.Errorf("no identity in %s: %w", provider, err)
	}
	creds, err := identity.ConsumerCredentials(&secret)
	if err != nil {
		return err
	}
	return identity.Readyz(ctx, creds.RESTConfig())
}

// ensure peers with in.ClusterID, unless a peering made otherwise exists.
func (b *Brokered) ensure(ctx context.Context, broker string, in brokerv1alpha1.IntroducedProvider) error {
	fc, err := foreigncluster.Find(ctx, b.Client, in.ClusterID)
	if err != nil {
		return err
	}
	if fc != nil && fc.Labels[discoveryv1alpha1.IntroducedByLabel] != broker {
		return nil // known otherwise: its operator's, not the broker's
	}
	labels := map[string]string{discoveryv1alpha1.ClusterIDLabel: in.ClusterID, discoveryv1alpha1.IntroducedByLabel: broker}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: auth.RemoteTokenSecretName(in.ClusterID)}}
	err = b.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret)
	switch {
	case apierrors.IsNotFound(err):
		secret.Labels, secret.Data = labels, map[string][]byte{auth.TokenKey: []byte(in.Token)}
		if err := b.Client.Create(ctx, secret); err != nil {
			return fmt.Errorf("storing the introduction's token: %w", err)
		}
	case err != nil:
		return err
	case secret.Labels[discoveryv1alpha1.IntroducedByLabel] != broker:
		return nil // a token stored by hand
	case string(secret.Data[auth.TokenKey]) != in.Token:
		secret.Data = map[string][]byte{auth.TokenKey: []byte(in.Token)}
		if err := b.Client.Update(ctx, secret); err != nil {
			return fmt.Errorf("updating the introduction's token: %w", err)
		}
	}
	if fc == nil {
		labels[discoveryv1alpha1.DiscoveryTypeLabel] = string(discoveryv1alpha1.ManualDiscovery)
		fc = &discoveryv1alpha1.ForeignCluster{
			ObjectMeta: metav1.ObjectMeta{Name: in.ClusterID, Labels: labels},
			Spec: discoveryv1alpha1.ForeignClusterSpec{
				ClusterIdentity:       discoveryv1alpha1.ClusterIdentity{ClusterID: in.ClusterID, ClusterName: in.ClusterName},
				ForeignAuthURL:        in.AuthURL,
				InsecureSkipTLSVerify: ptr.To(true),
				Join:                  true,
				NetworkingEnabled:     discoveryv1alpha1.PeeringEnabledYes,
			},
		}
		if err := b.Client.Create(ctx, fc); err != nil {
			return fmt.Errorf("creating the ForeignCluster: %w", err)
		}
		ctrl.LoggerFrom(ctx).Info("Peering for the network with a provider a broker introduced", "provider", in.ClusterID, "broker", broker)
		return nil
	}
	patch := client.MergeFrom(fc.DeepCopy())
	fc.Spec.Join, fc.Spec.ForeignAuthURL = true, in.AuthURL
	delete(fc.Annotations, discoveryv1alpha1.UnusedSinceAnnotation)
	return client.IgnoreNotFound(b.Client.Patch(ctx, fc, patch))
}

// release marks the peerings broker introduced that are not to be kept
// (the Selection no longer enables them), and ends those unused for
// longer than the grace period; one kept loses its mark.
func (b *Brokered) release(ctx context.Context, broker string, keep map[string]bool) error {
	var fcs discoveryv1alpha1.ForeignClusterList
	if err := b.Client.List(ctx, &fcs, client.MatchingLabels{discoveryv1alpha1.IntroducedByLabel: broker}); err != nil {
		return err
	}
	grace := 600 * time.Second
	if cfg := b.Config(); cfg != nil && cfg.Spec.PeeringConfig.BrokeredUnpeerAfterSeconds > 0 {
		grace = time.Duration(cfg.Spec.PeeringConfig.BrokeredUnpeerAfterSeconds) * time.Second
	}
	for i := range fcs.Items {
		fc := &fcs.Items[i]
		patch := client.MergeFrom(fc.DeepCopy())
		if keep[fc.Spec.ClusterIdentity.ClusterID] {
			if metav1.HasAnnotation(fc.ObjectMeta, discoveryv1alpha1.UnusedSinceAnnotation) {
				delete(fc.Annotations, discoveryv1alpha1.UnusedSinceAnnotation)
				if err := b.Client.Patch(ctx, fc, patch); client.IgnoreNotFound(err) != nil {
					return err
				}
			}
			continue
		}
		if !fc.Spec.Join {
			continue
		}
		since, err := time.Parse(time.RFC3339, fc.Annotations[discoveryv1alpha1.UnusedSinceAnnotation])
		switch {
		case err != nil:
			metav1.SetMetaDataAnnotation(&fc.ObjectMeta, discoveryv1alpha1.UnusedSinceAnnotation, b.now().UTC().Format(time.RFC3339))
		case b.now().Sub(since) >= grace:
			fc.Spec.Join = false
			ctrl.LoggerFrom(ctx).Info("Unpeering a provider the broker no longer serves this cluster with", "provider", fc.Spec.ClusterIdentity.ClusterID, "broker", broker, "unusedSince", since)
		default:
			continue
		}
		if err := b.Client.Patch(ctx, fc, patch); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// BrokerClientsFrom builds this cluster's clients in its brokers from the
// identities the peering stored (identity.RemoteSecretName), one client
// per identity Secret version.
func BrokerClientsFrom(c client.Reader, namespace string, opts client.Options) BrokerClients {
	type built struct {
		version string
		client  client.Client
	}
	var mu sync.Mutex
	cache := map[string]built{}
	return func(ctx context.Context, broker string) (client.Client, error) {
		var secret corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: identity.RemoteSecretName(broker)}, &secret); err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if b, ok := cache[broker]; ok && b.version == secret.ResourceVersion {
			return b.client, nil
		}
		creds, err := identity.ConsumerCredentials(&secret)
		if err != nil {
			return nil, err
		}
		cl, err := client.New(creds.RESTConfig(), opts)
		if err != nil {
			return nil, err
		}
		cache[broker] = built{version: secret.ResourceVersion, client: cl}
		return cl, nil
	}
}
