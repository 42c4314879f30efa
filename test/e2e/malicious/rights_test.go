// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"fmt"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestControllerManagerHoldsWhatItNeeds: what the controller manager's
// ServiceAccount may do, as the API server authorizes it, is what its work
// needs: no token of a kube-system ServiceAccount, no exec into pods, no
// change to an admission policy that is not its own; token requests only
// in the namespaces it offloads, while it offloads them; and, through the
// admission policy RBAC cannot replace, no write to a node that is not a
// virtual node.
func TestControllerManagerHoldsWhatItNeeds(t *testing.T) {
	peered(t)
	a, b, _ := members()
	ctx := t.Context()
	const ns = "rights"
	offload(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{}, 2)
	user := "system:serviceaccount:" + install.DefaultNamespace + ":" + install.ControllerManagerName
	can := func(t *testing.T, m *playground.Member, attrs authorizationv1.ResourceAttributes) bool {
		t.Helper()
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attrs}}
		if err := framework.Client(t, m).Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	for _, tc := range []struct {
		what  string
		m     *playground.Member
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{"a token of kube-system's ServiceAccounts", b, authorizationv1.ResourceAttributes{Namespace: metav1.NamespaceSystem, Verb: "create", Resource: "serviceaccounts", Subresource: "token"}, false},
		{"a token in a namespace it does not offload", a, authorizationv1.ResourceAttributes{Namespace: metav1.NamespaceDefault, Verb: "create", Resource: "serviceaccounts", Subresource: "token"}, false},
		{"exec into a pod", b, authorizationv1.ResourceAttributes{Namespace: metav1.NamespaceDefault, Verb: "create", Resource: "pods", Subresource: "exec"}, false},
		{"port-forward to a pod", b, authorizationv1.ResourceAttributes{Namespace: metav1.NamespaceDefault, Verb: "create", Resource: "pods", Subresource: "portforward"}, false},
		{"changing the peers' admission policy", b, authorizationv1.ResourceAttributes{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies", Name: "liqo-offloaded-pods"}, false},
		{"writing a pod", b, authorizationv1.ResourceAttributes{Namespace: metav1.NamespaceDefault, Verb: "create", Resource: "pods"}, false},
		{"writing a Service outside Liqo's namespace", b, authorizationv1.ResourceAttributes{Namespace: metav1.NamespaceDefault, Verb: "create", Resource: "services"}, false},
		{"writing a Service in Liqo's namespace (a consumer's DNS)", b, authorizationv1.ResourceAttributes{Namespace: install.DefaultNamespace, Verb: "create", Resource: "services"}, true},
		{"writing its providers' Measurements in Liqo's namespace", b, authorizationv1.ResourceAttributes{Namespace: install.DefaultNamespace, Verb: "patch", Group: "broker.liqo.io", Resource: "measurements", Subresource: "status"}, true},
		{"writing Measurements elsewhere", b, authorizationv1.ResourceAttributes{Namespace: metav1.NamespaceDefault, Verb: "create", Group: "broker.liqo.io", Resource: "measurements"}, false},
		{"binding the virtual kubelet's ClusterRole", b, authorizationv1.ResourceAttributes{Verb: "bind", Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "liqo-virtual-kubelet"}, true},
		{"changing its own virtual nodes' policy", b, authorizationv1.ResourceAttributes{Verb: "update", Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies", Name: "liqo-virtual-nodes"}, true},
	} {
		t.Run(tc.what, func(t *testing.T) {
			if got := can(t, tc.m, tc.attrs); got != tc.want {
				t.Errorf("%s in %s: allowed %v, want %v", tc.what, tc.m.Name, got, tc.want)
			}
		})
	}
	t.Run("a token in a namespace it offloads", func(t *testing.T) {
		framework.Eventually(t, 30*time.Second, func() error {
			if !can(t, a, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "serviceaccounts", Subresource: "token"}) {
				return fmt.Errorf("no token requests in %s, which it offloads", ns)
			}
			return nil
		})
	})

	t.Run("no write to a node that is not virtual", func(t *testing.T) {
		cfg := rest.CopyConfig(b.RESTConfig)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		as := framework.ClientFor(t, cfg)
		var nodes corev1.NodeList
		if err := framework.Client(t, b).List(ctx, &nodes); err != nil {
			t.Fatal(err)
		}
		var own *corev1.Node
		for i := range nodes.Items {
			if nodes.Items[i].Labels[offloadingv1alpha1.VirtualNodeLabel] != offloadingv1alpha1.VirtualNodeValue {
				own = &nodes.Items[i]
			}
		}
		if own == nil {
			t.Fatalf("no node of %s's own", b.Name)
		}
		framework.Refused(t, "deleting a node of the cluster's own", as.Delete(ctx, own.DeepCopy(), client.DryRunAll))
		relabelled := own.DeepCopy()
		relabelled.Labels[offloadingv1alpha1.VirtualNodeLabel] = offloadingv1alpha1.VirtualNodeValue
		framework.Refused(t, "making a node of the cluster's own look virtual", as.Update(ctx, relabelled, client.DryRunAll))
		framework.Refused(t, "creating a node that is not virtual", as.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "not-virtual"}}, client.DryRunAll))
	})
}
