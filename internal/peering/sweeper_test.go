// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/liqo-go/liqo/api"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
)

func exchanged(id string, at time.Time) []client.Object {
	return []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "liqo", Name: PeerSecretName(id), Labels: peerLabels(id),
			Annotations: map[string]string{discoveryv1alpha1.ExchangedAtAnnotation: at.UTC().Format(time.RFC3339)}}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ConsumerRBACName(id)}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ConsumerRBACName(id)}},
	}
}

func TestSweep(t *testing.T) {
	now := time.Now()
	var objs []client.Object
	objs = append(objs, exchanged("stale", now.Add(-time.Hour))...)
	objs = append(objs, exchanged("peered", now.Add(-time.Hour))...)
	objs = append(objs, pr("peered"))
	objs = append(objs, exchanged("recent", now.Add(-time.Minute))...)
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(objs...).Build()
	if err := (&Sweeper{Client: c, Namespace: "liqo", TTL: 10 * time.Minute}).Sweep(t.Context(), now); err != nil {
		t.Fatal(err)
	}
	for id, wantGone := range map[string]bool{"stale": true, "peered": false, "recent": false} {
		for _, obj := range exchanged(id, now) {
			err := c.Get(t.Context(), client.ObjectKeyFromObject(obj), obj)
			if gone := apierrors.IsNotFound(err); gone != wantGone {
				t.Errorf("%s: %T %s gone=%v, want %v (%v)", id, obj, obj.GetName(), gone, wantGone, err)
			}
		}
	}
}
