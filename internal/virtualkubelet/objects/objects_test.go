// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package objects

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestPodSecretNames(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}},
		Volumes: []corev1.Volume{
			{Name: "v1", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "volume"}}},
			{Name: "v2", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "projected"}}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "not-a-secret"}}},
			}}}},
			{Name: "v3", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "also-not"}}}},
		},
		InitContainers: []corev1.Container{{Name: "init", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "init-env"}}}}}},
		Containers: []corev1.Container{{Name: "app", Env: []corev1.EnvVar{
			{Name: "A", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "env"}, Key: "k"}}},
			{Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "volume"}, Key: "k"}}},
		}}},
	}}
	got := PodSecretNames(pod)
	want := []string{"env", "init-env", "projected", "pull", "volume"}
	if !slices.Equal(got, want) {
		t.Fatalf("PodSecretNames = %v, want %v", got, want)
	}
}

// TestAskedClusterIP: a copy asks for the Service's IPv4 cluster IP, or
// None for a headless Service; never for an IPv6 address or garbage.
func TestAskedClusterIP(t *testing.T) {
	for in, want := range map[string]string{
		"10.96.12.7": "10.96.12.7", "": "", corev1.ClusterIPNone: corev1.ClusterIPNone, "fd00::7": "", "10.96.12": "", "::ffff:10.96.12.7": "",
	} {
		if got := askedClusterIP(&corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: in}}); got != want {
			t.Errorf("askedClusterIP(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLetProviderChoose: only a refusal of the address asked for clears
// it; any other refusal stands.
func TestLetProviderChoose(t *testing.T) {
	gk, gr := schema.GroupKind{Kind: "Service"}, schema.GroupResource{Resource: "services"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"taken", apierrors.NewInvalid(gk, "web", field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIPs").Index(0), "10.96.0.53", "provided IP is already allocated")}), true},
		{"a policy's band", apierrors.NewForbidden(gr, "web", errors.New("ValidatingAdmissionPolicy 'liqo-offloaded-service-ips' denied request: spec.clusterIP: 10.96.0.53 is in the band")), true},
		{"the quota", apierrors.NewForbidden(gr, "web", errors.New("exceeded quota: liqo-offer, requested: services=1")), false},
		{"another field", apierrors.NewInvalid(gk, "web", field.ErrorList{field.Invalid(field.NewPath("spec", "ports").Index(0), 0, "must be between 1 and 65535")}), false},
		{"unreachable", errors.New("connection refused"), false},
	} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.53", ClusterIPs: []string{"10.96.0.53"}}}
		if got := letProviderChoose(t.Context(), svc, tc.err, "p"); got != tc.want || (svc.Spec.ClusterIP == "") != tc.want {
			t.Errorf("%s: write again %v with cluster IP %q, want %v", tc.name, got, svc.Spec.ClusterIP, tc.want)
		}
	}
}
