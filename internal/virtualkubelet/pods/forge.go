// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package pods

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/offloading"
	"github.com/liqo-go/liqo/internal/virtualkubelet/claims"
	"github.com/liqo-go/liqo/internal/virtualkubelet/forge"
	"github.com/liqo-go/liqo/internal/virtualkubelet/token"
)

// RemotePod returns the pod the provider runs for local. What only
// makes sense in the consumer goes: the node, node selection (it selected
// the virtual node), tolerations of the consumer's taints, priority
// classes, runtime classes and readiness gates the provider may not have,
// and the consumer's service account token unless the pod asks for it;
// the provider's scheduler places the pod on one of its own nodes.
// Ephemeral containers are kept (their mounts forged as the containers'),
// though a pod is created without them: they are added afterwards,
// through their subresource (missingEphemeral).
func RemotePod(local *corev1.Pod, remoteNS, consumerID string) *corev1.Pod {
	spec := local.Spec.DeepCopy()
	// A pod whose DNS a consumer set to this cluster's DNS for it asked
	// for ClusterFirst: it gets that again (and, from WithConsumerDNS,
	// its next provider's DNS for this cluster).
	if _, ok := local.Annotations[offloadingv1alpha1.ConsumerDNSAnnotation]; ok {
		spec.DNSPolicy, spec.DNSConfig = corev1.DNSClusterFirst, nil
	}
	spec.NodeName = ""
	spec.NodeSelector = nil
	if spec.Affinity != nil {
		spec.Affinity.NodeAffinity = nil
	}
	spec.SchedulerName = ""
	spec.Priority, spec.PriorityClassName, spec.PreemptionPolicy = nil, "", nil
	spec.RuntimeClassName, spec.Overhead = nil, nil
	spec.ReadinessGates = nil
	spec.Tolerations = slices.DeleteFunc(spec.Tolerations, func(t corev1.Toleration) bool { return !providerToleration(t) })
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			offloading.BoundLimits(&cs[i].Resources)
		}
	}

	// The consumer's token reaches the provider only when the pod asks
	// (TokenRequested), from the Secret the pod reflector keeps; the pod
	// runs as the provider namespace's default service account, with no
	// token of the provider.
	spec.ServiceAccountName, spec.DeprecatedServiceAccount = "", ""
	spec.AutomountServiceAccountToken = ptr.To(false)
	reflectToken := token.Requested(local)
	dropped := map[string]bool{}
	var volumes []corev1.Volume
	for _, v := range spec.Volumes {
		if claim, ok := ephemeralClaim(local, v); ok {
			// The claim the consumer's ephemeral volume controller made
			// is the provider's too (package claims): the provider's
			// controller makes no other.
			v.VolumeSource = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: claim,
			}}
		}
		switch {
		case v.Projected == nil || !slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool { return s.ServiceAccountToken != nil }):
		case reflectToken:
			v.Projected = token.Volume(v.Name, v.Projected, token.SecretName(local.Name))
		default:
			dropped[v.Name] = true
			continue
		}
		volumes = append(volumes, v)
	}
	spec.Volumes = volumes
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			cs[i].VolumeMounts = slices.DeleteFunc(cs[i].VolumeMounts, func(m corev1.VolumeMount) bool { return dropped[m.Name] })
		}
	}
	for i := range spec.EphemeralContainers {
		ec := &spec.EphemeralContainers[i].EphemeralContainerCommon
		ec.VolumeMounts = slices.DeleteFunc(ec.VolumeMounts, func(m corev1.VolumeMount) bool { return dropped[m.Name] })
	}
	meta := forge.Meta(&local.ObjectMeta, remoteNS, consumerID)
	delete(meta.Annotations, offloadingv1alpha1.ConsumerDNSAnnotation)
	downward(local, spec, meta.Annotations)
	keys := slices.Sorted(maps.Keys(meta.Annotations))
	meta.Annotations[forge.AnnotationsAnnotation] = strings.Join(keys, ",")
	return &corev1.Pod{ObjectMeta: meta, Spec: *spec}
}

// ephemeralClaim is the name of the claim of pod's generic ephemeral
// volume v, when it is of the liqo StorageClass: pod's name and the
// volume's, as the ephemeral volume controller names it.
func ephemeralClaim(pod *corev1.Pod, v corev1.Volume) (string, bool) {
	if v.Ephemeral == nil || v.Ephemeral.VolumeClaimTemplate == nil ||
		ptr.Deref(v.Ephemeral.VolumeClaimTemplate.Spec.StorageClassName, "") != claims.StorageClass {
		return "", false
	}
	return pod.Name + "-" + v.Name, true
}

// missingEphemeral says whether desired has ephemeral containers the
// provider pod lacks (they are only ever added, never changed or
// removed), but those the provider refused for good (rejected), and
// returns remote with the first of them added, for the pods'
// ephemeralcontainers subresource: one at a time, so that a refusal is
// the refusal of that one alone.
func missingEphemeral(remote, desired *corev1.Pod, rejected map[string]bool) (*corev1.Pod, bool) {
	out := remote.DeepCopy()
	for _, ec := range desired.Spec.EphemeralContainers {
		if !rejected[ec.Name] && !slices.ContainsFunc(remote.Spec.EphemeralContainers, func(r corev1.EphemeralContainer) bool { return r.Name == ec.Name }) {
			out.Spec.EphemeralContainers = append(out.Spec.EphemeralContainers, ec)
			return out, true
		}
	}
	return out, false
}

// rejectedEphemeral are the names of local's ephemeral containers that
// its status shows the provider refused for good (rejectEphemeral).
func rejectedEphemeral(local *corev1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, cs := range local.Status.EphemeralContainerStatuses {
		if rejectedStatus(cs) {
			out[cs.Name] = true
		}
	}
	return out
}

func rejectedStatus(cs corev1.ContainerStatus) bool {
	return cs.State.Waiting != nil && cs.State.Waiting.Reason == offloadingv1alpha1.ReasonProviderRejected
}

// rejectEphemeral shows, in st, each ephemeral container of added that
// remote lacks as waiting for good, with the provider's refusal (its Pod
// Security level, an admission policy): a kubelet shows a container it
// cannot create so, and the ephemeral container would otherwise show no
// status at all, kubectl debug and logs waiting for it forever.
func rejectEphemeral(st *corev1.PodStatus, remote, added *corev1.Pod, provider string, err error) {
	for _, ec := range added.Spec.EphemeralContainers {
		if slices.ContainsFunc(remote.Spec.EphemeralContainers, func(r corev1.EphemeralContainer) bool { return r.Name == ec.Name }) {
			continue
		}
		st.EphemeralContainerStatuses = append(slices.DeleteFunc(st.EphemeralContainerStatuses, func(cs corev1.ContainerStatus) bool { return cs.Name == ec.Name }),
			corev1.ContainerStatus{Name: ec.Name, Image: ec.Image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason: offloadingv1alpha1.ReasonProviderRejected, Message: fmt.Sprintf("Provider %s refused the ephemeral container: %v", provider, err),
			}}})
	}
}

// resizedPod returns remote with the resources desired gives each of its
// containers and init containers (by name), and says whether any
// differs: the consumer resized the pod, through the pods' resize
// subresource, which the provider pod is resized through too. What the
// provider gave that desired does not name (its LimitRange's defaults)
// stays; an equal quantity written otherwise (1 for 1000m) is no change.
func resizedPod(remote, desired *corev1.Pod) (*corev1.Pod, bool) {
	out := remote.DeepCopy()
	changed := false
	set := func(got *corev1.ResourceList, want corev1.ResourceList) {
		for name, q := range want {
			if cur, ok := (*got)[name]; ok && cur.Cmp(q) == 0 {
				continue
			}
			if *got == nil {
				*got = corev1.ResourceList{}
			}
			(*got)[name] = q.DeepCopy()
			changed = true
		}
	}
	for _, cs := range [][2][]corev1.Container{{out.Spec.InitContainers, desired.Spec.InitContainers}, {out.Spec.Containers, desired.Spec.Containers}} {
		for i := range cs[0] {
			j := slices.IndexFunc(cs[1], func(c corev1.Container) bool { return c.Name == cs[0][i].Name })
			if j < 0 {
				continue
			}
			set(&cs[0][i].Resources.Requests, cs[1][j].Resources.Requests)
			set(&cs[0][i].Resources.Limits, cs[1][j].Resources.Limits)
		}
	}
	return out, changed
}

// The annotations of a provider pod that hold what the downward API shows
// the pod of itself as the consumer sees it: its namespace (which the
// provider names otherwise, under DefaultName mapping), UID, node (the
// virtual node) and service account. A pod offloaded in turn (through a
// broker) carries them already: the first consumer's stay.
const (
	DownwardNamespaceAnnotation      = "offloading.liqo.io/pod-namespace"
	DownwardUIDAnnotation            = "offloading.liqo.io/pod-uid"
	DownwardNodeNameAnnotation       = "offloading.liqo.io/node-name"
	DownwardServiceAccountAnnotation = "offloading.liqo.io/service-account-name"
)

// downwardFields are the pod fields the downward API shows that differ
// in the provider, and the annotation each is shown from instead.
var downwardFields = map[string]string{
	"metadata.namespace":      DownwardNamespaceAnnotation,
	"metadata.uid":            DownwardUIDAnnotation,
	"spec.nodeName":           DownwardNodeNameAnnotation,
	"spec.serviceAccountName": DownwardServiceAccountAnnotation,
}

// downward makes the downward API show a provider pod what the consumer
// shows of the local pod: the fields that differ in the provider are
// read from annotations holding the local values, in environment
// variables, downwardAPI volumes and projected ones alike.
func downward(local *corev1.Pod, spec *corev1.PodSpec, annotations map[string]string) {
	values := map[string]string{
		DownwardNamespaceAnnotation: local.Namespace, DownwardUIDAnnotation: string(local.UID),
		DownwardNodeNameAnnotation: local.Spec.NodeName, DownwardServiceAccountAnnotation: local.Spec.ServiceAccountName,
	}
	for k, v := range values {
		if got, ok := local.Annotations[k]; ok {
			v = got
		}
		annotations[k] = v
	}
	rewrite := func(f *corev1.ObjectFieldSelector) {
		if f == nil {
			return
		}
		if a, ok := downwardFields[f.FieldPath]; ok {
			f.FieldPath = "metadata.annotations['" + a + "']"
		}
	}
	env := func(vars []corev1.EnvVar) {
		for i := range vars {
			if vars[i].ValueFrom != nil {
				rewrite(vars[i].ValueFrom.FieldRef)
			}
		}
	}
	for i := range spec.Containers {
		env(spec.Containers[i].Env)
	}
	for i := range spec.InitContainers {
		env(spec.InitContainers[i].Env)
	}
	for i := range spec.EphemeralContainers {
		env(spec.EphemeralContainers[i].Env)
	}
	for _, v := range spec.Volumes {
		if v.DownwardAPI != nil {
			for i := range v.DownwardAPI.Items {
				rewrite(v.DownwardAPI.Items[i].FieldRef)
			}
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.DownwardAPI != nil {
					for i := range src.DownwardAPI.Items {
						rewrite(src.DownwardAPI.Items[i].FieldRef)
					}
				}
			}
		}
	}
}

// consumerAnnotations are the keys of remote's annotations that are the
// consumer's, as the virtual kubelet recorded them.
func consumerAnnotations(remote *corev1.Pod) []string {
	v := remote.Annotations[forge.AnnotationsAnnotation]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// providerToleration says whether t is one a provider lets its consumers'
// pods keep (the admission policy liqo-offloaded-pods refuses any other):
// how long to stay on a node that is not ready or unreachable, which the
// API server gives every pod. Tolerating the provider's other taints is
// the provider's decision, not the consumer's.
func providerToleration(t corev1.Toleration) bool {
	return (t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable) && t.Effect == corev1.TaintEffectNoExecute
}

// podDrifted says whether the provider pod's labels, the consumer's
// annotations, images or active deadline differ from what the consumer
// asks: the consumer changed them, or someone did in the provider.
func podDrifted(remote, desired *corev1.Pod) bool {
	if !equality.Semantic.DeepEqual(remote.Labels, desired.Labels) ||
		!equality.Semantic.DeepEqual(remote.Spec.ActiveDeadlineSeconds, desired.Spec.ActiveDeadlineSeconds) {
		return true
	}
	for k, v := range desired.Annotations {
		if got, ok := remote.Annotations[k]; !ok || got != v {
			return true
		}
	}
	for _, k := range consumerAnnotations(remote) {
		if _, ok := desired.Annotations[k]; !ok {
			return true
		}
	}
	for i := range desired.Spec.Containers {
		if i >= len(remote.Spec.Containers) || remote.Spec.Containers[i].Image != desired.Spec.Containers[i].Image {
			return true
		}
	}
	for i := range desired.Spec.InitContainers {
		if i >= len(remote.Spec.InitContainers) || remote.Spec.InitContainers[i].Image != desired.Spec.InitContainers[i].Image {
			return true
		}
	}
	return false
}

// correctPod returns remote with labels, the consumer's annotations,
// images (of containers and init containers) and active deadline set to desired (fields of a running pod that
// may change); the provider's own annotations stay.
func correctPod(remote, desired *corev1.Pod) *corev1.Pod {
	out := remote.DeepCopy()
	out.Labels = desired.Labels
	out.Spec.ActiveDeadlineSeconds = desired.Spec.ActiveDeadlineSeconds
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	for _, k := range consumerAnnotations(remote) {
		delete(out.Annotations, k)
	}
	maps.Copy(out.Annotations, desired.Annotations)
	for i := range out.Spec.Containers {
		if i < len(desired.Spec.Containers) {
			out.Spec.Containers[i].Image = desired.Spec.Containers[i].Image
		}
	}
	for i := range out.Spec.InitContainers {
		if i < len(desired.Spec.InitContainers) {
			out.Spec.InitContainers[i].Image = desired.Spec.InitContainers[i].Image
		}
	}
	return out
}

// LocalStatus returns local's status as the provider reports it: phase,
// conditions, container statuses, IPs and start time. The consumer's own
// scheduling condition (it scheduled the pod on the virtual node) stays.
func LocalStatus(local, remote *corev1.Pod) corev1.PodStatus {
	st := *local.Status.DeepCopy()
	rs := remote.Status.DeepCopy()
	st.Reason, st.Message = rs.Reason, rs.Message
	switch rs.Phase {
	case corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown:
		st.Phase = rs.Phase
	case "":
		// Not reported yet: the pod stays as it was.
	default:
		// A phase Kubernetes does not know (the API server takes any a
		// provider writes) is shown as Unknown: no controller here acts
		// on a word a peer made up.
		st.Phase = corev1.PodUnknown
	}
	st.PodIP, st.PodIPs = rs.PodIP, rs.PodIPs
	st.HostIP, st.HostIPs = rs.HostIP, rs.HostIPs
	st.StartTime = rs.StartTime
	st.ContainerStatuses, st.InitContainerStatuses = rs.ContainerStatuses, rs.InitContainerStatuses
	st.EphemeralContainerStatuses = rs.EphemeralContainerStatuses
	// Those the provider refused stay shown so: it never has them.
	for _, cs := range local.Status.EphemeralContainerStatuses {
		if rejectedStatus(cs) && !slices.ContainsFunc(st.EphemeralContainerStatuses, func(r corev1.ContainerStatus) bool { return r.Name == cs.Name }) {
			st.EphemeralContainerStatuses = append(st.EphemeralContainerStatuses, cs)
		}
	}
	consumerResources(st.ContainerStatuses, local.Spec.Containers, local.Status.ContainerStatuses)
	consumerResources(st.InitContainerStatuses, local.Spec.InitContainers, local.Status.InitContainerStatuses)
	var conds []corev1.PodCondition
	for _, c := range local.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			conds = append(conds, c)
		}
	}
	for _, c := range rs.Conditions {
		if c.Type != corev1.PodScheduled {
			c.ObservedGeneration = 0 // the provider pod's generation
			conds = append(conds, c)
		}
	}
	st.Conditions = conds
	return st
}

// consumerResources shows, in each container status, the resources the
// container's spec here names, at the values the provider reports
// (allocated, and actuated); those the provider added itself (its
// LimitRange's defaults, a limit bounded to the request) are left out, as
// a kubelet reports only the resources a container's spec names. No value
// is shown above both the spec's and the one shown before (shown): the
// consumer's quota and scheduler count a pod's resources as the larger of
// its spec and its status, which a provider must not inflate; a resize
// down still shows the larger value until the provider actuated it.
func consumerResources(statuses []corev1.ContainerStatus, spec []corev1.Container, shown []corev1.ContainerStatus) {
	only := func(got, named, before corev1.ResourceList) corev1.ResourceList {
		var out corev1.ResourceList
		for name, q := range got {
			bound, ok := named[name]
			if !ok {
				continue
			}
			if b, ok := before[name]; ok && b.Cmp(bound) > 0 {
				bound = b
			}
			if q.Cmp(bound) > 0 {
				q = bound.DeepCopy()
			}
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[name] = q
		}
		return out
	}
	for i := range statuses {
		j := slices.IndexFunc(spec, func(c corev1.Container) bool { return c.Name == statuses[i].Name })
		if j < 0 {
			continue
		}
		var before corev1.ContainerStatus
		if k := slices.IndexFunc(shown, func(c corev1.ContainerStatus) bool { return c.Name == statuses[i].Name }); k >= 0 {
			before = shown[k]
		}
		var beforeRes corev1.ResourceRequirements
		if before.Resources != nil {
			beforeRes = *before.Resources
		}
		named := spec[j].Resources
		statuses[i].AllocatedResources = only(statuses[i].AllocatedResources, named.Requests, before.AllocatedResources)
		if r := statuses[i].Resources; r != nil {
			statuses[i].Resources = &corev1.ResourceRequirements{
				Requests: only(r.Requests, named.Requests, beforeRes.Requests), Limits: only(r.Limits, named.Limits, beforeRes.Limits), Claims: r.Claims,
			}
		}
	}
}

// observeGeneration sets the generation of local's spec that st reflects,
// as a kubelet sets the one it acted on: local's own once the provider
// pod carries all of local's spec that is reflected (not drifted) and the
// provider's kubelet observed that (a provider that does not track
// generations says 0: in step is enough there); the one shown before
// otherwise. The conditions carry it too: those the provider reports, and
// PodScheduled, which a kubelet rewrites with the generation it acted on.
func observeGeneration(st *corev1.PodStatus, local, remote *corev1.Pod, drifted bool) {
	if !drifted && (remote.Status.ObservedGeneration == 0 || remote.Status.ObservedGeneration >= remote.Generation) {
		st.ObservedGeneration = local.Generation
	}
	for i := range st.Conditions {
		st.Conditions[i].ObservedGeneration = st.ObservedGeneration
	}
}

// statusPatch is the JSON merge patch that sets every field
// ForgeLocalStatus reflects to st's values (null clears one): built from
// those fields alone, not by diffing two whole pods, as a burst patches a
// thousand of them.
func statusPatch(st *corev1.PodStatus) ([]byte, error) {
	return json.Marshal(map[string]any{"status": map[string]any{
		"phase": st.Phase, "reason": st.Reason, "message": st.Message,
		"podIP": st.PodIP, "podIPs": st.PodIPs, "hostIP": st.HostIP, "hostIPs": st.HostIPs,
		"startTime": st.StartTime, "conditions": st.Conditions, "observedGeneration": st.ObservedGeneration,
		"containerStatuses": st.ContainerStatuses, "initContainerStatuses": st.InitContainerStatuses,
		"ephemeralContainerStatuses": st.EphemeralContainerStatuses,
	}})
}

// statusReflected says whether current already shows what forged
// reflects.
func statusReflected(current, forged *corev1.PodStatus) bool {
	return equality.Semantic.DeepEqual(current, forged)
}

// WithConsumerDNS points remote (a provider pod as RemotePod forged it)
// at its provider's DNS for this cluster, dns, when the pod asked for
// ClusterFirst with no dnsConfig of its own and its namespace has another
// name there than here (localNS): it then asks with this cluster's
// namespace names, as at home (search path localNS.svc.<domain>,
// svc.<domain>, <domain>, ndots 5, as the kubelet writes), and the
// provider's proxy answers them. A pod that set its own DNS keeps it.
func WithConsumerDNS(remote *corev1.Pod, localNS string, dns *offloadingv1alpha1.ConsumerDNS) {
	if dns == nil || remote.Namespace == localNS || remote.Spec.HostNetwork || remote.Spec.DNSConfig != nil ||
		(remote.Spec.DNSPolicy != "" && remote.Spec.DNSPolicy != corev1.DNSClusterFirst) {
		return
	}
	if _, err := netip.ParseAddr(dns.Nameserver); err != nil || dns.Domain == "" {
		return
	}
	domain := strings.TrimSuffix(dns.Domain, ".")
	remote.Spec.DNSPolicy = corev1.DNSNone
	remote.Spec.DNSConfig = &corev1.PodDNSConfig{
		Nameservers: []string{dns.Nameserver},
		Searches:    []string{localNS + ".svc." + domain, "svc." + domain, domain},
		Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("5")}},
	}
	MarkConsumerDNS(remote)
}

// MarkConsumerDNS marks pod as one whose DNS WithConsumerDNS set. A pod's
// DNS is set once, when it is created there (the fields cannot change):
// a provider pod made so keeps the mark, one made otherwise never gets it.
func MarkConsumerDNS(pod *corev1.Pod) {
	pod.Annotations[offloadingv1alpha1.ConsumerDNSAnnotation] = string(corev1.DNSClusterFirst)
	keys := strings.Split(pod.Annotations[forge.AnnotationsAnnotation], ",")
	keys = append(keys, offloadingv1alpha1.ConsumerDNSAnnotation)
	slices.Sort(keys)
	pod.Annotations[forge.AnnotationsAnnotation] = strings.Join(slices.Compact(keys), ",")
}
