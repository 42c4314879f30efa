// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/liqo-go/liqo/api"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
)

func fc(id string, incoming discoveryv1alpha1.PeeringEnabled) *discoveryv1alpha1.ForeignCluster {
	return &discoveryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: id, Labels: map[string]string{discoveryv1alpha1.ClusterIDLabel: id}},
		Spec:       discoveryv1alpha1.ForeignClusterSpec{ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: id}, IncomingPeeringEnabled: incoming},
	}
}

func pr(id string) *discoveryv1alpha1.PeeringRequest {
	return &discoveryv1alpha1.PeeringRequest{ObjectMeta: metav1.ObjectMeta{Name: id}}
}

func TestPolicyCheck(t *testing.T) {
	tests := []struct {
		name     string
		pc       configv1alpha1.PeeringConfig
		objects  []client.Object
		id       string
		new      bool
		wantRule string // empty: allowed
	}{
		{"defaults allow", configv1alpha1.PeeringConfig{}, nil, "a", true, ""},
		{"self", configv1alpha1.PeeringConfig{}, nil, "local", true, "self"},
		{"denied", configv1alpha1.PeeringConfig{DeniedClusterIDs: []string{"a"}}, nil, "a", true, "spec.peeringConfig.deniedClusterIDs"},
		{"denied wins over Yes", configv1alpha1.PeeringConfig{DeniedClusterIDs: []string{"a"}}, []client.Object{fc("a", discoveryv1alpha1.PeeringEnabledYes)}, "a", true, "spec.peeringConfig.deniedClusterIDs"},
		{"not in the allow list", configv1alpha1.PeeringConfig{AllowedClusterIDs: []string{"b"}}, nil, "a", true, "spec.peeringConfig.allowedClusterIDs"},
		{"Yes overrides the allow list", configv1alpha1.PeeringConfig{AllowedClusterIDs: []string{"b"}}, []client.Object{fc("a", discoveryv1alpha1.PeeringEnabledYes)}, "a", true, ""},
		{"incoming No", configv1alpha1.PeeringConfig{}, []client.Object{fc("a", discoveryv1alpha1.PeeringEnabledNo)}, "a", true, "ForeignCluster spec.incomingPeeringEnabled"},
		{"at the maximum", configv1alpha1.PeeringConfig{MaxIncomingPeerings: 2}, []client.Object{pr("b"), pr("c")}, "a", true, "spec.peeringConfig.maxIncomingPeerings"},
		{"below the maximum", configv1alpha1.PeeringConfig{MaxIncomingPeerings: 2}, []client.Object{pr("b")}, "a", true, ""},
		{"its own request does not count", configv1alpha1.PeeringConfig{MaxIncomingPeerings: 2}, []client.Object{pr("a"), pr("b")}, "a", true, ""},
		{"the maximum only limits new peerings", configv1alpha1.PeeringConfig{MaxIncomingPeerings: 1}, []client.Object{pr("b"), pr("c")}, "a", false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(tc.objects...).Build()
			cc := &configv1alpha1.ClusterConfig{Spec: configv1alpha1.ClusterConfigSpec{PeeringConfig: tc.pc}}
			p := &Policy{Reader: c, LocalClusterID: "local", Config: func() *configv1alpha1.ClusterConfig { return cc }}
			err := p.Check(t.Context(), tc.id, tc.new)
			var pe *PolicyError
			switch {
			case tc.wantRule == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantRule != "" && (!errors.As(err, &pe) || pe.Rule != tc.wantRule):
				t.Fatalf("got %v, want a refusal by rule %s", err, tc.wantRule)
			}
		})
	}
}
