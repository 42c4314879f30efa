// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package install

import (
	"maps"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestCRDsAreComplete checks the generated CRDs carry what the design asks
// of every kind: a schema, a status subresource and printer columns.
func TestCRDsAreComplete(t *testing.T) {
	crds, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"clusterconfigs.config.liqo.io":           true,
		"foreignclusters.discovery.liqo.io":       true,
		"searchdomains.discovery.liqo.io":         true,
		"peeringrequests.discovery.liqo.io":       true,
		"introductions.discovery.liqo.io":         true,
		"advertisements.sharing.liqo.io":          true,
		"namespaceoffloadings.offloading.liqo.io": true,
		"namespacemaps.offloading.liqo.io":        true,
		"shadowpods.offloading.liqo.io":           true,
		"networkconfigs.net.liqo.io":              true,
		"tunnelendpoints.net.liqo.io":             true,
		"selections.broker.liqo.io":               true,
		"measurements.broker.liqo.io":             true,
		"reservations.broker.liqo.io":             true,
		"consumerviews.broker.liqo.io":            true,
	}
	// A report its writer makes whole, which nothing answers: no status.
	noStatus := map[string]bool{"consumerviews.broker.liqo.io": true}
	for _, crd := range crds {
		if !want[crd.Name] {
			t.Errorf("unexpected CRD %s", crd.Name)
			continue
		}
		delete(want, crd.Name)
		if len(crd.Spec.Versions) != 1 {
			t.Fatalf("%s: %d versions, want 1", crd.Name, len(crd.Spec.Versions))
		}
		v := crd.Spec.Versions[0]
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			t.Errorf("%s: no schema", crd.Name)
		}
		if (v.Subresources == nil || v.Subresources.Status == nil) && !noStatus[crd.Name] {
			t.Errorf("%s: no status subresource", crd.Name)
		}
		if len(v.AdditionalPrinterColumns) < 2 {
			t.Errorf("%s: %d printer columns, want at least 2", crd.Name, len(v.AdditionalPrinterColumns))
		}
	}
	for name := range want {
		t.Errorf("CRD %s missing", name)
	}
}

func TestClusterRoleCoversClusterConfig(t *testing.T) {
	role, err := ClusterRole()
	if err != nil {
		t.Fatal(err)
	}
	for _, rule := range role.Rules {
		for _, g := range rule.APIGroups {
			for _, r := range rule.Resources {
				if g == "config.liqo.io" && r == "clusterconfigs/status" {
					return
				}
			}
		}
	}
	t.Fatalf("the generated ClusterRole cannot update clusterconfigs/status: %+v", role.Rules)
}

// TestAdmissionPoliciesDecode checks every policy has its binding and
// matches its users (peers, or the controller manager) by name.
func TestAdmissionPoliciesDecode(t *testing.T) {
	objects, err := AdmissionPolicies()
	if err != nil {
		t.Fatal(err)
	}
	policies, bound := map[string]bool{}, map[string]bool{}
	for _, o := range objects {
		switch o := o.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			policies[o.Name] = true
			if len(o.Spec.MatchConditions) == 0 || !strings.Contains(o.Spec.MatchConditions[0].Expression, "request.userInfo.username.startsWith(") {
				t.Errorf("policy %s does not match its users by name: %+v", o.Name, o.Spec.MatchConditions)
			}
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			bound[o.Spec.PolicyName] = true
		default:
			t.Errorf("unexpected %T", o)
		}
	}
	if len(policies) != 11 || !maps.Equal(policies, bound) {
		t.Fatalf("policies %v, bindings %v: want 11 policies, each bound", policies, bound)
	}
}

// TestRoleIsTheLiqoNamespaces: what the controller manager may do in the
// Liqo namespace alone (the consumers' DNS Services) is a Role there,
// and the ClusterRole does not grant it everywhere.
func TestRoleIsTheLiqoNamespaces(t *testing.T) {
	role, err := Role()
	if err != nil {
		t.Fatal(err)
	}
	if role.Namespace != DefaultNamespace {
		t.Errorf("the generated Role is in %q, want %q", role.Namespace, DefaultNamespace)
	}
	writes := func(rules []rbacv1.PolicyRule) bool {
		return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.Resources, "services") && slices.Contains(r.Verbs, "create")
		})
	}
	if !writes(role.Rules) {
		t.Errorf("the Role cannot create Services: %+v", role.Rules)
	}
	cluster, err := ClusterRole()
	if err != nil {
		t.Fatal(err)
	}
	if writes(cluster.Rules) {
		t.Errorf("the ClusterRole creates Services in every namespace")
	}
}
