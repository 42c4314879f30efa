// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package token

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestSources: each token projection of a pod gets a key of its own in
// the token Secret, with its own audience.
func TestSources(t *testing.T) {
	spec := &corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
		}}}},
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
		{Name: "vault", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "vault-token", Audience: "vault"}},
		}}}},
	}}
	src := sources(spec)
	if len(src) != 2 || src[0].key == src[1].key || src[1].proj.Audience != "vault" {
		t.Fatalf("token sources %+v, want two with their own keys and audiences", src)
	}
	if src[0].key != "kube-api-access-x.0.token" || src[1].key != "vault.0.token" {
		t.Errorf("keys %q and %q, want <volume>.<source>.token", src[0].key, src[1].key)
	}
}

// TestSecretName: the token Secret's name is a valid name for any pod
// name, and different for different pods.
func TestSecretName(t *testing.T) {
	if got := SecretName("web-1"); got != "web-1-liqo-token" {
		t.Errorf("SecretName(web-1) = %q", got)
	}
	long1, long2 := strings.Repeat("a", 253), strings.Repeat("a", 252)+"b"
	n1, n2 := SecretName(long1), SecretName(long2)
	if len(n1) > 253 || len(n2) > 253 || n1 == n2 {
		t.Errorf("long names %q (%d) and %q (%d): want distinct names of at most 253 characters", n1, len(n1), n2, len(n2))
	}
}
