// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/liqo-go/liqo/api"
	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

// TestHandlePatchesOnlyScheduling checks that the webhook's patch, applied
// to the pod it received, gives what MutatePod makes of the whole pod, and
// leaves every other field alone.
func TestHandlePatchesOnlyScheduling(t *testing.T) {
	base := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{
			Containers:   []corev1.Container{{Name: "c", Image: "img", Env: []corev1.EnvVar{{Name: "A", Value: "1"}}}},
			NodeSelector: map[string]string{"disk": "ssd"},
		},
	}
	withOwn := base.DeepCopy()
	withOwn.Spec.Tolerations = []corev1.Toleration{{Key: "own", Operator: corev1.TolerationOpExists}}
	withOwn.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
	}}}
	// As the DaemonSet controller makes its pods: pinned by name.
	byName := corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{"node-0"}}}}
	daemon := base.DeepCopy()
	daemon.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{byName},
	}}}
	halfPinned := withOwn.DeepCopy()
	terms := &halfPinned.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	*terms = append(*terms, byName)
	named := base.DeepCopy()
	named.Spec.NodeName = "node-0"
	// A namespace a broker orchestrates for a consumer.
	orchestrated := map[string]string{brokerv1alpha1.OrchestratedLabel: brokerv1alpha1.OrchestratedValue}
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		strategy  offloadingv1alpha1.PodOffloadingStrategy
		nsLabels  map[string]string
		providers []string
		patched   bool
	}{
		{"a bare pod, Remote", &base, offloadingv1alpha1.PodOffloadingRemote, nil, nil, true},
		{"a pod with its own toleration and affinity, Remote", withOwn, offloadingv1alpha1.PodOffloadingRemote, nil, nil, true},
		{"a pod with its own toleration and affinity, LocalAndRemote", withOwn, offloadingv1alpha1.PodOffloadingLocalAndRemote, nil, nil, true},
		{"Local leaves the pod alone", withOwn, offloadingv1alpha1.PodOffloadingLocal, nil, nil, false},
		{"orchestrated by a broker, to two providers", withOwn, offloadingv1alpha1.PodOffloadingRemote, orchestrated, []string{"p1", "p2"}, true},
		{"orchestrated by a broker, to none", &base, offloadingv1alpha1.PodOffloadingRemote, orchestrated, nil, true},
		{"a DaemonSet's pod, pinned to its node by name, Remote", daemon, offloadingv1alpha1.PodOffloadingRemote, nil, nil, true},
		{"a pod with its node named, Remote", named, offloadingv1alpha1.PodOffloadingRemote, nil, nil, true},
		{"a pod with its node named, Local", named, offloadingv1alpha1.PodOffloadingLocal, nil, nil, false},
		{"a DaemonSet's pod, orchestrated by a broker", daemon, offloadingv1alpha1.PodOffloadingRemote, orchestrated, []string{"p1"}, true},
		{"a pod naming a node in one term of two, Remote", halfPinned, offloadingv1alpha1.PodOffloadingRemote, nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			no := &offloadingv1alpha1.NamespaceOffloading{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: offloadingv1alpha1.NamespaceOffloadingName},
				Spec:       offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: tc.strategy},
			}
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: tc.nsLabels,
				Annotations: map[string]string{brokerv1alpha1.ProvidersAnnotation: strings.Join(tc.providers, ",")}}}
			m := &PodMutator{Reader: fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(no, ns).Build()}
			raw, err := json.Marshal(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			resp := m.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Namespace: "ns", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
			}})
			if !resp.Allowed {
				t.Fatalf("denied: %v", resp.Result)
			}
			if !tc.patched {
				if len(resp.Patches) != 0 {
					t.Fatalf("patched with %v, want no patch", resp.Patches)
				}
				return
			}
			got := applyPatches(t, resp, raw)
			want := tc.pod.DeepCopy()
			if PinnedToNode(want) && tc.nsLabels == nil {
				// Only tolerated: no affinity keeps it from its node.
				tolerateVirtualNodes(want)
			} else {
				MutatePod(want, &no.Spec)
			}
			if tc.nsLabels != nil {
				RestrictToProviders(want, tc.providers)
			}
			if PinnedToNode(tc.pod) && tc.nsLabels == nil && !equality.Semantic.DeepEqual(got.Spec.Affinity, tc.pod.Spec.Affinity) {
				t.Errorf("the affinity of a pod pinned to its node changed: %+v", got.Spec.Affinity)
			}
			if !equality.Semantic.DeepEqual(&got, want) {
				t.Errorf("patched pod:\n%+v\nwant:\n%+v", got.Spec, want.Spec)
			}
		})
	}
}

// TestHandleOrchestratedBeforeOffloaded: in a namespace a broker marked
// orchestrated but has not offloaded yet, a consumer's pod is sent to
// virtual nodes of the enabled providers (none yet: it waits), never to
// the broker's own nodes.
func TestHandleOrchestratedBeforeOffloaded(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{brokerv1alpha1.OrchestratedLabel: brokerv1alpha1.OrchestratedValue},
		Annotations: map[string]string{brokerv1alpha1.ProvidersAnnotation: ""}}}
	m := &PodMutator{Reader: fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(ns).Build()}
	raw, err := json.Marshal(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}})
	if err != nil {
		t.Fatal(err)
	}
	resp := m.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Namespace: "ns", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
	}})
	if !resp.Allowed || len(resp.Patches) != 2 {
		t.Fatalf("allowed %v, patches %v; want the toleration and the affinity", resp.Allowed, resp.Patches)
	}
	got := applyPatches(t, resp, raw)
	want := &corev1.Pod{}
	MutatePod(want, &offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote})
	RestrictToProviders(want, nil)
	if !equality.Semantic.DeepEqual(got.Spec.Affinity, want.Spec.Affinity) || !equality.Semantic.DeepEqual(got.Spec.Tolerations, want.Spec.Tolerations) {
		t.Errorf("patched scheduling %+v %+v, want %+v %+v", got.Spec.Affinity, got.Spec.Tolerations, want.Spec.Affinity, want.Spec.Tolerations)
	}
}

// TestHandleNotOffloaded checks that a namespace without a
// NamespaceOffloading is left alone, and that a malformed pod is refused.
func TestHandleNotOffloaded(t *testing.T) {
	m := &PodMutator{Reader: fake.NewClientBuilder().WithScheme(api.NewScheme()).Build()}
	resp := m.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Namespace: "ns", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(`{"spec":{"containers":[]}}`)},
	}})
	if !resp.Allowed || len(resp.Patches) != 0 {
		t.Errorf("not offloaded: allowed %v, patches %v; want allowed, no patch", resp.Allowed, resp.Patches)
	}
	resp = m.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Namespace: "ns", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(`{"spec":{"tolerations":"not a list"}}`)},
	}})
	if resp.Allowed || resp.Result == nil || resp.Result.Code != 400 {
		t.Errorf("malformed pod: %+v, want a 400 refusal", resp.Result)
	}
}

// TestHandleUpdateKeepsToleration: an update that sets a pod's
// tolerations to its own list gets the virtual-node toleration the pod had
// back, and nothing else; an update that keeps it, or of a pod that never
// had it, is let through unchanged.
func TestHandleUpdateKeepsToleration(t *testing.T) {
	ours := corev1.Toleration{Key: offloadingv1alpha1.VirtualNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
	own := corev1.Toleration{Key: "foo", Operator: corev1.TolerationOpEqual, Value: "bar", Effect: corev1.TaintEffectNoSchedule}
	affinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
	}}}
	pod := func(tolerations ...corev1.Toleration) []byte {
		raw, err := json.Marshal(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}, Tolerations: tolerations, Affinity: affinity}})
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	// No NamespaceOffloading: an update is answered whatever the namespace.
	m := &PodMutator{Reader: fake.NewClientBuilder().WithScheme(api.NewScheme()).Build()}
	for _, tc := range []struct {
		name     string
		old, new []byte
		want     []corev1.Toleration // nil: no patch
	}{
		{"tolerations replaced", pod(ours), pod(own), []corev1.Toleration{own, ours}},
		{"tolerations emptied", pod(own, ours), pod(), []corev1.Toleration{ours}},
		{"toleration kept", pod(ours), pod(ours, own), nil},
		{"a pod that never had it", pod(own), pod(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := m.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Namespace: "ns", Operation: admissionv1.Update, Object: runtime.RawExtension{Raw: tc.new}, OldObject: runtime.RawExtension{Raw: tc.old},
			}})
			if !resp.Allowed {
				t.Fatalf("denied: %v", resp.Result)
			}
			if tc.want == nil {
				if len(resp.Patches) != 0 {
					t.Fatalf("patched with %v, want no patch", resp.Patches)
				}
				return
			}
			got := applyPatches(t, resp, tc.new)
			var before corev1.Pod
			if err := json.Unmarshal(tc.new, &before); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got.Spec.Tolerations, tc.want) {
				t.Errorf("tolerations %+v, want %+v", got.Spec.Tolerations, tc.want)
			}
			got.Spec.Tolerations = before.Spec.Tolerations
			if !equality.Semantic.DeepEqual(&got, &before) {
				t.Errorf("the patch changed more than the tolerations: %+v", got.Spec)
			}
		})
	}
}

// applyPatches applies the webhook's answer to the pod it was sent.
func applyPatches(t *testing.T, resp admission.Response, raw []byte) corev1.Pod {
	t.Helper()
	ops, err := json.Marshal(resp.Patches)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	out, err := patch.Apply(raw)
	if err != nil {
		t.Fatalf("applying %s: %v", ops, err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	return got
}

// admitted is pod as m lets it be created in namespace ns.
func admitted(t *testing.T, m *PodMutator, pod *corev1.Pod) corev1.Pod {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	resp := m.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Namespace: "ns", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
	}})
	if !resp.Allowed {
		t.Fatalf("denied: %v", resp.Result)
	}
	return applyPatches(t, resp, raw)
}

// TestBinPackedPodPrefersFullestFirst: in a namespace whose pods the
// broker bin-packs, a new pod prefers the providers in the namespace's
// pack order, the first most, keeping its own preferences; it may still
// go to none but the namespace's providers.
func TestBinPackedPodPrefersFullestFirst(t *testing.T) {
	no := &offloadingv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: offloadingv1alpha1.NamespaceOffloadingName},
		Spec: offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns",
		Labels:      map[string]string{brokerv1alpha1.OrchestratedLabel: brokerv1alpha1.OrchestratedValue},
		Annotations: map[string]string{brokerv1alpha1.ProvidersAnnotation: "p1,p2,p3", brokerv1alpha1.PackOrderAnnotation: "p2,p3,p1"}}}
	m := &PodMutator{Reader: fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(no, ns).Build()}
	own := corev1.PreferredSchedulingTerm{Weight: 5, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "img"}},
		Affinity:   &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{own}}},
	}}
	got := admitted(t, m, pod)
	na := got.Spec.Affinity.NodeAffinity
	var prefers []string
	for _, p := range na.PreferredDuringSchedulingIgnoredDuringExecution {
		e := p.Preference.MatchExpressions[0]
		prefers = append(prefers, fmt.Sprintf("%s=%s:%d", e.Key, strings.Join(e.Values, ","), p.Weight))
	}
	want := []string{"disk=ssd:5", offloadingv1alpha1.RemoteClusterLabel + "=p2:64", offloadingv1alpha1.RemoteClusterLabel + "=p3:32", offloadingv1alpha1.RemoteClusterLabel + "=p1:16"}
	if !slices.Equal(prefers, want) {
		t.Errorf("prefers %v, want %v", prefers, want)
	}
	req := na.RequiredDuringSchedulingIgnoredDuringExecution
	if req == nil || !slices.ContainsFunc(req.NodeSelectorTerms[0].MatchExpressions, func(e corev1.NodeSelectorRequirement) bool {
		return e.Key == offloadingv1alpha1.RemoteClusterLabel && slices.Equal(e.Values, []string{"p1", "p2", "p3"})
	}) {
		t.Errorf("required %+v, want the namespace's three providers", req)
	}
}

// TestAggregatedPodNamesNoProviderInItsSpec: in a namespace the broker
// aggregates, a new pod's affinity, required and preferred, names the
// providers' virtual nodes, never a provider: their opaque names, a
// provider with no node matching nothing; the pod's own preferences stay.
func TestAggregatedPodNamesNoProviderInItsSpec(t *testing.T) {
	no := &offloadingv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: offloadingv1alpha1.NamespaceOffloadingName},
		Spec: offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote,
			ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"provider-one", "provider-two", "provider-three"}},
			}}}}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns",
		Labels: map[string]string{brokerv1alpha1.OrchestratedLabel: brokerv1alpha1.OrchestratedValue, brokerv1alpha1.AggregatedLabel: "true"},
		Annotations: map[string]string{brokerv1alpha1.ProvidersAnnotation: "provider-one,provider-two,provider-three",
			brokerv1alpha1.PackOrderAnnotation: "provider-two,provider-three,provider-one"}}}
	vnode := func(name, provider string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue, offloadingv1alpha1.RemoteClusterLabel: provider}}}
	}
	// provider-three has no virtual node (yet).
	m := &PodMutator{Reader: fake.NewClientBuilder().WithScheme(api.NewScheme()).
		WithObjects(no, ns, vnode("liqo-0a1b2c3d4e", "provider-one"), vnode("liqo-5f6a7b8c9d", "provider-two")).Build()}
	own := corev1.PreferredSchedulingTerm{Weight: 5, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "topology.kubernetes.io/region", Operator: corev1.NodeSelectorOpIn, Values: []string{"eu"}}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "img"}},
		Affinity:   &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{own}}},
	}}
	got := admitted(t, m, pod)
	out, err := json.Marshal(got.Spec)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "provider-") {
		t.Errorf("the aggregated pod's spec names a provider: %s", out)
	}
	na := got.Spec.Affinity.NodeAffinity
	var prefers []string
	for _, p := range na.PreferredDuringSchedulingIgnoredDuringExecution {
		e := p.Preference.MatchExpressions[0]
		prefers = append(prefers, fmt.Sprintf("%s=%s:%d", e.Key, strings.Join(e.Values, ","), p.Weight))
	}
	want := []string{"topology.kubernetes.io/region=eu:5", corev1.LabelHostname + "=liqo-5f6a7b8c9d:64", corev1.LabelHostname + "=liqo-0a1b2c3d4e:16"}
	if !slices.Equal(prefers, want) {
		t.Errorf("prefers %v, want %v", prefers, want)
	}
	// Every required term keeps the pod to the two providers' nodes.
	req := na.RequiredDuringSchedulingIgnoredDuringExecution
	if req == nil || len(req.NodeSelectorTerms) == 0 {
		t.Fatalf("no required affinity: %+v", na)
	}
	for _, term := range req.NodeSelectorTerms {
		if !slices.ContainsFunc(term.MatchExpressions, func(e corev1.NodeSelectorRequirement) bool {
			return e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn && slices.Equal(e.Values, []string{"liqo-0a1b2c3d4e", "liqo-5f6a7b8c9d"})
		}) {
			t.Errorf("required term %+v, want it held to the two providers' nodes", term)
		}
	}
}

// TestSpreadPodsSpreadOverNodes: in a namespace the broker aggregates with
// placement Spread, a new pod asks the scheduler to spread it and its like
// (its labels, but those of one pod alone and its consumer's) over nodes, where it can; a pod
// with a spread of its own keeps it alone; a bin-packed namespace's pods
// get none.
func TestSpreadPodsSpreadOverNodes(t *testing.T) {
	no := &offloadingv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: offloadingv1alpha1.NamespaceOffloadingName},
		Spec: offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns",
		Labels:      map[string]string{brokerv1alpha1.OrchestratedLabel: brokerv1alpha1.OrchestratedValue, brokerv1alpha1.AggregatedLabel: "true"},
		Annotations: map[string]string{brokerv1alpha1.ProvidersAnnotation: "p1,p2"}}}
	admit := func(ns *corev1.Namespace, pod *corev1.Pod) corev1.Pod {
		t.Helper()
		return admitted(t, &PodMutator{Reader: fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(no, ns).Build()}, pod)
	}
	pod := func(labels map[string]string, own ...corev1.TopologySpreadConstraint) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-0", Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}, TopologySpreadConstraints: own}}
	}
	labels := map[string]string{"app": "db", appsv1.StatefulSetPodNameLabel: "db-0", appsv1.PodIndexLabel: "0", "controller-revision-hash": "db-5d8f",
		offloadingv1alpha1.OriginClusterLabel: "consumer"}

	got := admit(ns, pod(labels)).Spec.TopologySpreadConstraints
	want := []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db", "controller-revision-hash": "db-5d8f"}}}}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("spread %+v, want %+v", got, want)
	}

	own := corev1.TopologySpreadConstraint{MaxSkew: 2, TopologyKey: "topology.kubernetes.io/region", WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}
	if got := admit(ns, pod(labels, own)).Spec.TopologySpreadConstraints; !equality.Semantic.DeepEqual(got, []corev1.TopologySpreadConstraint{own}) {
		t.Errorf("a pod's own spread became %+v", got)
	}

	packed := ns.DeepCopy()
	packed.Annotations[brokerv1alpha1.PackOrderAnnotation] = "p2,p1"
	if got := admit(packed, pod(labels)).Spec.TopologySpreadConstraints; len(got) > 0 {
		t.Errorf("a bin-packed pod is spread: %+v", got)
	}
}
