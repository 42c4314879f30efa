// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// TestUnconfiguredClassesPolicySparesWorkloads: the API server cannot
// configure liqo-offloaded-pod-classes while its admission has not seen
// the ClusterConfig kind yet (a discovery cache refreshed every 30
// seconds, right after a first install). Made lasting here by a kind
// that does not exist, the policy then refuses what a consumer's virtual
// kubelet writes (it fails closed), and nothing else: the cluster's own
// pods are still admitted.
func TestUnconfiguredClassesPolicySparesWorkloads(t *testing.T) {
	cfg, admin := envtest.StartInstalled(t, "provider")
	ctx := t.Context()

	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	if err := admin.Get(ctx, client.ObjectKey{Name: "liqo-offloaded-pod-classes"}, &policy); err != nil {
		t.Fatal(err)
	}
	if policy.Spec.ParamKind == nil {
		t.Fatal("liqo-offloaded-pod-classes has no parameter kind")
	}
	policy.Spec.ParamKind.Kind = "NoSuchClusterConfig"
	if err := admin.Update(ctx, &policy); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "work"}},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000},
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(labels map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "work", Labels: labels},
			Spec: corev1.PodSpec{
				PriorityClassName: "high",
				Containers:        []corev1.Container{{Name: "web", Image: "registry.example/web:1"}},
			},
		}
	}

	// A consumer's virtual kubelet, with every right but its own name.
	vk := impersonating(t, cfg, "liqo-virtual-kubelet-consumer-1")
	offloaded := map[string]string{offloadingv1alpha1.OriginClusterLabel: "consumer-1"}
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		err := vk.Create(ctx, pod(offloaded), client.DryRunAll)
		if err == nil {
			return errors.New("the consumer's pod was admitted by a policy that cannot be configured")
		}
		if !strings.Contains(err.Error(), "liqo-offloaded-pod-classes") || !strings.Contains(err.Error(), "failed to configure policy") {
			return fmt.Errorf("the consumer's pod was refused, not for the policy's configuration: %w", err)
		}
		return nil
	})

	// The policy's configuration error is now in force; the cluster's own
	// pods, with a priority class, and the administrator's copy of the
	// consumer's pod are not the virtual kubelet's writes.
	if err := admin.Create(ctx, pod(nil), client.DryRunAll); err != nil {
		t.Errorf("the cluster's own pod was refused: %v", err)
	}
	if err := vk.Create(ctx, pod(nil), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "offloading.liqo.io/origin-cluster-id") {
		t.Errorf("the virtual kubelet's pod without its origin label: %v, want refused by liqo-offloaded-objects", err)
	}
}

// TestShadowPodTemplatesPolicedAsPods: a consumer's virtual kubelet,
// with every right but its own name, writes ShadowPods whose templates
// break each rule its pods are held to; each is refused, naming the
// template's field, and a template that breaks none is admitted. A
// node named in a template is refused on update too: the template is
// made into a pod at any time.
func TestShadowPodTemplatesPolicedAsPods(t *testing.T) {
	cfg, admin := envtest.StartInstalled(t, "provider")
	ctx := t.Context()
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000},
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	vk := impersonating(t, cfg, "liqo-virtual-kubelet-consumer-1")
	if err := admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "work"}}); err != nil {
		t.Fatal(err)
	}
	policiesInForce(t, vk, "work")
	shadow := func(name string, change func(*corev1.PodSpec)) *offloadingv1alpha1.ShadowPod {
		spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}}}
		if change != nil {
			change(&spec)
		}
		template, err := offloadingv1alpha1.NewShadowPodTemplate(nil, nil, &spec)
		if err != nil {
			t.Fatal(err)
		}
		return &offloadingv1alpha1.ShadowPod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "work", Name: name, Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: "consumer-1"}},
			Spec:       offloadingv1alpha1.ShadowPodSpec{Template: template},
		}
	}
	yes := true
	for _, c := range []struct {
		field  string
		change func(*corev1.PodSpec)
	}{
		{"spec.template.spec.hostNetwork", func(s *corev1.PodSpec) { s.HostNetwork = true }},
		{"spec.template.spec.hostPID", func(s *corev1.PodSpec) { s.HostPID = true }},
		{"spec.template.spec.hostIPC", func(s *corev1.PodSpec) { s.HostIPC = true }},
		{"spec.template.spec.volumes", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}},
		{"spec.template.spec.containers[*].securityContext.privileged", func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "init", Image: "registry.example/init:1", SecurityContext: &corev1.SecurityContext{Privileged: &yes}}}
		}},
		{"spec.template.spec.containers[*].securityContext.capabilities.add", func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
		}},
		{"spec.template.spec.containers[*].ports[*].hostPort", func(s *corev1.PodSpec) {
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
		}},
		{"spec.template.spec.nodeName", func(s *corev1.PodSpec) { s.NodeName = "control-plane" }},
		{"spec.template.spec.tolerations", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		}},
	} {
		err := vk.Create(ctx, shadow("bad", c.change), client.DryRunAll)
		if err == nil || !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.field+":") {
			t.Errorf("a template breaking %s: %v, want refused naming it", c.field, err)
		}
	}
	// A priority class this cluster's ClusterConfig does not allow (the
	// API server may take a few seconds to read the parameter's kind).
	if err := admin.Create(ctx, &configv1alpha1.ClusterConfig{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 45*time.Second, func(ctx context.Context) error {
		err := vk.Create(ctx, shadow("bad", func(s *corev1.PodSpec) { s.PriorityClassName = "high" }), client.DryRunAll)
		switch {
		case err == nil:
			return errors.New("a template naming a priority class not allowed was admitted")
		case !strings.Contains(err.Error(), "spec.template.spec.priorityClassName:"):
			return fmt.Errorf("a template naming a priority class not allowed, want refused naming spec.template.spec.priorityClassName: %w", err)
		}
		return nil
	})
	// One without the origin label is not the consumer's to write.
	unlabelled := shadow("unlabelled", nil)
	unlabelled.Labels = nil
	if err := vk.Create(ctx, unlabelled, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "offloading.liqo.io/origin-cluster-id") {
		t.Errorf("a ShadowPod without its origin: %v, want refused by liqo-offloaded-objects", err)
	}

	good := shadow("good", nil)
	if err := vk.Create(ctx, good); err != nil {
		t.Fatalf("a template breaking no rule: %v", err)
	}
	placed := shadow("good", func(s *corev1.PodSpec) { s.NodeName = "control-plane" })
	good.Spec.Template = placed.Spec.Template
	if err := vk.Update(ctx, good); err == nil || !strings.Contains(err.Error(), "spec.template.spec.nodeName:") {
		t.Errorf("a node named on update: %v, want refused", err)
	}
}

// TestPodsMadeFromShadowPodsPoliced: a pod this cluster's controller
// manager makes from a consumer's ShadowPod (labelled with its origin) is
// held to the pod rules when it is made, as the consumer's own pods are:
// a rule tightened since its template was written holds. The controller
// manager's other pods are not a consumer's.
func TestPodsMadeFromShadowPodsPoliced(t *testing.T) {
	cfg, admin := envtest.StartInstalled(t, "provider")
	ctx := t.Context()
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "work"}},
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	cm := impersonating(t, cfg, "system:serviceaccount:liqo:liqo-controller-manager")
	policiesInForce(t, cm, "work")
	pod := func(labels map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "work", Name: "web", Labels: labels},
			Spec:       corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:1"}}},
		}
	}
	err := cm.Create(ctx, pod(map[string]string{offloadingv1alpha1.OriginClusterLabel: "consumer-1"}), client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "spec.hostNetwork:") {
		t.Errorf("a consumer's pod on the host's network made by the controller manager: %v, want refused", err)
	}
	if err := cm.Create(ctx, pod(nil), client.DryRunAll); err != nil {
		t.Errorf("a pod of the controller manager's own (no origin): %v, want admitted", err)
	}
}

// policiesInForce waits until the API server holds pods of c's user to
// the policies (it loads them a moment after they are created): a pod on
// the host's network, with an origin, is refused.
// impersonating is a client of cfg's API server acting as user (with
// every right: what refuses it is admission alone).
func impersonating(t *testing.T, cfg *rest.Config, user string) client.Client {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func policiesInForce(t *testing.T, c client.Client, ns string) {
	t.Helper()
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		probe := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe", Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: "consumer-1"}},
			Spec:       corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "probe", Image: "registry.example/probe:1"}}},
		}
		switch err := c.Create(ctx, probe, client.DryRunAll); {
		case err == nil:
			return errors.New("a pod on the host's network was admitted: the policies are not in force yet")
		case !strings.Contains(err.Error(), "spec.hostNetwork:"):
			return fmt.Errorf("a pod on the host's network, want refused by the policy: %w", err)
		}
		return nil
	})
}
