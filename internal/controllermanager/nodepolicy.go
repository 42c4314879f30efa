// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package controllermanager

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

// The controller manager reads and changes its own policy alone, by name
// (never those the chart installs for peers); creating one cannot be
// limited to a name.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=create
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,resourceNames=liqo-virtual-nodes,verbs=get;update;patch

// VirtualNodePolicyName names the ValidatingAdmissionPolicy, and its
// binding, that refuses to delete a virtual node to anyone but the
// controller manager: a deleted virtual node would come back at the next
// renewal, and the pods bound to it would be lost meanwhile. Cordon and
// drain are how an operator stops and empties one; unpeering removes it.
const VirtualNodePolicyName = "liqo-virtual-nodes"

// virtualNodePolicy is the policy's spec; self is the controller
// manager's own user name, which may delete virtual nodes.
func virtualNodePolicy(self string) admissionregistrationv1.ValidatingAdmissionPolicySpec {
	remote := strconv.Quote(offloadingv1alpha1.RemoteClusterLabel)
	return admissionregistrationv1.ValidatingAdmissionPolicySpec{
		FailurePolicy: ptr.To(admissionregistrationv1.Fail),
		MatchConstraints: &admissionregistrationv1.MatchResources{
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue}},
			ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes"}},
			}}},
		},
		MatchConditions: []admissionregistrationv1.MatchCondition{{
			Name: "not-the-controller-manager", Expression: "request.userInfo.username != " + strconv.Quote(self),
		}},
		Validations: []admissionregistrationv1.Validation{{
			Expression: "false",
			Message: "this virtual node is kept by Liqo for its provider: cordon it (kubectl cordon) to stop scheduling on it, " +
				"drain it (kubectl drain) to move its pods, or unpeer (liqoctl remove) to remove it",
			MessageExpression: "'virtual node ' + oldObject.metadata.name + ' is kept by Liqo for provider ' + " +
				"(has(oldObject.metadata.labels) && " + remote + " in oldObject.metadata.labels ? oldObject.metadata.labels[" + remote + "] : 'unknown') + " +
				"': cordon it (kubectl cordon ' + oldObject.metadata.name + ') to stop scheduling on it, drain it (kubectl drain ' + " +
				"oldObject.metadata.name + ' --ignore-daemonsets) to move its pods, or unpeer (liqoctl remove) to remove it'",
			Reason: ptr.To(metav1.StatusReasonForbidden),
		}},
	}
}

// ensureVirtualNodePolicy creates or repairs the policy and its binding.
func (w *webhookRegistrar) ensureVirtualNodePolicy(ctx context.Context) error {
	if w.self == "" {
		if w.whoAmI == nil {
			return fmt.Errorf("no way to learn this controller manager's user name")
		}
		self, err := w.whoAmI(ctx)
		if err != nil {
			return fmt.Errorf("learning this controller manager's user name: %w", err)
		}
		w.self = self
	}
	labels := map[string]string{discoveryv1alpha1.ManagedByLabel: discoveryv1alpha1.ManagedByValue}
	spec := virtualNodePolicy(w.self)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: VirtualNodePolicyName}}
	if err := ensureHashed(ctx, w.client, policy, spec, labels, func() { policy.Spec = spec }); err != nil {
		return fmt.Errorf("ValidatingAdmissionPolicy %s: %w", VirtualNodePolicyName, err)
	}
	bspec := admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
		PolicyName: VirtualNodePolicyName, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: VirtualNodePolicyName}}
	if err := ensureHashed(ctx, w.client, binding, bspec, labels, func() { binding.Spec = bspec }); err != nil {
		return fmt.Errorf("ValidatingAdmissionPolicyBinding %s: %w", VirtualNodePolicyName, err)
	}
	return nil
}

// ensureHashed creates obj, or writes it again (set puts spec in it) when
// the spec last written differs from spec or someone removed the record
// of it; the API server's defaults are left alone.
func ensureHashed(ctx context.Context, c client.Client, obj client.Object, spec any, labels map[string]string, set func()) error {
	raw, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(raw)
	hash := hex.EncodeToString(sum[:8])
	_, err = controllerutil.CreateOrUpdate(ctx, c, obj, func() error {
		if obj.GetAnnotations()[configv1alpha1.SpecHashAnnotation] == hash && obj.GetLabels()[discoveryv1alpha1.ManagedByLabel] == discoveryv1alpha1.ManagedByValue {
			return nil
		}
		obj.SetLabels(labels)
		obj.SetAnnotations(map[string]string{configv1alpha1.SpecHashAnnotation: hash})
		set()
		return nil
	})
	return err
}
