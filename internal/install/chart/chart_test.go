// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package chart

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	corev1helper "k8s.io/component-helpers/scheduling/corev1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/install"
)

func render(t *testing.T, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(c, Release{Name: "liqo", Namespace: "liqo-system", Values: values})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// find decodes the one object of kind and name into out.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string, out any) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return
		}
	}
	t.Fatalf("the chart renders no %s %s", kind, name)
}

func kinds(objs []*unstructured.Unstructured, kind string) []string {
	var names []string
	for _, o := range objs {
		if o.GetKind() == kind {
			names = append(names, o.GetName())
		}
	}
	slices.Sort(names)
	return names
}

// TestDefaults: the chart holds the CRDs, rights and admission policies
// the code generates, in the release's namespace, and runs two replicas
// of which one leads.
func TestDefaults(t *testing.T) {
	objs := render(t, nil)

	crds, err := install.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, crd := range crds {
		want = append(want, crd.Name)
	}
	slices.Sort(want)
	if got := kinds(objs, "CustomResourceDefinition"); !slices.Equal(got, want) {
		t.Errorf("CRDs %v, want %v", got, want)
	}
	generated, err := install.ClusterRole()
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	find(t, objs, "ClusterRole", install.ControllerManagerName, &role)
	if !equality.Semantic.DeepEqual(role.Rules, generated.Rules) {
		t.Errorf("the chart's ClusterRole differs from the one generated from the markers")
	}
	var binding rbacv1.ClusterRoleBinding
	find(t, objs, "ClusterRoleBinding", install.ControllerManagerName, &binding)
	if len(binding.Subjects) != 1 || binding.Subjects[0].Namespace != "liqo-system" || binding.Subjects[0].Name != install.ControllerManagerName {
		t.Errorf("the binding's subjects: %+v", binding.Subjects)
	}
	// What it may do in the Liqo namespace alone (the DNS proxy's
	// Services): a Role there, not the ClusterRole.
	generatedNS, err := install.Role()
	if err != nil {
		t.Fatal(err)
	}
	var nsRole rbacv1.Role
	find(t, objs, "Role", install.ControllerManagerName, &nsRole)
	if nsRole.Namespace != "liqo-system" || !equality.Semantic.DeepEqual(nsRole.Rules, generatedNS.Rules) {
		t.Errorf("the chart's Role in %q differs from the one generated from the markers", nsRole.Namespace)
	}
	var nsBinding rbacv1.RoleBinding
	find(t, objs, "RoleBinding", install.ControllerManagerName, &nsBinding)
	if nsBinding.Namespace != "liqo-system" || nsBinding.RoleRef.Kind != "Role" || len(nsBinding.Subjects) != 1 || nsBinding.Subjects[0].Namespace != "liqo-system" || nsBinding.Subjects[0].Name != install.ControllerManagerName {
		t.Errorf("the Role's binding: %+v", nsBinding)
	}
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "services") && slices.Contains(r.Verbs, "create") {
			t.Errorf("the ClusterRole creates Services in every namespace: %+v", r)
		}
	}
	find(t, objs, "ClusterRole", install.MetricsReaderName, &rbacv1.ClusterRole{})
	policies, err := install.AdmissionPolicies()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(kinds(objs, "ValidatingAdmissionPolicy")) + len(kinds(objs, "ValidatingAdmissionPolicyBinding")); got != len(policies) {
		t.Errorf("%d admission policies and bindings, want %d", got, len(policies))
	}

	var d appsv1.Deployment
	find(t, objs, "Deployment", install.ControllerManagerName, &d)
	if d.Namespace != "liqo-system" || d.Spec.Replicas == nil || *d.Spec.Replicas != 2 || d.Spec.Template.Spec.ServiceAccountName != install.ControllerManagerName {
		t.Errorf("Deployment %s/%s, replicas %v, ServiceAccount %s", d.Namespace, d.Name, d.Spec.Replicas, d.Spec.Template.Spec.ServiceAccountName)
	}
	c := d.Spec.Template.Spec.Containers[0]
	for _, arg := range []string{"--namespace=liqo-system", "--leader-elect=true", "--auth-service=liqo-auth", "--webhook-service=liqo-webhook", "--metrics-secure=true"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %v lack %s", c.Args, arg)
		}
	}
	if c.Image != "ghcr.io/liqo-go/liqo-controller-manager:dev" {
		t.Errorf("image %s, want the chart's appVersion", c.Image)
	}
	if c.ReadinessProbe == nil || c.LivenessProbe == nil || c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("probes %v %v, requests %v", c.ReadinessProbe, c.LivenessProbe, c.Resources.Requests)
	}
	if !selects(t, objs, "liqo-auth", d.Spec.Template.Labels) || !selects(t, objs, "liqo-webhook", d.Spec.Template.Labels) {
		t.Error("the auth and webhook Services do not select the controller manager's pods")
	}
}

func selects(t *testing.T, objs []*unstructured.Unstructured, service string, podLabels map[string]string) bool {
	t.Helper()
	var svc corev1.Service
	find(t, objs, "Service", service, &svc)
	for k, v := range svc.Spec.Selector {
		if podLabels[k] != v {
			return false
		}
	}
	return len(svc.Spec.Selector) > 0
}

// TestPodSecurityRestricted checks the pod template with Pod Security
// Admission's own checks at the restricted level.
func TestPodSecurityRestricted(t *testing.T) {
	var d appsv1.Deployment
	find(t, render(t, nil), "Deployment", install.ControllerManagerName, &d)
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range eval.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec) {
		if !r.Allowed {
			t.Errorf("Pod Security restricted: %s: %s", r.ForbiddenReason, r.ForbiddenDetail)
		}
	}
}

// TestGateway: the gateway runs on a node's network with what the tunnels
// need and nothing more: NET_ADMIN and NET_RAW (all else dropped), the TUN
// device, a read-only root, Pod Security "privileged" and not less (the
// evaluator says so: hostNetwork and the capabilities are beyond
// baseline); it reads one Secret, its key, by name; the controller
// manager learns its port and, when set, its endpoint; it goes with
// gateway.enabled=false.
func TestGateway(t *testing.T) {
	objs := render(t, map[string]any{"gateway": map[string]any{"endpoint": "gw.example.com:443", "port": 51821}})
	var d appsv1.Deployment
	find(t, objs, "Deployment", "liqo-gateway", &d)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	sc := c.SecurityContext
	if !pod.HostNetwork || pod.ServiceAccountName != "liqo-gateway" || sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Privileged != nil && *sc.Privileged ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN", "NET_RAW"}) {
		t.Errorf("the gateway's pod: hostNetwork %v, security %+v", pod.HostNetwork, sc)
	}
	if !slices.Contains(c.Args, "--listen-port=51821") || c.Ports[0].ContainerPort != 51821 || c.Ports[0].Protocol != corev1.ProtocolUDP ||
		c.Image != "ghcr.io/liqo-go/liqo-gateway:"+chartAppVersion(t) {
		t.Errorf("the gateway's container: args %v, ports %+v, image %s", c.Args, c.Ports, c.Image)
	}
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	allowed := func(level psaapi.Level) bool {
		for _, r := range eval.EvaluatePod(psaapi.LevelVersion{Level: level, Version: psaapi.LatestVersion()}, &d.Spec.Template.ObjectMeta, &pod) {
			if !r.Allowed {
				return false
			}
		}
		return true
	}
	if !allowed(psaapi.LevelPrivileged) || allowed(psaapi.LevelBaseline) {
		t.Errorf("the gateway's pod: privileged allowed %v, baseline allowed %v; want only privileged", allowed(psaapi.LevelPrivileged), allowed(psaapi.LevelBaseline))
	}
	if !slices.Contains(c.Args, "--metrics-secure=true") {
		t.Errorf("the gateway's metrics are not secure by default: args %v", c.Args)
	}
	var gwRole rbacv1.ClusterRole
	find(t, objs, "ClusterRole", "liqo-gateway", &gwRole)
	var reviews []string
	for _, r := range gwRole.Rules {
		if slices.Equal(r.Verbs, []string{"create"}) {
			reviews = append(reviews, r.Resources...)
		}
	}
	if !slices.Equal(reviews, []string{"tokenreviews", "subjectaccessreviews"}) {
		t.Errorf("the gateway cannot check its metrics' callers: it creates %v", reviews)
	}
	var role rbacv1.Role
	find(t, objs, "Role", "liqo-gateway", &role)
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"secrets"}) || !slices.Equal(role.Rules[0].ResourceNames, []string{"liqo-gateway-key"}) {
		t.Errorf("the gateway's Role: %+v", role.Rules)
	}
	var cm appsv1.Deployment
	find(t, objs, "Deployment", install.ControllerManagerName, &cm)
	if args := cm.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--gateway-port=51821") || !slices.Contains(args, "--gateway-endpoint=gw.example.com:443") {
		t.Errorf("the controller manager's args %v", args)
	}
	if got := kinds(render(t, map[string]any{"gateway": map[string]any{"enabled": false}}), "Deployment"); !slices.Equal(got, []string{install.ControllerManagerName}) {
		t.Errorf("with the gateway off, Deployments %v", got)
	}
}

// TestRouteAgent: the route agent runs on every node but the virtual ones,
// on the node's network, with NET_ADMIN alone, the gateway's image and its
// node's name; it reads pods in the Liqo namespace only; it goes with
// routeAgent.enabled=false, and with the gateway.
func TestRouteAgent(t *testing.T) {
	objs := render(t, nil)
	var ds appsv1.DaemonSet
	find(t, objs, "DaemonSet", "liqo-route-agent", &ds)
	pod := ds.Spec.Template.Spec
	c := pod.Containers[0]
	sc := c.SecurityContext
	if !pod.HostNetwork || pod.ServiceAccountName != "liqo-route-agent" || sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Privileged != nil && *sc.Privileged ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN"}) {
		t.Errorf("the route agent's pod: hostNetwork %v, security %+v", pod.HostNetwork, sc)
	}
	if len(c.Args) == 0 || c.Args[0] != "route-agent" || c.Image != "ghcr.io/liqo-go/liqo-gateway:"+chartAppVersion(t) ||
		len(c.Env) != 1 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("the route agent's container: args %v, image %s, env %+v", c.Args, c.Image, c.Env)
	}
	virtual := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue}}}
	real := &corev1.Node{}
	terms := pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if ok, err := corev1helper.MatchNodeSelectorTerms(virtual, terms); err != nil || ok {
		t.Errorf("the route agent may run on a virtual node: %v %v", ok, err)
	}
	if ok, err := corev1helper.MatchNodeSelectorTerms(real, terms); err != nil || !ok {
		t.Errorf("the route agent may not run on a real node: %v %v", ok, err)
	}
	var role rbacv1.Role
	find(t, objs, "Role", "liqo-route-agent", &role)
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"pods"}) || slices.Contains(role.Rules[0].Verbs, "create") {
		t.Errorf("the route agent's Role: %+v", role.Rules)
	}
	for _, values := range []map[string]any{
		{"routeAgent": map[string]any{"enabled": false}},
		{"gateway": map[string]any{"enabled": false}},
	} {
		if got := kinds(render(t, values), "DaemonSet"); len(got) > 0 {
			t.Errorf("with %v, DaemonSets %v", values, got)
		}
	}
}

// TestDNSProxy: the DNS proxy is off unless asked for; on, it runs the
// gateway's image in the pod network, Pod Security "restricted", and may
// read namespaces and the Services of Liqo's namespace, nothing more.
func TestDNSProxy(t *testing.T) {
	if got := kinds(render(t, nil), "Deployment"); slices.Contains(got, "liqo-dns-proxy") {
		t.Errorf("the DNS proxy runs by default: %v", got)
	}
	objs := render(t, map[string]any{"dnsProxy": map[string]any{"enabled": true, "domain": "example.org"}})
	var d appsv1.Deployment
	find(t, objs, "Deployment", "liqo-dns-proxy", &d)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	if pod.HostNetwork || pod.ServiceAccountName != "liqo-dns-proxy" || c.Image != "ghcr.io/liqo-go/liqo-gateway:"+chartAppVersion(t) ||
		len(c.Args) == 0 || c.Args[0] != "dns" || !slices.Contains(c.Args, "--namespace=liqo-system") || !slices.Contains(c.Args, "--domain=example.org") {
		t.Errorf("the DNS proxy: hostNetwork %v, account %s, image %s, args %v", pod.HostNetwork, pod.ServiceAccountName, c.Image, c.Args)
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--upstream") }) {
		t.Errorf("the DNS proxy is given an upstream by default: %v", c.Args)
	}
	find(t, render(t, map[string]any{"dnsProxy": map[string]any{"enabled": true, "upstream": "10.0.0.10:53"}}), "Deployment", "liqo-dns-proxy", &d)
	if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--upstream=10.0.0.10:53") {
		t.Errorf("dnsProxy.upstream is not passed on: %v", args)
	}
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range eval.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &d.Spec.Template.ObjectMeta, &pod) {
		if !r.Allowed {
			t.Errorf("Pod Security restricted: %s: %s", r.ForbiddenReason, r.ForbiddenDetail)
		}
	}
	var cm appsv1.Deployment
	find(t, objs, "Deployment", install.ControllerManagerName, &cm)
	if args := cm.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--dns-proxy=true") || !slices.Contains(args, "--cluster-domain=example.org") {
		t.Errorf("the controller manager does not learn of the DNS proxy: %v", args)
	}
	var cr rbacv1.ClusterRole
	find(t, objs, "ClusterRole", "liqo-dns-proxy", &cr)
	var role rbacv1.Role
	find(t, objs, "Role", "liqo-dns-proxy", &role)
	for _, rules := range [][]rbacv1.PolicyRule{cr.Rules, role.Rules} {
		for _, r := range rules {
			readable := func(res string) bool { return res == "namespaces" || res == "pods" || res == "services" }
			if !slices.Equal(r.APIGroups, []string{""}) || len(r.Resources) == 0 || !all(r.Resources, readable) ||
				!slices.Equal(r.Verbs, []string{"get", "list", "watch"}) {
				t.Errorf("the DNS proxy may %v %v", r.Verbs, r.Resources)
			}
		}
	}
}

func all[T any](s []T, f func(T) bool) bool {
	return !slices.ContainsFunc(s, func(v T) bool { return !f(v) })
}

func chartAppVersion(t *testing.T) string {
	t.Helper()
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	return c.Metadata.AppVersion
}

// TestAuthServiceExposure: the values choose how peers reach the auth
// service; an explicit URL replaces the Service lookup.
func TestAuthServiceExposure(t *testing.T) {
	objs := render(t, map[string]any{"auth": map[string]any{"service": map[string]any{"type": "NodePort", "nodePort": 30443}}})
	var svc corev1.Service
	find(t, objs, "Service", "liqo-auth", &svc)
	if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.Ports[0].NodePort != 30443 {
		t.Errorf("type %s, ports %+v", svc.Spec.Type, svc.Spec.Ports)
	}
	objs = render(t, map[string]any{
		"auth":              map[string]any{"url": "https://peer.example.com:443", "service": map[string]any{"type": "LoadBalancer"}},
		"apiServer":         map[string]any{"url": "https://api.example.com:6443"},
		"image":             map[string]any{"tag": "v1.2.3", "pullPolicy": "Never"},
		"controllerManager": map[string]any{"replicas": 1},
		"networking":        map[string]any{"podCIDR": "10.42.0.0/16"},
	})
	svc = corev1.Service{}
	find(t, objs, "Service", "liqo-auth", &svc)
	var d appsv1.Deployment
	find(t, objs, "Deployment", install.ControllerManagerName, &d)
	c := d.Spec.Template.Spec.Containers[0]
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || !slices.Contains(c.Args, "--auth-url=https://peer.example.com:443") ||
		slices.Contains(c.Args, "--auth-service=liqo-auth") || !slices.Contains(c.Args, "--api-server-url=https://api.example.com:6443") ||
		!slices.Contains(c.Args, "--leader-elect=false") || !slices.Contains(c.Args, "--pod-cidr=10.42.0.0/16") ||
		slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--service-cidr") }) || c.Image != "ghcr.io/liqo-go/liqo-controller-manager:v1.2.3" || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("type %s, args %v, image %s (%s)", svc.Spec.Type, c.Args, c.Image, c.ImagePullPolicy)
	}
}

// TestBroker: broker.enabled adds liqo-broker, Pod Security restricted,
// with the modes as flags, the catalog private unless said, its API on a
// Service of the chosen type at port 8000, the rights it needs (evicting
// pods, keeping Selections and NamespaceOffloadings, checking callers)
// and none to read Secrets, and the ClusterRoles operators bind to
// catalog readers and consumers; nothing of it by default.
func TestBroker(t *testing.T) {
	if got := kinds(render(t, nil), "Deployment"); slices.Contains(got, "liqo-broker") {
		t.Errorf("the broker runs by default: Deployments %v", got)
	}
	objs := render(t, map[string]any{"broker": map[string]any{"enabled": true, "modes": []any{"orchestrator"},
		"service": map[string]any{"type": "NodePort", "nodePort": 30800}}})
	var d appsv1.Deployment
	find(t, objs, "Deployment", "liqo-broker", &d)
	c := d.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--with-orchestrator") || slices.Contains(c.Args, "--with-catalog") || !slices.Contains(c.Args, "--public-catalog=false") ||
		!slices.Contains(c.Args, "--http-bind-address=:8000") || c.Image != "ghcr.io/liqo-go/liqo-broker:"+chartAppVersion(t) || d.Spec.Template.Spec.ServiceAccountName != "liqo-broker" {
		t.Errorf("the broker's container: args %v, image %s", c.Args, c.Image)
	}
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range eval.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec) {
		if !r.Allowed {
			t.Errorf("the broker's pod, Pod Security restricted: %s: %s", r.ForbiddenReason, r.ForbiddenDetail)
		}
	}
	var svc corev1.Service
	find(t, objs, "Service", "liqo-broker", &svc)
	if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.Ports[0].Port != 8000 || svc.Spec.Ports[0].NodePort != 30800 || svc.Spec.Selector["app.kubernetes.io/component"] != "broker" {
		t.Errorf("the broker's Service: %+v", svc.Spec)
	}
	var role rbacv1.ClusterRole
	find(t, objs, "ClusterRole", "liqo-broker", &role)
	can := func(group, resource, verb string) bool {
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	for _, want := range [][3]string{
		{"", "pods/eviction", "create"}, {"broker.liqo.io", "selections", "update"}, {"broker.liqo.io", "selections/status", "patch"},
		{"offloading.liqo.io", "namespaceoffloadings", "create"}, {"", "namespaces", "patch"},
		{"authentication.k8s.io", "tokenreviews", "create"}, {"authorization.k8s.io", "subjectaccessreviews", "create"},
	} {
		if !can(want[0], want[1], want[2]) {
			t.Errorf("the broker may not %s %s.%s", want[2], want[1], want[0])
		}
	}
	if can("", "secrets", "get") || can("", "secrets", "list") || can("", "pods", "delete") {
		t.Errorf("the broker reads Secrets or deletes pods: %+v", role.Rules)
	}
	var reader, consumer rbacv1.ClusterRole
	find(t, objs, "ClusterRole", "liqo-broker-catalog-reader", &reader)
	find(t, objs, "ClusterRole", "liqo-broker-consumer", &consumer)
	if len(reader.Rules) != 1 || !slices.Equal(reader.Rules[0].Resources, []string{"catalog"}) || !slices.Equal(reader.Rules[0].Verbs, []string{"get"}) {
		t.Errorf("liqo-broker-catalog-reader: %+v", reader.Rules)
	}
	if len(consumer.Rules) != 1 || !slices.Equal(consumer.Rules[0].ResourceNames, []string{"selection"}) || slices.Contains(consumer.Rules[0].Verbs, "delete") {
		t.Errorf("liqo-broker-consumer: %+v", consumer.Rules)
	}
}

// TestBadValuesAreRejected: values.schema.json refuses a wrong value and
// names it.
func TestBadValuesAreRejected(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		values map[string]any
		names  string
	}{
		{map[string]any{"auth": map[string]any{"service": map[string]any{"type": "Ingress", "port": 443}}}, "/auth/service/type"},
		{map[string]any{"controllerManager": map[string]any{"replicas": 0}}, "/controllerManager/replicas"},
		{map[string]any{"controllerManager": map[string]any{"replica": 2}}, "replica"},
		{map[string]any{"apiServer": map[string]any{"url": "http://api:6443"}}, "/apiServer/url"},
		{map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}, "/image/pullPolicy"},
		{map[string]any{"metrics": map[string]any{"enabled": "yes"}}, "/metrics/enabled"},
		{map[string]any{"networking": map[string]any{"podCIDR": "10.244.0.0"}}, "/networking/podCIDR"},
		{map[string]any{"gateway": map[string]any{"port": 70000}}, "/gateway/port"},
		{map[string]any{"gateway": map[string]any{"endpoint": "gateway.example.com"}}, "/gateway/endpoint"},
		{map[string]any{"gateway": map[string]any{"mtu": 100}}, "/gateway/mtu"},
		{map[string]any{"routeAgent": map[string]any{"probePort": 70000}}, "/routeAgent/probePort"},
		{map[string]any{"dnsProxy": map[string]any{"domain": "Cluster Local"}}, "/dnsProxy/domain"},
		{map[string]any{"broker": map[string]any{"modes": []any{"catalog", "dashboard"}}}, "/broker/modes"},
		{map[string]any{"broker": map[string]any{"service": map[string]any{"type": "Ingress", "port": 8000}}}, "/broker/service/type"},
	} {
		_, err := Render(c, Release{Name: "liqo", Namespace: "liqo", Values: tc.values})
		if err == nil || !strings.Contains(err.Error(), tc.names) {
			t.Errorf("%v: %v, want an error naming %s", tc.values, err, tc.names)
		}
	}
}

// TestLint runs `helm lint`'s rules on the chart's directory.
func TestLint(t *testing.T) {
	for _, values := range []map[string]any{nil, {"auth": map[string]any{"service": map[string]any{"type": "NodePort"}}}, {"broker": map[string]any{"enabled": true}},
		{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "podMonitor": map[string]any{"enabled": true}}}} {
		l := lint.RunAll("../../../deployments/liqo", values, "liqo")
		for _, m := range l.Messages {
			t.Logf("%s", m)
		}
		if l.HighestSeverity >= support.WarningSev {
			t.Errorf("helm lint with %v: highest severity %d", values, l.HighestSeverity)
		}
	}
}

// TestMonitors: no ServiceMonitor or PodMonitor by default; enabled, the
// ServiceMonitor scrapes the controller manager's metrics Service and the
// PodMonitor every pod of the release at its metrics port, over HTTPS
// with the token of a ServiceAccount bound to liqo-metrics-reader alone,
// or over HTTP when the metrics are not secure.
func TestMonitors(t *testing.T) {
	const scraper = "liqo-metrics-scraper" // a ServiceAccount's name, and its token Secret's
	objs := render(t, nil)
	if sm, pm := kinds(objs, "ServiceMonitor"), kinds(objs, "PodMonitor"); len(sm)+len(pm) != 0 {
		t.Fatalf("by default the chart renders ServiceMonitors %v and PodMonitors %v", sm, pm)
	}
	on := map[string]any{"metrics": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true}, "podMonitor": map[string]any{"enabled": true},
		"monitorLabels": map[string]any{"release": "prometheus"}, "scrapeInterval": "15s",
	}}
	objs = render(t, on)
	var sm, pm unstructured.Unstructured
	find(t, objs, "ServiceMonitor", "liqo-controller-manager", &sm.Object)
	find(t, objs, "PodMonitor", "liqo", &pm.Object)
	var svc corev1.Service
	find(t, objs, "Service", "liqo-metrics", &svc)
	selects := func(m *unstructured.Unstructured, labels map[string]string) bool {
		sel, _, _ := unstructured.NestedStringMap(m.Object, "spec", "selector", "matchLabels")
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	var cm, gw appsv1.Deployment
	find(t, objs, "Deployment", install.ControllerManagerName, &cm)
	find(t, objs, "Deployment", "liqo-gateway", &gw)
	excluded, _, _ := unstructured.NestedSlice(pm.Object, "spec", "selector", "matchExpressions")
	if !selects(&sm, svc.Labels) || !selects(&pm, gw.Spec.Template.Labels) || len(excluded) != 1 ||
		!strings.Contains(fmt.Sprint(excluded[0]), "controller-manager") {
		t.Errorf("the ServiceMonitor does not select the Service %v, or the PodMonitor the gateway's %v pods, or it scrapes the controller manager twice (%v)",
			svc.Labels, gw.Spec.Template.Labels, excluded)
	}
	for _, c := range []struct {
		m    *unstructured.Unstructured
		list string
		port string
	}{{&sm, "endpoints", svc.Spec.Ports[0].Name}, {&pm, "podMetricsEndpoints", "metrics"}} {
		if c.m.GetLabels()["release"] != "prometheus" {
			t.Errorf("%s %s lacks the monitor labels: %v", c.m.GetKind(), c.m.GetName(), c.m.GetLabels())
		}
		eps, _, _ := unstructured.NestedSlice(c.m.Object, "spec", c.list)
		if len(eps) != 1 {
			t.Fatalf("%s: %d endpoints", c.m.GetKind(), len(eps))
		}
		ep := eps[0].(map[string]any)
		tokenSecret, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "name")
		if ep["port"] != c.port || ep["scheme"] != "https" || ep["interval"] != "15s" || tokenSecret != scraper {
			t.Errorf("%s's endpoint %v: want port %s, https, every 15s, with the scraper's token", c.m.GetKind(), ep, c.port)
		}
	}
	var binding rbacv1.ClusterRoleBinding
	find(t, objs, "ClusterRoleBinding", scraper+"-liqo-system", &binding)
	var token corev1.Secret
	find(t, objs, "Secret", scraper, &token)
	if binding.RoleRef.Name != install.MetricsReaderName || len(binding.Subjects) != 1 || binding.Subjects[0].Name != scraper ||
		token.Type != corev1.SecretTypeServiceAccountToken || token.Annotations[corev1.ServiceAccountNameKey] != scraper {
		t.Errorf("the scraper's rights %+v or token %+v", binding, token)
	}

	plain := map[string]any{"metrics": map[string]any{"secure": false, "podMonitor": map[string]any{"enabled": true}}}
	objs = render(t, plain)
	find(t, objs, "PodMonitor", "liqo", &pm.Object)
	if !selects(&pm, cm.Spec.Template.Labels) {
		t.Errorf("the PodMonitor alone does not scrape the controller manager: %v", pm.Object["spec"])
	}
	eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if ep := eps[0].(map[string]any); ep["scheme"] != "http" || ep["authorization"] != nil || len(kinds(objs, "ClusterRoleBinding")) != len(kinds(render(t, nil), "ClusterRoleBinding")) {
		t.Errorf("with insecure metrics, the PodMonitor's endpoint %v, or a scraper bound anyway", ep)
	}
	if got := kinds(render(t, map[string]any{"metrics": map[string]any{"enabled": false, "podMonitor": map[string]any{"enabled": true}}}), "PodMonitor"); len(got) != 0 {
		t.Errorf("with metrics off, PodMonitors %v", got)
	}
}
