// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package pods

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/virtualkubelet/claims"
	"github.com/liqo-go/liqo/internal/virtualkubelet/forge"
	"github.com/liqo-go/liqo/internal/virtualkubelet/token"
)

func TestRemotePod(t *testing.T) {
	local := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web-1", UID: "uid-1", Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{forge.LastAppliedAnnotation: "{}", "keep": "me"}},
		Spec: corev1.PodSpec{
			NodeName:           "liqo-provider",
			NodeSelector:       map[string]string{offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue},
			Affinity:           &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}, PodAntiAffinity: &corev1.PodAntiAffinity{}},
			Priority:           ptr.To(int32(10)),
			PriorityClassName:  "high",
			ServiceAccountName: "builder",
			Tolerations: []corev1.Toleration{{Key: offloadingv1alpha1.VirtualNodeTaint, Operator: corev1.TolerationOpExists}, {Key: "other"},
				{Operator: corev1.TolerationOpExists}, {Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(60))}},
			RuntimeClassName: ptr.To("gvisor"),
			Volumes: []corev1.Volume{
				{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}},
				}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			},
			Containers: []corev1.Container{{Name: "app", Image: "web:1", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
			}, VolumeMounts: []corev1.VolumeMount{
				{Name: "kube-api-access-x", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}, {Name: "config", MountPath: "/etc/config"},
			}}},
		},
	}
	got := RemotePod(local, "demo-abc", "consumer-id")
	if got.Namespace != "demo-abc" || got.Name != "web-1" {
		t.Errorf("remote pod %s/%s, want demo-abc/web-1", got.Namespace, got.Name)
	}
	if got.Labels["app"] != "web" || got.Labels[offloadingv1alpha1.OriginClusterLabel] != "consumer-id" {
		t.Errorf("labels %v", got.Labels)
	}
	if got.Annotations[offloadingv1alpha1.OriginUIDAnnotation] != "uid-1" || got.Annotations[offloadingv1alpha1.OriginNamespaceAnnotation] != "demo" ||
		got.Annotations["keep"] != "me" || got.Annotations[forge.LastAppliedAnnotation] != "" {
		t.Errorf("annotations %v", got.Annotations)
	}
	s := got.Spec
	if s.NodeName != "" || s.NodeSelector != nil || s.Affinity.NodeAffinity != nil || s.Affinity.PodAntiAffinity == nil ||
		s.Priority != nil || s.PriorityClassName != "" {
		t.Errorf("node selection or priority kept: %+v", s)
	}
	if s.ServiceAccountName != "" || ptr.Deref(s.AutomountServiceAccountToken, true) {
		t.Errorf("service account %q automount %v, want the provider's default without a token", s.ServiceAccountName, s.AutomountServiceAccountToken)
	}
	if len(s.Volumes) != 1 || s.Volumes[0].Name != "config" || len(s.Containers[0].VolumeMounts) != 1 || s.Containers[0].VolumeMounts[0].Name != "config" {
		t.Errorf("the consumer's token volume reached the provider: %+v %+v", s.Volumes, s.Containers[0].VolumeMounts)
	}
	if len(s.Tolerations) != 1 || s.Tolerations[0].Key != corev1.TaintNodeNotReady || *s.Tolerations[0].TolerationSeconds != 60 {
		t.Errorf("tolerations %+v, want only the consumer's time on a node not ready", s.Tolerations)
	}
	if l := s.Containers[0].Resources.Limits; l.Cpu().String() != "250m" || l.Memory().String() != "128Mi" {
		t.Errorf("limits %v, want the CPU request as its limit and the memory limit kept", l)
	}
	if s.RuntimeClassName != nil {
		t.Errorf("runtime class %q kept", *s.RuntimeClassName)
	}
	if local.Spec.NodeName != "liqo-provider" || len(local.Spec.Volumes) != 2 {
		t.Error("the local pod was modified")
	}
	// The provider's copy drifts when its labels or images change.
	drifted := got.DeepCopy()
	drifted.Spec.Containers[0].Image = "evil:1"
	if !podDrifted(drifted, got) || podDrifted(got.DeepCopy(), got) {
		t.Error("podDrifted does not see an image change, or sees one where there is none")
	}
	if fixed := correctPod(drifted, got); fixed.Spec.Containers[0].Image != "web:1" {
		t.Errorf("corrected image %q", fixed.Spec.Containers[0].Image)
	}
	// An annotation of the provider's own is no drift; one of the
	// consumer's changed, or gone from the local pod, is.
	own := got.DeepCopy()
	own.Annotations["provider.example/sidecar"] = "yes"
	if podDrifted(own, got) {
		t.Error("podDrifted sees the provider's own annotation as drift")
	}
	want := got.DeepCopy()
	want.Annotations = map[string]string{"kept": "2"}
	before := got.DeepCopy()
	before.Annotations["kept"], before.Annotations["removed"] = "1", "x"
	before.Annotations[forge.AnnotationsAnnotation] = "kept,removed"
	before.Annotations["provider.example/sidecar"] = "yes"
	if !podDrifted(before, want) {
		t.Fatal("podDrifted does not see the consumer's annotations change")
	}
	fixed := correctPod(before, want)
	if _, ok := fixed.Annotations["removed"]; ok || fixed.Annotations["kept"] != "2" || fixed.Annotations["provider.example/sidecar"] != "yes" {
		t.Errorf("corrected annotations %v, want kept=2, no removed, the provider's sidecar", fixed.Annotations)
	}
}

func TestLocalStatus(t *testing.T) {
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, Reason: "local"}
	local := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort, Conditions: []corev1.PodCondition{scheduled}}}
	start := metav1.Now()
	remote := &corev1.Pod{Status: corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "10.0.0.7", PodIPs: []corev1.PodIP{{IP: "10.0.0.7"}}, StartTime: &start,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, Reason: "remote"},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, ObservedGeneration: 3},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: 2, Ready: true}},
	}}
	st := LocalStatus(local, remote)
	if st.Phase != corev1.PodRunning || st.PodIP != "10.0.0.7" || st.StartTime == nil || st.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("status %+v", st)
	}
	if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].RestartCount != 2 {
		t.Errorf("remote restarts not shown: %+v", st.ContainerStatuses)
	}
	if len(st.Conditions) != 2 || st.Conditions[0].Reason != "local" || st.Conditions[1].Type != corev1.PodReady {
		t.Errorf("conditions %+v, want the local PodScheduled and the remote Ready", st.Conditions)
	}
	after := local.DeepCopy()
	after.Status = st
	if !statusReflected(&after.Status, &st) || statusReflected(&local.Status, &st) {
		t.Error("statusReflected is wrong")
	}
	// A phase the provider made up shows as Unknown; none reported yet
	// leaves the pod's own.
	remote.Status.Phase = "Hijacked"
	if st := LocalStatus(local, remote); st.Phase != corev1.PodUnknown {
		t.Errorf("a made-up phase shows as %q, want Unknown", st.Phase)
	}
	remote.Status.Phase = ""
	if st := LocalStatus(local, remote); st.Phase != corev1.PodPending {
		t.Errorf("no phase reported shows as %q, want the pod's own Pending", st.Phase)
	}
}

// TestRemotePodWithToken checks that a pod asking for its token keeps
// its token volume, now fed by the token Secret: token, CA and namespace
// at the paths the pod expects, other projections kept.
func TestRemotePodWithToken(t *testing.T) {
	local := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web-1", UID: "uid-1", Annotations: map[string]string{offloadingv1alpha1.ServiceAccountTokenAnnotation: "true"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "builder",
			Volumes: []corev1.Volume{{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr.To(int32(0o644)),
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(int64(3607))}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: forge.RootCAConfigMap},
						Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
						{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}},
						{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels"}},
					}}},
				},
			}}}},
			Containers: []corev1.Container{{Name: "app", Image: "web:1", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
			}, VolumeMounts: []corev1.VolumeMount{
				{Name: "kube-api-access-x", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"},
			}}},
		},
	}
	// A second token for another audience keeps a key of its own.
	local.Spec.Volumes = append(local.Spec.Volumes, corev1.Volume{Name: "vault", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "vault-token", Audience: "vault"}}},
	}}})
	if !token.Requested(local) {
		t.Fatal("the annotation does not ask for the token")
	}
	s := RemotePod(local, "demo-abc", "consumer-id").Spec
	if s.ServiceAccountName != "" || ptr.Deref(s.AutomountServiceAccountToken, true) {
		t.Errorf("service account %q automount %v, want the provider's default without its own token", s.ServiceAccountName, s.AutomountServiceAccountToken)
	}
	if len(s.Volumes) != 2 {
		t.Fatalf("volumes %+v, want both token volumes kept", s.Volumes)
	}
	if v := s.Volumes[1].Projected; v == nil || len(v.Sources) != 1 || v.Sources[0].Secret == nil ||
		!equality.Semantic.DeepEqual(v.Sources[0].Secret.Items, []corev1.KeyToPath{{Key: "vault.0.token", Path: "vault-token"}}) {
		t.Errorf("the vault volume %+v, want its own token key", s.Volumes[1])
	}
	if len(s.Containers[0].VolumeMounts) != 1 {
		t.Fatalf("volumes %+v mounts %+v, want the token volume kept", s.Volumes, s.Containers[0].VolumeMounts)
	}
	p := s.Volumes[0].Projected
	if p == nil || ptr.Deref(p.DefaultMode, 0) != 0o644 || len(p.Sources) != 2 {
		t.Fatalf("projected volume %+v, want the token Secret and the remaining downward API item", p)
	}
	sec := p.Sources[0].Secret
	want := []corev1.KeyToPath{{Key: "kube-api-access-x.0.token", Path: "token"}, {Key: "ca.crt", Path: "ca.crt"}, {Key: "namespace", Path: "namespace"}}
	if sec == nil || sec.Name != "web-1-liqo-token" || !equality.Semantic.DeepEqual(sec.Items, want) {
		t.Errorf("secret projection %+v, want web-1-liqo-token with %v", sec, want)
	}
	if d := p.Sources[1].DownwardAPI; d == nil || len(d.Items) != 1 || d.Items[0].Path != "labels" {
		t.Errorf("downward API projection %+v, want only labels kept (the namespace comes from the Secret)", p.Sources[1])
	}
	for _, src := range p.Sources {
		if src.ServiceAccountToken != nil || src.ConfigMap != nil {
			t.Errorf("a source of the consumer reached the provider: %+v", src)
		}
	}
	// Unchanged local pod.
	if local.Spec.Volumes[0].Projected.Sources[0].ServiceAccountToken == nil {
		t.Error("the local pod was changed")
	}
}

// TestStatusPatch checks that the status patch, applied to the local pod,
// gives the status LocalStatus forged, fields cleared included, and
// leaves the rest of the pod alone.
func TestStatusPatch(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	local := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web-1", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "liqo-p", Containers: []corev1.Container{{Name: "app", Image: "web:1"}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodPending, Reason: "Waiting", Message: "old", QOSClass: corev1.PodQOSBestEffort,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
		},
	}
	remote := &corev1.Pod{Status: corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "10.0.0.7", PodIPs: []corev1.PodIP{{IP: "10.0.0.7"}}, HostIP: "127.0.0.1", StartTime: &start,
		Conditions:                 []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
		ContainerStatuses:          []corev1.ContainerStatus{{Name: "app", Ready: true, RestartCount: 2}},
		EphemeralContainerStatuses: []corev1.ContainerStatus{{Name: "debugger", Ready: false}},
	}}
	local.Generation = 3
	forged := LocalStatus(local, remote)
	observeGeneration(&forged, local, remote, false)
	if forged.ObservedGeneration != 3 {
		t.Fatalf("observedGeneration %d, want the local pod's 3", forged.ObservedGeneration)
	}
	// As a kubelet does, PodScheduled included (the spec "pod
	// observedGeneration field set in pod conditions" waits for it).
	for _, c := range forged.Conditions {
		if c.ObservedGeneration != 3 {
			t.Errorf("condition %s: observedGeneration %d, want 3", c.Type, c.ObservedGeneration)
		}
	}
	data, err := statusPatch(&forged)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := json.Marshal(local)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jsonpatch.MergePatch(orig, data)
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := local.DeepCopy()
	want.Status = forged
	if !equality.Semantic.DeepEqual(&got, want) {
		t.Errorf("patched pod:\n%+v\nwant:\n%+v", got.Status, want.Status)
	}
	if got.Status.Reason != "" || got.Status.Message != "" || got.Status.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("reason %q message %q qos %q: the provider's empty reason and message must clear the local ones, and the QoS class stay",
			got.Status.Reason, got.Status.Message, got.Status.QOSClass)
	}
}

// TestRejectedForGood checks which refusals of a provider fail the local
// pod: policy and validation do, an exceeded quota (room may come) does not.
func TestRejectedForGood(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"pod security", apierrors.NewForbidden(gr, "p", errors.New(`violates PodSecurity "baseline:latest": host namespaces`)), true},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", nil), true},
		{"quota", apierrors.NewForbidden(gr, "p", errors.New("exceeded quota: q, requested: pods=1, used: pods=10, limited: pods=10")), false},
		{"unreachable", errors.New("connection refused"), false},
		{"conflict", apierrors.NewConflict(gr, "p", errors.New("x")), false},
		{"admission policy", apierrors.NewForbidden(gr, "p", errors.New("ValidatingAdmissionPolicy 'liqo-offloaded-pods' with binding 'liqo-offloaded-pods' denied request: spec.hostNetwork")), true},
		{"rbac", apierrors.NewForbidden(gr, "p", errors.New(`User "liqo-virtual-kubelet-x" cannot create resource "pods"`)), false},
		{"namespace terminating", apierrors.NewForbidden(gr, "p", errors.New("unable to create new content in namespace x because it is being terminated")), false},
	} {
		if got := rejectedForGood(tc.err); got != tc.want {
			t.Errorf("%s: rejectedForGood = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRemotePodDownwardAPI: what the downward API shows of a pod that the
// provider names otherwise (namespace, UID, node, service account) is read
// from annotations holding the consumer's values, in environment variables
// and volumes; a pod offloaded in turn keeps the first consumer's values.
func TestRemotePodDownwardAPI(t *testing.T) {
	ref := func(path string) *corev1.ObjectFieldSelector { return &corev1.ObjectFieldSelector{FieldPath: path} }
	local := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web-1", UID: "uid-1"},
		Spec: corev1.PodSpec{
			NodeName: "liqo-provider", ServiceAccountName: "builder",
			Containers: []corev1.Container{{Name: "app", Image: "web:1", Env: []corev1.EnvVar{
				{Name: "NS", ValueFrom: &corev1.EnvVarSource{FieldRef: ref("metadata.namespace")}},
				{Name: "NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: ref("metadata.name")}},
				{Name: "UID", ValueFrom: &corev1.EnvVarSource{FieldRef: ref("metadata.uid")}},
				{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: ref("spec.nodeName")}},
				{Name: "SA", ValueFrom: &corev1.EnvVarSource{FieldRef: ref("spec.serviceAccountName")}},
			}}},
			Volumes: []corev1.Volume{
				{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "namespace", FieldRef: ref("metadata.namespace")}, {Path: "labels", FieldRef: ref("metadata.labels")},
				}}}},
				{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "uid", FieldRef: ref("metadata.uid")}}}},
				}}}},
			},
		},
	}
	remote := RemotePod(local, "demo-0a1b2c", "consumer-1")
	annotated := func(a string) string { return "metadata.annotations['" + a + "']" }
	want := map[string]string{
		"NS": annotated(DownwardNamespaceAnnotation), "NAME": "metadata.name", "UID": annotated(DownwardUIDAnnotation),
		"NODE": annotated(DownwardNodeNameAnnotation), "SA": annotated(DownwardServiceAccountAnnotation),
	}
	for _, e := range remote.Spec.Containers[0].Env {
		if e.ValueFrom.FieldRef.FieldPath != want[e.Name] {
			t.Errorf("env %s reads %s, want %s", e.Name, e.ValueFrom.FieldRef.FieldPath, want[e.Name])
		}
	}
	items := remote.Spec.Volumes[0].DownwardAPI.Items
	if items[0].FieldRef.FieldPath != annotated(DownwardNamespaceAnnotation) || items[1].FieldRef.FieldPath != "metadata.labels" {
		t.Errorf("downwardAPI volume items %+v, want the namespace from its annotation, the labels as they are", items)
	}
	if p := remote.Spec.Volumes[1].Projected.Sources[0].DownwardAPI.Items[0].FieldRef.FieldPath; p != annotated(DownwardUIDAnnotation) {
		t.Errorf("projected downwardAPI item reads %s, want the UID from its annotation", p)
	}
	for a, v := range map[string]string{DownwardNamespaceAnnotation: "demo", DownwardUIDAnnotation: "uid-1", DownwardNodeNameAnnotation: "liqo-provider", DownwardServiceAccountAnnotation: "builder"} {
		if remote.Annotations[a] != v {
			t.Errorf("annotation %s = %q, want %q", a, remote.Annotations[a], v)
		}
	}
	if local.Spec.Containers[0].Env[0].ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Error("the local pod's spec was changed")
	}

	// Offloaded in turn: the broker's pod carries the consumer's values.
	again := RemotePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: remote.Namespace, Name: remote.Name, UID: "uid-2", Annotations: remote.Annotations},
		Spec: *remote.Spec.DeepCopy()}, "demo-9z", "broker-1")
	if again.Annotations[DownwardNamespaceAnnotation] != "demo" || again.Annotations[DownwardUIDAnnotation] != "uid-1" ||
		again.Spec.Containers[0].Env[0].ValueFrom.FieldRef.FieldPath != annotated(DownwardNamespaceAnnotation) {
		t.Errorf("offloaded in turn: annotations %v, env %+v; want the first consumer's values", again.Annotations, again.Spec.Containers[0].Env[0])
	}
}

func TestResizedPod(t *testing.T) {
	q := resource.MustParse
	remote := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("10m")}}}},
		Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("32Mi")},
		}}},
	}}
	desired := remote.DeepCopy()
	desired.Spec.Containers[0].Resources = corev1.ResourceRequirements{ // memory: the provider's default, not named here
		Requests: corev1.ResourceList{corev1.ResourceCPU: q("1000m")}, Limits: corev1.ResourceList{corev1.ResourceCPU: q("1000m")},
	}
	if _, changed := resizedPod(remote, desired); changed {
		t.Error("1000m for 1 is no resize")
	}
	desired.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = q("2")
	desired.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = q("2")
	desired.Spec.InitContainers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: q("20m")}
	got, changed := resizedPod(remote, desired)
	if !changed {
		t.Fatal("a CPU change is a resize")
	}
	want := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("32Mi")},
	}
	if !equality.Semantic.DeepEqual(got.Spec.Containers[0].Resources, want) {
		t.Errorf("resized container %v, want %v (the provider's memory kept)", got.Spec.Containers[0].Resources, want)
	}
	if l := got.Spec.InitContainers[0].Resources.Limits.Cpu(); l.MilliValue() != 20 {
		t.Errorf("init container limit %v, want the 20m added", l)
	}
	if remote.Spec.Containers[0].Resources.Requests.Cpu().Value() != 1 {
		t.Error("resizedPod changed remote")
	}
}

func TestLocalStatusShowsTheResourcesTheSpecNames(t *testing.T) {
	q := resource.MustParse
	local := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: q("2m")}, Limits: corev1.ResourceList{corev1.ResourceCPU: q("10m")},
	}}}}}
	remote := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name:               "main",
		AllocatedResources: corev1.ResourceList{corev1.ResourceCPU: q("2m"), corev1.ResourceMemory: q("32Mi")},
		Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("2m"), corev1.ResourceMemory: q("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: q("10m"), corev1.ResourceMemory: q("32Mi")},
		},
	}}}}
	st := LocalStatus(local, remote)
	cs := st.ContainerStatuses[0]
	if !equality.Semantic.DeepEqual(cs.AllocatedResources, corev1.ResourceList{corev1.ResourceCPU: q("2m")}) ||
		cs.Resources == nil || !equality.Semantic.DeepEqual(*cs.Resources, local.Spec.Containers[0].Resources) {
		t.Errorf("status resources %v, allocated %v; want the spec's %v", cs.Resources, cs.AllocatedResources, local.Spec.Containers[0].Resources)
	}
	if remote.Status.ContainerStatuses[0].Resources.Limits.Memory().IsZero() {
		t.Error("LocalStatus changed the provider pod's status")
	}
}

// TestLocalStatusCannotBeInflated: a provider reporting more than the
// spec asks (and than was shown before) is shown the larger of those: the
// consumer's quota counts a pod at the larger of its spec and its status.
func TestLocalStatusCannotBeInflated(t *testing.T) {
	q := resource.MustParse
	local := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: q("100m")}, Limits: corev1.ResourceList{corev1.ResourceCPU: q("200m")},
	}}}}}
	reported := func(req, lim string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "main", AllocatedResources: corev1.ResourceList{corev1.ResourceCPU: q(req)},
			Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q(req)}, Limits: corev1.ResourceList{corev1.ResourceCPU: q(lim)}},
		}}}}
	}
	shown := func(st corev1.PodStatus) (string, string, string) {
		cs := st.ContainerStatuses[0]
		return cs.AllocatedResources.Cpu().String(), cs.Resources.Requests.Cpu().String(), cs.Resources.Limits.Cpu().String()
	}
	st := LocalStatus(local, reported("64", "128"))
	if a, r, l := shown(st); a != "100m" || r != "100m" || l != "200m" {
		t.Errorf("an inflated report shows allocated %s, requests %s, limits %s; want the spec's 100m, 100m, 200m", a, r, l)
	}
	// Resized down to 50m: until the provider actuates it, the 100m shown
	// before stays, and no more.
	local.Status = st
	local.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = q("50m")
	if a, r, _ := shown(LocalStatus(local, reported("100m", "200m"))); a != "100m" || r != "100m" {
		t.Errorf("a resize down not yet actuated shows %s, %s; want the 100m actuated", a, r)
	}
	if a, _, _ := shown(LocalStatus(local, reported("300m", "200m"))); a != "100m" {
		t.Errorf("an inflated report during a resize down shows %s, want 100m at most", a)
	}
	if a, _, _ := shown(LocalStatus(local, reported("50m", "200m"))); a != "50m" {
		t.Errorf("the resize actuated shows %s, want 50m", a)
	}
}

func TestMissingEphemeralOneAtATime(t *testing.T) {
	ec := func(name string) corev1.EphemeralContainer {
		return corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: name}}
	}
	remote := &corev1.Pod{Spec: corev1.PodSpec{EphemeralContainers: []corev1.EphemeralContainer{ec("a")}}}
	desired := &corev1.Pod{Spec: corev1.PodSpec{EphemeralContainers: []corev1.EphemeralContainer{ec("a"), ec("b"), ec("c")}}}
	got, missing := missingEphemeral(remote, desired, map[string]bool{"b": true})
	if !missing || len(got.Spec.EphemeralContainers) != 2 || got.Spec.EphemeralContainers[1].Name != "c" {
		t.Errorf("got %+v (%v), want a and c: the rejected b skipped, one added", got.Spec.EphemeralContainers, missing)
	}
	if _, missing := missingEphemeral(got, desired, map[string]bool{"b": true}); missing {
		t.Error("nothing is missing but the rejected one")
	}
}

// TestWithConsumerDNS: a ClusterFirst pod whose namespace has another name
// in the provider asks the provider's DNS for this cluster, with this
// cluster's search path; a pod with DNS of its own, one whose namespace
// keeps its name, an address that is none, change nothing. A cluster
// offloading the pod in turn (a broker) restores ClusterFirst before its
// own provider's DNS.
func TestWithConsumerDNS(t *testing.T) {
	dns := &offloadingv1alpha1.ConsumerDNS{Nameserver: "10.96.0.42", Domain: "cluster.local"}
	local := func(mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u1"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}, DNSPolicy: corev1.DNSClusterFirst}}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	forged := func(p *corev1.Pod, remoteNS string, d *offloadingv1alpha1.ConsumerDNS) *corev1.Pod {
		remote := RemotePod(p, remoteNS, "consumer")
		WithConsumerDNS(remote, p.Namespace, d)
		return remote
	}
	got := forged(local(nil), "shop-x1", dns)
	want := &corev1.PodDNSConfig{Nameservers: []string{"10.96.0.42"}, Searches: []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("5")}}}
	if got.Spec.DNSPolicy != corev1.DNSNone || !equality.Semantic.DeepEqual(got.Spec.DNSConfig, want) ||
		got.Annotations[offloadingv1alpha1.ConsumerDNSAnnotation] != "ClusterFirst" ||
		!slices.Contains(strings.Split(got.Annotations[forge.AnnotationsAnnotation], ","), offloadingv1alpha1.ConsumerDNSAnnotation) {
		t.Errorf("a ClusterFirst pod: policy %s, config %+v, annotations %v", got.Spec.DNSPolicy, got.Spec.DNSConfig, got.Annotations)
	}
	for name, tc := range map[string]struct {
		pod      *corev1.Pod
		remoteNS string
		dns      *offloadingv1alpha1.ConsumerDNS
	}{
		"same name":         {local(nil), "shop", dns},
		"no DNS":            {local(nil), "shop-x1", nil},
		"not an address":    {local(nil), "shop-x1", &offloadingv1alpha1.ConsumerDNS{Nameserver: "dns.example.org", Domain: "cluster.local"}},
		"policy Default":    {local(func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSDefault }), "shop-x1", dns},
		"its own dnsConfig": {local(func(p *corev1.Pod) { p.Spec.DNSConfig = &corev1.PodDNSConfig{Searches: []string{"example.org"}} }), "shop-x1", dns},
	} {
		remote := forged(tc.pod, tc.remoteNS, tc.dns)
		if remote.Spec.DNSPolicy != tc.pod.Spec.DNSPolicy || !equality.Semantic.DeepEqual(remote.Spec.DNSConfig, tc.pod.Spec.DNSConfig) {
			t.Errorf("%s: policy %s, config %+v; want the pod's own", name, remote.Spec.DNSPolicy, remote.Spec.DNSConfig)
		}
		if _, ok := remote.Annotations[offloadingv1alpha1.ConsumerDNSAnnotation]; ok {
			t.Errorf("%s: marked %s", name, offloadingv1alpha1.ConsumerDNSAnnotation)
		}
	}
	// The broker's hop: the pod above, as the broker holds it, goes on
	// to the broker's provider with ClusterFirst, then that provider's
	// DNS for the broker and the broker's namespace name.
	atBroker := got.DeepCopy()
	atBroker.UID = "u2"
	next := RemotePod(atBroker, "shop-x1-y2", "broker")
	if next.Spec.DNSPolicy != corev1.DNSClusterFirst || next.Spec.DNSConfig != nil {
		t.Errorf("the broker's hop without DNS: policy %s, config %+v; want ClusterFirst", next.Spec.DNSPolicy, next.Spec.DNSConfig)
	}
	if _, ok := next.Annotations[offloadingv1alpha1.ConsumerDNSAnnotation]; ok {
		t.Errorf("the broker's hop without DNS is still marked")
	}
	WithConsumerDNS(next, atBroker.Namespace, &offloadingv1alpha1.ConsumerDNS{Nameserver: "10.96.7.7", Domain: "cluster.local"})
	if next.Spec.DNSConfig == nil || next.Spec.DNSConfig.Nameservers[0] != "10.96.7.7" || next.Spec.DNSConfig.Searches[0] != "shop-x1.svc.cluster.local" {
		t.Errorf("the broker's hop: config %+v", next.Spec.DNSConfig)
	}
}

// TestEphemeralVolumeOfClassLiqoGoesAsItsClaim: a generic ephemeral
// volume of class liqo reaches the provider as the claim the consumer's
// ephemeral volume controller made (pod name, dash, volume name), which
// the claims reflector keeps there; one of another class is left as it
// is, for the provider to refuse.
func TestEphemeralVolumeOfClassLiqoGoesAsItsClaim(t *testing.T) {
	template := func(class string) *corev1.EphemeralVolumeSource {
		return &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(class),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}}}
	}
	local := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "db-0", UID: "uid-1"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "db", Image: "db:1", VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/s"}, {Name: "other", MountPath: "/o"}}}},
			Volumes: []corev1.Volume{
				{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: template(claims.StorageClass)}},
				{Name: "other", VolumeSource: corev1.VolumeSource{Ephemeral: template("fast")}},
			},
		},
	}
	remote := RemotePod(local, "demo-x", "consumer-1")
	if len(remote.Spec.Volumes) != 2 {
		t.Fatalf("volumes %+v, want both", remote.Spec.Volumes)
	}
	if v := remote.Spec.Volumes[0]; v.Ephemeral != nil || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "db-0-scratch" {
		t.Errorf("the liqo ephemeral volume went as %+v, want claim db-0-scratch", v.VolumeSource)
	}
	if v := remote.Spec.Volumes[1]; v.Ephemeral == nil || v.PersistentVolumeClaim != nil {
		t.Errorf("the other ephemeral volume went as %+v, want it unchanged", v.VolumeSource)
	}
	if local.Spec.Volumes[0].Ephemeral == nil {
		t.Error("the local pod's volume was changed")
	}
}
