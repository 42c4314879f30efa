// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package objects

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// TestForgeEndpointSlice: of a slice the EndpointSlice controller made,
// the endpoints on virtual nodes stay here (the provider's controller
// lists its own pods); of a slice made by hand, a pod the provider runs
// goes at the provider's address, whatever node the slice names, and
// another provider's pod, or an address nobody shows the provider, stays.
// A consumer's copy (managed by the virtual kubelet, in a broker) goes on
// as one made by hand.
func TestForgeEndpointSlice(t *testing.T) {
	to := destination{
		namespace: "there", consumerID: "consumer",
		toProvider: func(a netip.Addr) (netip.Addr, bool) {
			if a == netip.MustParseAddr("10.100.0.6") {
				return netip.MustParseAddr("10.8.0.6"), true
			}
			return netip.Addr{}, false
		},
		virtual: func(node string) bool { return node == "liqo-provider" },
		offloaded: func(a netip.Addr) (netip.Addr, bool) {
			if a == netip.MustParseAddr("10.51.0.20") {
				return netip.MustParseAddr("10.201.0.20"), true
			}
			return netip.Addr{}, false
		},
	}
	slice := func(manager string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "here", Name: "s", Labels: map[string]string{
				discoveryv1.LabelServiceName: "svc", discoveryv1.LabelManagedBy: manager,
			}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.51.0.20"}, NodeName: ptr.To("liqo-provider")},
				{Addresses: []string{"10.100.0.6"}, NodeName: ptr.To("real")},
				{Addresses: []string{"10.51.0.21"}}, // another provider's pod, or none
				{Addresses: []string{"not-an-ip"}},
			},
		}
	}
	addresses := func(o client.Object) []string {
		if o == nil {
			return nil
		}
		var out []string
		for _, ep := range o.(*discoveryv1.EndpointSlice).Endpoints {
			out = append(out, ep.Addresses...)
		}
		return out
	}
	for _, tc := range []struct {
		manager string
		want    []string
	}{
		{endpointSliceController, []string{"10.8.0.6"}},
		{"e2e-testns", []string{"10.201.0.20", "10.8.0.6"}},
		{"", []string{"10.201.0.20", "10.8.0.6"}},
		{"endpointslicemirroring-controller.k8s.io", []string{"10.201.0.20", "10.8.0.6"}},
		{EndpointSliceManager, []string{"10.201.0.20", "10.8.0.6"}},
	} {
		got := forgeEndpointSlice(slice(tc.manager), to)
		if !slices.Equal(addresses(got), tc.want) {
			t.Errorf("managed by %q: copied %v, want %v", tc.manager, addresses(got), tc.want)
		}
		if got != nil && (got.GetNamespace() != "there" || got.GetLabels()[discoveryv1.LabelManagedBy] != EndpointSliceManager) {
			t.Errorf("managed by %q: the copy is in %q, managed by %q", tc.manager, got.GetNamespace(), got.GetLabels()[discoveryv1.LabelManagedBy])
		}
	}
	// Without a network agreement, nothing.
	if got := forgeEndpointSlice(slice("e2e-testns"), destination{namespace: "there"}); got != nil {
		t.Errorf("without an agreement: copied %v", addresses(got))
	}
}
