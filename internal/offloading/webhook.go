// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

// MutatePodPath is where the pod webhook is served.
const MutatePodPath = "/mutate-v1-pod"

// PodMutator lets the pods of an offloaded namespace onto virtual nodes: it
// adds the toleration of the virtual-node taint and, for the Remote
// strategy or a cluster selector, a required node affinity; in a
// namespace a broker orchestrates, the affinity names the consumer's
// enabled providers only (Orchestrated).
type PodMutator struct {
	// Reader reads NamespaceOffloadings and namespaces.
	Reader client.Reader
}

// podScheduling is the part of a pod the webhook reads and changes:
// decoding only it, and patching only it, keeps a burst of pod creations
// cheap.
type podScheduling struct {
	Metadata struct {
		Labels map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
	Spec struct {
		NodeName                  string                            `json:"nodeName,omitempty"`
		Tolerations               []corev1.Toleration               `json:"tolerations,omitempty"`
		Affinity                  *corev1.Affinity                  `json:"affinity,omitempty"`
		TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	} `json:"spec"`
}

// Handle implements admission.Handler.
func (m *PodMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	var in podScheduling
	if err := json.Unmarshal(req.Object.Raw, &in); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the pod: %w", err))
	}
	if req.Operation == admissionv1.Update {
		return keepToleration(req, &in)
	}
	var ns corev1.Namespace
	if err := m.Reader.Get(ctx, client.ObjectKey{Name: req.Namespace}, &ns); client.IgnoreNotFound(err) != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	providers, orchestrated := Orchestrated(&ns)
	var no offloadingv1alpha1.NamespaceOffloading
	err := m.Reader.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no)
	switch {
	case (apierrors.IsNotFound(err) || (err == nil && !no.DeletionTimestamp.IsZero())) && orchestrated:
		// A broker's namespace not offloaded yet: its pods wait for a
		// provider, never on the broker's own nodes.
		no = offloadingv1alpha1.NamespaceOffloading{Spec: offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote}}
	case apierrors.IsNotFound(err) || (err == nil && !no.DeletionTimestamp.IsZero()):
		return admission.Allowed("namespace not offloaded")
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: in.Metadata.Labels}, Spec: corev1.PodSpec{NodeName: in.Spec.NodeName,
		Tolerations: slices.Clone(in.Spec.Tolerations), Affinity: in.Spec.Affinity.DeepCopy(),
		TopologySpreadConstraints: slices.Clone(in.Spec.TopologySpreadConstraints)}}
	var changed bool
	if !orchestrated && PinnedToNode(pod) {
		// Its controller chose the node (a DaemonSet's pod for each node),
		// or its author did: an affinity of the strategy could only keep
		// it from that node. It may still stay on a virtual one.
		changed = no.Spec.PodOffloadingStrategy != offloadingv1alpha1.PodOffloadingLocal && tolerateVirtualNodes(pod)
	} else {
		changed = MutatePod(pod, &no.Spec)
	}
	if orchestrated {
		RestrictToProviders(pod, providers)
		if order := ns.Annotations[brokerv1alpha1.PackOrderAnnotation]; order != "" {
			PreferProviders(pod, strings.Split(order, ","))
		}
		changed = true
	}
	if ns.Labels[brokerv1alpha1.AggregatedLabel] == "true" {
		if !metav1.HasAnnotation(ns.ObjectMeta, brokerv1alpha1.PackOrderAnnotation) {
			SpreadOverNodes(pod)
		}
		// The aggregated consumer reads its pods here whole.
		nodeOf, err := m.virtualNodes(ctx)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		HideProviders(pod, nodeOf)
		changed = true
	}
	if !changed {
		return admission.Allowed("nothing to change")
	}
	// "add" replaces a member that exists.
	var ops []jsonpatch.JsonPatchOperation
	if !equality.Semantic.DeepEqual(pod.Spec.Tolerations, in.Spec.Tolerations) {
		ops = append(ops, jsonpatch.NewOperation("add", "/spec/tolerations", pod.Spec.Tolerations))
	}
	if !equality.Semantic.DeepEqual(pod.Spec.Affinity, in.Spec.Affinity) {
		ops = append(ops, jsonpatch.NewOperation("add", "/spec/affinity", pod.Spec.Affinity))
	}
	if !equality.Semantic.DeepEqual(pod.Spec.TopologySpreadConstraints, in.Spec.TopologySpreadConstraints) {
		ops = append(ops, jsonpatch.NewOperation("add", "/spec/topologySpreadConstraints", pod.Spec.TopologySpreadConstraints))
	}
	return admission.Patched("offloading", ops...)
}

// keepToleration puts back the virtual-node toleration an update of a pod
// drops (one that sets the tolerations to its own list), as the API
// server's admission puts back the tolerations it added: the API server
// refuses an update that removes one. Nothing else of the pod changes
// (its affinity cannot).
func keepToleration(req admission.Request, in *podScheduling) admission.Response {
	var old podScheduling
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the pod before the update: %w", err))
	}
	if !toleratesVirtualNodes(old.Spec.Tolerations) {
		return admission.Allowed("the pod did not tolerate virtual nodes")
	}
	if toleratesVirtualNodes(in.Spec.Tolerations) {
		return admission.Allowed("nothing to change")
	}
	tolerations := append(slices.Clone(in.Spec.Tolerations), virtualNodeToleration)
	return admission.Patched("offloading", jsonpatch.NewOperation("add", "/spec/tolerations", tolerations))
}

// Orchestrated says whether the broker orchestrates ns (a namespace a
// broker cluster made for a consumer), and to which providers its new
// pods may go.
func Orchestrated(ns *corev1.Namespace) ([]string, bool) {
	if ns.Labels[brokerv1alpha1.OrchestratedLabel] != brokerv1alpha1.OrchestratedValue {
		return nil, false
	}
	list := ns.Annotations[brokerv1alpha1.ProvidersAnnotation]
	if list == "" {
		return nil, true
	}
	return strings.Split(list, ","), true
}

// RestrictToProviders lets pod onto the virtual nodes of providers only
// (none when empty), ANDed with what its affinity already requires.
func RestrictToProviders(pod *corev1.Pod, providers []string) {
	req := corev1.NodeSelectorRequirement{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: providers}
	if len(providers) == 0 {
		req = corev1.NodeSelectorRequirement{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpDoesNotExist}
	}
	mergeRequiredAffinity(pod, []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}})
}

// virtualNodes maps each provider to the names of its virtual nodes (one,
// or one for each pool of its offer).
func (m *PodMutator) virtualNodes(ctx context.Context) (map[string][]string, error) {
	var nodes corev1.NodeList
	if err := m.Reader.List(ctx, &nodes, client.MatchingLabels{offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue}); err != nil {
		return nil, fmt.Errorf("listing the virtual nodes: %w", err)
	}
	out := map[string][]string{}
	for _, n := range nodes.Items {
		if p := n.Labels[offloadingv1alpha1.RemoteClusterLabel]; p != "" {
			out[p] = append(out[p], n.Name)
		}
	}
	return out, nil
}

// HideProviders rewrites every requirement of pod's node affinity on the
// provider label into one on the names of the providers' virtual nodes
// (kubernetes.io/hostname), which an aggregating broker makes opaque: its
// consumer reads the pod, and must find no provider in it. A requirement
// left with no provider that has a node matches nothing (required) or
// goes (preferred); one that excludes none goes.
func HideProviders(pod *corev1.Pod, nodeOf map[string][]string) {
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil {
		return
	}
	// rewrite returns e's replacement, and whether it may match anything.
	rewrite := func(e corev1.NodeSelectorRequirement) ([]corev1.NodeSelectorRequirement, bool) {
		if e.Key != offloadingv1alpha1.RemoteClusterLabel || (e.Operator != corev1.NodeSelectorOpIn && e.Operator != corev1.NodeSelectorOpNotIn) {
			return []corev1.NodeSelectorRequirement{e}, true
		}
		var names []string
		for _, v := range e.Values {
			names = append(names, nodeOf[v]...)
		}
		switch {
		case len(names) > 0:
			return []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: e.Operator, Values: names}}, true
		case e.Operator == corev1.NodeSelectorOpNotIn:
			return nil, true
		}
		return []corev1.NodeSelectorRequirement{
			{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpExists},
			{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpDoesNotExist},
		}, false
	}
	term := func(t corev1.NodeSelectorTerm) (corev1.NodeSelectorTerm, bool) {
		out := corev1.NodeSelectorTerm{MatchFields: t.MatchFields}
		possible := true
		for _, e := range t.MatchExpressions {
			r, ok := rewrite(e)
			out.MatchExpressions = append(out.MatchExpressions, r...)
			possible = possible && ok
		}
		return out, possible
	}
	na := pod.Spec.Affinity.NodeAffinity
	if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
		for i, t := range req.NodeSelectorTerms {
			req.NodeSelectorTerms[i], _ = term(t)
		}
	}
	var preferred []corev1.PreferredSchedulingTerm
	for _, p := range na.PreferredDuringSchedulingIgnoredDuringExecution {
		if t, ok := term(p.Preference); ok {
			preferred = append(preferred, corev1.PreferredSchedulingTerm{Weight: p.Weight, Preference: t})
		}
	}
	na.PreferredDuringSchedulingIgnoredDuringExecution = preferred
}

// unlikeLabels are left out of the pods a spread counts: those a
// controller gives each of its pods a value of its own (a spread over pods
// that share them would be over one pod), and those each hop of
// offloading sets to its own consumer (the same for every pod of a
// namespace here; at the provider, where the pod's copy keeps the spread,
// they would match none of its like).
var unlikeLabels = []string{appsv1.StatefulSetPodNameLabel, appsv1.PodIndexLabel, batchv1.JobCompletionIndexAnnotation,
	offloadingv1alpha1.OriginClusterLabel, offloadingv1alpha1.ForClusterLabel}

// SpreadOverNodes has the scheduler spread pod and its like (the pods of
// its namespace with its labels, but unlikeLabels) over nodes, at
// most one apart where it can (ScheduleAnyway): an aggregated consumer's
// pods with placement Spread, over the providers' virtual nodes. The
// scheduler's own default spreading reads the pod's owner, which a pod
// the broker offloads for its consumer does not have here; its resource
// scoring alone fills the largest provider first. A pod that states its
// own spread keeps it alone.
func SpreadOverNodes(pod *corev1.Pod) {
	if len(pod.Spec.TopologySpreadConstraints) > 0 {
		return
	}
	like := maps.Clone(pod.Labels)
	for _, k := range unlikeLabels {
		delete(like, k)
	}
	pod.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname,
		WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: like}}}
}

// maxPreferred bounds the providers a bin-packed pod prefers, in order:
// past a few, the scheduler's own scoring outweighs their weights.
const maxPreferred = 7

// PreferProviders has the scheduler prefer the virtual nodes of order's
// providers, the first most (weights 64, 32, 16...): among those that
// hold the pod, the first in order wins, as a bin-packing wants when order
// is fullest first. The pod's own preferences stay.
func PreferProviders(pod *corev1.Pod, order []string) {
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	if pod.Spec.Affinity.NodeAffinity == nil {
		pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := pod.Spec.Affinity.NodeAffinity
	for i, p := range order[:min(len(order), maxPreferred)] {
		na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution, corev1.PreferredSchedulingTerm{
			Weight: int32(64 >> i), Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{p},
			}}},
		})
	}
}

// PinnedToNode says whether pod names the node it runs on: spec.nodeName,
// or a required node affinity each of whose terms matches nodes by name,
// as the DaemonSet controller pins its pods. The offloading strategy
// chooses between nodes; such a pod leaves nothing to choose, and a
// DaemonSet reaches a virtual node only when its template tolerates the
// virtual-node taint itself.
func PinnedToNode(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" {
		return true
	}
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil || pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	return len(terms) > 0 && !slices.ContainsFunc(terms, func(t corev1.NodeSelectorTerm) bool {
		return !slices.ContainsFunc(t.MatchFields, func(r corev1.NodeSelectorRequirement) bool {
			return r.Key == metav1.ObjectNameField && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) > 0
		})
	})
}

// MutatePod applies an offloading spec to pod, and says whether it changed.
func MutatePod(pod *corev1.Pod, spec *offloadingv1alpha1.NamespaceOffloadingSpec) bool {
	strategy := spec.PodOffloadingStrategy
	if strategy == "" {
		strategy = offloadingv1alpha1.PodOffloadingLocalAndRemote
	}
	if strategy == offloadingv1alpha1.PodOffloadingLocal {
		return false
	}
	changed := tolerateVirtualNodes(pod)
	virtual := corev1.NodeSelectorRequirement{Key: offloadingv1alpha1.VirtualNodeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{offloadingv1alpha1.VirtualNodeValue}}
	var terms []corev1.NodeSelectorTerm
	if spec.ClusterSelector != nil && len(spec.ClusterSelector.NodeSelectorTerms) > 0 {
		for _, t := range spec.ClusterSelector.NodeSelectorTerms {
			t = *t.DeepCopy()
			t.MatchExpressions = append(t.MatchExpressions, virtual)
			terms = append(terms, t)
		}
	} else if strategy == offloadingv1alpha1.PodOffloadingRemote {
		terms = []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{virtual}}}
	}
	if len(terms) == 0 {
		return changed
	}
	if strategy == offloadingv1alpha1.PodOffloadingLocalAndRemote {
		terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: offloadingv1alpha1.VirtualNodeLabel, Operator: corev1.NodeSelectorOpNotIn, Values: []string{offloadingv1alpha1.VirtualNodeValue},
		}}})
	}
	mergeRequiredAffinity(pod, terms)
	return true
}

// tolerateVirtualNodes adds the toleration of the virtual-node taint to
// pod, and says whether it was missing.
func tolerateVirtualNodes(pod *corev1.Pod) bool {
	if toleratesVirtualNodes(pod.Spec.Tolerations) {
		return false
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, virtualNodeToleration)
	return true
}

// virtualNodeToleration is the toleration the webhook gives offloadable pods.
var virtualNodeToleration = corev1.Toleration{Key: offloadingv1alpha1.VirtualNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}

// toleratesVirtualNodes says whether tolerations hold the webhook's own.
func toleratesVirtualNodes(tolerations []corev1.Toleration) bool {
	return slices.ContainsFunc(tolerations, func(t corev1.Toleration) bool { return t.MatchToleration(&virtualNodeToleration) })
}

// mergeRequiredAffinity ANDs terms with the pod's own required node
// affinity: node selector terms are ORed, so the result is their cross
// product.
func mergeRequiredAffinity(pod *corev1.Pod, terms []corev1.NodeSelectorTerm) {
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	if pod.Spec.Affinity.NodeAffinity == nil {
		pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := pod.Spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: terms}
		return
	}
	var merged []corev1.NodeSelectorTerm
	for _, own := range na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, t := range terms {
			m := *own.DeepCopy()
			m.MatchExpressions = append(m.MatchExpressions, t.MatchExpressions...)
			m.MatchFields = append(m.MatchFields, t.MatchFields...)
			merged = append(merged, m)
		}
	}
	na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = merged
}
