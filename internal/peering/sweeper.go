// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
)

// DefaultExchangeTTL is how long a token exchange may wait for its
// PeeringRequest before what it created is removed.
const DefaultExchangeTTL = 10 * time.Minute

// Sweeper removes what token exchanges created for consumers that never
// followed up with a PeeringRequest: their ClusterRole, ClusterRoleBinding
// and liqo-peer-<id> Secret. It implements manager.Runnable.
type Sweeper struct {
	// Client reads through to the API server and deletes.
	Client client.Client
	// Namespace is the Liqo namespace.
	Namespace string
	// TTL is how long an exchange may wait; DefaultExchangeTTL when 0.
	TTL time.Duration
}

// Start sweeps every TTL/4 (at least every second) until ctx ends.
func (s *Sweeper) Start(ctx context.Context) error {
	if s.TTL == 0 {
		s.TTL = DefaultExchangeTTL
	}
	t := time.NewTicker(max(s.TTL/4, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := s.Sweep(ctx, time.Now()); err != nil && ctx.Err() == nil {
				ctrl.Log.WithName("peering-sweeper").Error(err, "Sweeping unfinished token exchanges")
			}
		}
	}
}

// NeedLeaderElection is true: one replica sweeps.
func (s *Sweeper) NeedLeaderElection() bool { return true }

// Sweep removes the exchanges older than TTL that have no PeeringRequest.
func (s *Sweeper) Sweep(ctx context.Context, now time.Time) error {
	var secrets corev1.SecretList
	if err := s.Client.List(ctx, &secrets, client.InNamespace(s.Namespace),
		client.MatchingLabels{discoveryv1alpha1.ManagedByLabel: discoveryv1alpha1.ManagedByValue}); err != nil {
		return err
	}
	for i := range secrets.Items {
		secret := &secrets.Items[i]
		id := secret.Labels[discoveryv1alpha1.ClusterIDLabel]
		if id == "" || secret.Name != PeerSecretName(id) {
			continue
		}
		at, err := time.Parse(time.RFC3339, secret.Annotations[discoveryv1alpha1.ExchangedAtAnnotation])
		if err != nil || now.Sub(at) < s.TTL {
			continue
		}
		exists, err := hasPeeringRequest(ctx, s.Client, id)
		if err != nil || exists {
			continue
		}
		ctrl.Log.WithName("peering-sweeper").Info("Removing a token exchange never followed by a PeeringRequest", "consumer", id, "exchangedAt", at)
		name := ConsumerRBACName(id)
		for _, obj := range []client.Object{
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}},
		} {
			if err := s.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		// Only the Secret this pass looked at: a new exchange meanwhile
		// has another resource version and stays.
		err = s.Client.Delete(ctx, secret, client.Preconditions{ResourceVersion: &secret.ResourceVersion})
		if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}
