// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package pods is the virtual kubelet's pod reflector: each pod bound to a
// virtual node runs as a pod of its provider, and the provider pod's
// status flows back.
package pods

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"golang.org/x/time/rate"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/network/transit"
	"github.com/liqo-go/liqo/internal/sharing"
	"github.com/liqo-go/liqo/internal/virtualkubelet/forge"
	"github.com/liqo-go/liqo/internal/virtualkubelet/node"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
	"github.com/liqo-go/liqo/internal/virtualkubelet/token"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reflector is the pod controller of the virtual kubelet: each pod bound
// to a virtual node runs as a pod of the same name in the provider
// namespace its namespace maps to. The provider pod's status flows back by
// watch; the provider sees one create and one delete per pod. Deleting the
// local pod deletes the provider pod with the same grace period, and the
// local pod goes once the provider pod is gone, as a kubelet confirms a
// deletion; a provider pod deleted or changed by someone else is created
// again or corrected; a provider pod with no local pod is deleted.
type Reflector struct {
	// Client reads pods, nodes and NamespaceOffloadings (cached) and writes
	// local pod status.
	Client client.Client
	// APIReader confirms, uncached, that a node is gone.
	APIReader client.Reader
	// Providers hold the provider pods.
	Providers provider.Providers
	// LocalClusterID labels the provider pods.
	LocalClusterID string
	// Recorder emits events on local pods.
	Recorder events.EventRecorder
	// Workers is how many pods are reflected at once; zero means 32.
	Workers int
	// Translate shows the address of a provider pod as this cluster
	// reaches it, through the network fabric; nil, or false (no agreement
	// on the network yet, an address outside the ranges agreed), hides
	// it.
	Translate func(ctx context.Context, providerID string, addr netip.Addr) (netip.Addr, bool)
	// Agreed says whether the network fabric has an agreement with the
	// provider, to tell why an address is hidden; nil means never.
	Agreed func(ctx context.Context, providerID string) bool
	// Transit, on an aggregator, gives each pod a consumer placed here
	// (its namespace aggregated) the address through which the consumer
	// reaches it; nil shows such pods no address.
	Transit Transit

	// latency times the steps of each pod's reflection.
	latency clock
}

// Transit assigns the addresses through which an aggregator's consumers
// reach their pods placed at providers (transit.Allocator).
type Transit interface {
	// Assign returns the address through which consumer reaches pod
	// (namespace/name here), which this cluster reaches at target, in
	// provider.
	Assign(ctx context.Context, consumer, pod, provider string, target netip.Addr) (netip.Addr, error)
	// Release forgets pod's address.
	Release(ctx context.Context, pod string) error
}

// Reconcile implements reconcile.Reconciler.
func (r *Reflector) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, err error) {
	var pod corev1.Pod
	err = r.Client.Get(ctx, req.NamespacedName, &pod)
	if apierrors.IsNotFound(err) {
		r.latency.forgetAll(req.NamespacedName)
		var released error
		if r.Transit != nil {
			released = r.Transit.Release(ctx, req.String())
		}
		return ctrl.Result{}, errors.Join(r.deleteOrphans(ctx, req.Namespace, req.Name, "", ""), released)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	providerID, poolAffinity, err := r.providerOf(ctx, &pod)
	if err != nil || providerID == "" {
		if err == nil {
			r.latency.forgetAll(req.NamespacedName) // not a virtual node's pod
		}
		return ctrl.Result{}, err
	}
	defer func() { provider.ReflectionFailed(providerID, provider.Pods, err) }()
	// A provider pod of an older pod of this name, or in another provider,
	// goes. One that cannot go now (its provider does not answer: a
	// failover made this pod anew elsewhere) does not hold this one up:
	// the pod is reflected all the same, and the orphan goes at a retry.
	if oerr := r.deleteOrphans(ctx, pod.Namespace, pod.Name, providerID, pod.UID); oerr != nil {
		defer func() {
			if err == nil {
				err = oerr
			}
		}()
	}
	var no offloadingv1alpha1.NamespaceOffloading
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	remoteNS, ok := no.ReadyRemoteNamespace(providerID)
	if !ok {
		if pod.DeletionTimestamp != nil {
			return ctrl.Result{}, r.confirmDeletion(ctx, &pod)
		}
		// The NamespaceOffloading's status, once ready, wakes this up.
		r.Recorder.Eventf(&pod, nil, corev1.EventTypeWarning, "NamespaceNotOffloaded", "Offload",
			"Namespace %s has no ready namespace in provider %s yet (see its NamespaceOffloading)", pod.Namespace, providerID)
		return ctrl.Result{}, nil
	}
	pns, err := r.Providers.Namespace(ctx, providerID, pod.Namespace, remoteNS)
	if errors.Is(err, provider.ErrNotSynced) {
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	remote, _ := pns.Get(provider.Pods, pod.Name).(*corev1.Pod)
	if remote != nil || pod.DeletionTimestamp != nil {
		r.latency.forget(StepCreate, req.NamespacedName) // nothing to create
	}
	// A provider pod of this name made for another (older) pod is not
	// this one's, even when its deletion above could not be tried yet (a
	// provider before it did not answer): it goes, and this pod is made
	// once it is gone.
	if remote != nil && remote.Annotations[offloadingv1alpha1.OriginUIDAnnotation] != string(pod.UID) && pod.DeletionTimestamp == nil {
		if remote.DeletionTimestamp == nil {
			if err := r.deleteRemote(ctx, pns, remote, nil); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, nil // the provider pod's deletion wakes this up again
	}

	if pod.DeletionTimestamp != nil {
		switch {
		case remote == nil:
			return ctrl.Result{}, r.confirmDeletion(ctx, &pod)
		case remote.DeletionTimestamp == nil:
			return ctrl.Result{}, r.deleteRemote(ctx, pns, remote, pod.DeletionGracePeriodSeconds)
		}
		return ctrl.Result{}, nil // the provider pod's deletion wakes this up again
	}
	desired := RemotePod(&pod, remoteNS, r.LocalClusterID)
	// A pool's pod runs where the pool is.
	if poolAffinity != nil {
		if desired.Spec.Affinity == nil {
			desired.Spec.Affinity = &corev1.Affinity{}
		}
		desired.Spec.Affinity.NodeAffinity = poolAffinity
	}
	// A pod's DNS is chosen when it is made there, and stays.
	if remote == nil {
		for _, st := range no.Status.RemoteNamespaces {
			if st.ClusterID == providerID {
				WithConsumerDNS(desired, pod.Namespace, st.DNS)
			}
		}
	} else if _, ok := remote.Annotations[offloadingv1alpha1.ConsumerDNSAnnotation]; ok && remote.Spec.DNSPolicy == corev1.DNSNone {
		MarkConsumerDNS(desired)
	}
	finished := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	// The token comes first: the provider pod mounts it.
	var refresh time.Duration
	if token.Requested(&pod) && !finished {
		if refresh, err = token.Ensure(ctx, r.Client, pns, &pod, r.LocalClusterID); err != nil {
			r.Recorder.Eventf(&pod, nil, corev1.EventTypeWarning, "ServiceAccountTokenFailed", "Offload", "%v", err)
			return ctrl.Result{}, err
		}
	}
	result := ctrl.Result{RequeueAfter: refresh}
	if remote == nil {
		// Its address at the provider went with it: no route may lead
		// there, where the provider may give it to another pod.
		if r.Transit != nil && no.Labels[brokerv1alpha1.AggregatedLabel] == "true" {
			if err := r.Transit.Release(ctx, pod.Namespace+"/"+pod.Name); err != nil {
				return ctrl.Result{}, err
			}
		}
		if finished {
			r.latency.forget(StepCreate, req.NamespacedName)
			return ctrl.Result{}, nil // finished: nothing to run again
		}
		// Ephemeral containers are added after: a pod is created without.
		created := desired.DeepCopy()
		created.Spec.EphemeralContainers = nil
		return result, r.createRemote(ctx, pns, &pod, created)
	}
	drifted := podDrifted(remote, desired)
	withEphemeral, addEphemeral := missingEphemeral(remote, desired, rejectedEphemeral(&pod))
	withResources, resize := resizedPod(remote, desired)
	// A resize the provider found infeasible is not tried again until the
	// consumer's next one (a new generation).
	pending := resizePendingOf(&pod)
	infeasible := resize && pending != nil && pending.Reason == corev1.PodReasonInfeasible && pending.ObservedGeneration == pod.Generation
	var resizeErr, ephemeralErr error
	resized := false
	switch {
	case remote.DeletionTimestamp != nil:
	case drifted:
		corrected := correctPod(remote, desired)
		if err := pns.Update(ctx, corrected); err != nil {
			return ctrl.Result{}, fmt.Errorf("correcting provider pod %s/%s: %w", remoteNS, remote.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Provider pod corrected", "provider", providerID, "pod", remoteNS+"/"+remote.Name)
	case addEphemeral:
		// kubectl debug: the ephemeral containers added here are added
		// there, once the rest is in step (the update's event comes back).
		if ephemeralErr = pns.UpdateSubresource(ctx, withEphemeral, provider.SubresourceEphemeralContainers); ephemeralErr != nil && !apierrors.IsConflict(ephemeralErr) {
			r.Recorder.Eventf(&pod, nil, corev1.EventTypeWarning, "ProviderPodFailed", "Offload", "Adding ephemeral containers in provider %s: %v", providerID, ephemeralErr)
		}
	case resize && !infeasible:
		// In-place resize: the resources changed here change there,
		// through the same subresource; the provider's kubelet actuates
		// them and reports its resize conditions, which come back.
		resizeErr = pns.UpdateSubresource(ctx, withResources, provider.SubresourceResize)
		resized = resizeErr == nil
	}
	// What the pod shows of a resize the provider does not have yet: its
	// refusal, or, while nothing new is known, what it showed.
	var resizeCond *corev1.PodCondition
	switch {
	case resizeErr != nil && !apierrors.IsConflict(resizeErr):
		resizeCond = resizeRefused(&pod, resizeErr)
	case resize && !resized && pending != nil:
		resizeCond = pending
	}
	infeasible = resizeCond != nil && resizeCond.Reason == corev1.PodReasonInfeasible
	// An ephemeral container refused for good is as far as it goes: the
	// pod is in step otherwise.
	refused := ephemeralErr != nil && rejectedForGood(ephemeralErr)
	drifted = drifted || (addEphemeral && !refused) || (resize && !infeasible)
	status := LocalStatus(&pod, remote)
	if refused {
		rejectEphemeral(&status, remote, withEphemeral, providerID, ephemeralErr)
	}
	observeGeneration(&status, &pod, remote, drifted)
	if resizeCond != nil && setResizePending(&status, &pod, *resizeCond) {
		r.Recorder.Eventf(&pod, nil, corev1.EventTypeWarning, "ResizeRefused", "Resize", "Provider %s refused the resize: %v", providerID, resizeErr)
	}
	opaque := no.Labels[brokerv1alpha1.AggregatedLabel] == "true"
	switch origin := pod.Labels[offloadingv1alpha1.OriginClusterLabel]; {
	case opaque:
		// A consumer this broker's aggregator serves learns no
		// provider, not even one a provider that is a broker names.
		dropProviderAddress(&status)
	case origin != "" && origin != r.LocalClusterID:
		// This cluster runs the pod for a consumer, in turn in
		// providerID (a broker): it says where, for the consumer's
		// direct path.
		setProviderAddress(&status, providerID)
	}
	r.translate(ctx, providerID, &status, opaque)
	var transitErr error
	if opaque {
		transitErr = r.transit(ctx, &pod, providerID, &status)
	}
	if err := r.setHostIPs(ctx, &pod, &status); err != nil {
		return ctrl.Result{}, err
	}
	if !statusReflected(&pod.Status, &status) {
		// The provider's status is authoritative: a patch without
		// resourceVersion cannot conflict with the consumer's own writers.
		data, err := statusPatch(&status)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Client.Status().Patch(ctx, &pod, client.RawPatch(types.MergePatchType, data)); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		r.latency.done(StepStatus, req.NamespacedName)
	} else {
		r.latency.forget(StepStatus, req.NamespacedName)
	}
	switch {
	case errors.Is(transitErr, transit.ErrNoNetwork):
		// Until the consumer's network is agreed: no address to give,
		// nothing failed.
		if result.RequeueAfter == 0 || result.RequeueAfter > noNetworkRetry {
			result.RequeueAfter = noNetworkRetry
		}
	case transitErr != nil:
		// The status flows meanwhile, without an address.
		return result, fmt.Errorf("the transit address of pod %s/%s: %w", pod.Namespace, pod.Name, transitErr)
	}
	if ephemeralErr != nil && !refused {
		// The status flows meanwhile; the ephemeral containers are tried
		// again.
		return result, fmt.Errorf("adding ephemeral containers to provider pod %s/%s: %w", remoteNS, remote.Name, ephemeralErr)
	}
	if resizeErr != nil && resizeDeferred(resizeErr) {
		// A refusal that may pass by itself is tried again; any other
		// waits for the consumer's next resize.
		return result, fmt.Errorf("resizing provider pod %s/%s: %w", remoteNS, remote.Name, resizeErr)
	}
	return result, nil
}

// resizeDeferred says whether the provider's refusal of a resize may pass
// by itself: its quota (the consumer's other pods end), its pod's
// resourceVersion moved on, the provider unreachable. Any other answer
// (invalid, forbidden by a policy or by the peering's rights, no resize
// subresource) will not change by asking again.
func resizeDeferred(err error) bool {
	switch {
	case apierrors.IsConflict(err):
		return true
	case apierrors.IsForbidden(err):
		return quotaExceeded(err)
	case apierrors.IsInvalid(err), apierrors.IsNotFound(err), apierrors.IsBadRequest(err), apierrors.IsMethodNotSupported(err):
		return false
	}
	return true
}

// resizePendingOf is pod's PodResizePending condition, or nil.
func resizePendingOf(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodResizePending {
			return pod.Status.Conditions[i].DeepCopy()
		}
	}
	return nil
}

// resizeRefused is what a kubelet says of a resize that waits, for the
// provider's refusal err: Deferred when it may pass by itself (its
// quota), Infeasible otherwise (invalid there, such as a resize changing
// its pod's QoS class; forbidden by a policy), with its answer.
func resizeRefused(pod *corev1.Pod, err error) *corev1.PodCondition {
	cond := &corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred,
		ObservedGeneration: pod.Generation, LastTransitionTime: metav1.Now(), Message: fmt.Sprintf("The provider refused the resize: %v", err)}
	if !resizeDeferred(err) {
		cond.Reason = corev1.PodReasonInfeasible
	}
	return cond
}

// setResizePending puts cond in st, keeping the time of the condition the
// pod shows when its reason is the same; it says whether the reason is
// new.
func setResizePending(st *corev1.PodStatus, pod *corev1.Pod, cond corev1.PodCondition) bool {
	shown := resizePendingOf(pod)
	same := shown != nil && shown.Reason == cond.Reason
	if same {
		cond.LastTransitionTime = shown.LastTransitionTime
	}
	st.Conditions = append(slices.DeleteFunc(st.Conditions, func(c corev1.PodCondition) bool { return c.Type == cond.Type }), cond)
	return !same
}

// setHostIPs shows, as a pod's host addresses, those of its virtual node,
// as a kubelet shows its node's: the node the consumer scheduled it on, whose
// kubelet API (logs, exec) answers for it. A node with no InternalIP
// address leaves them empty.
func (r *Reflector) setHostIPs(ctx context.Context, pod *corev1.Pod, st *corev1.PodStatus) error {
	var n corev1.Node
	if err := r.Client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, &n); err != nil {
		return client.IgnoreNotFound(err)
	}
	st.HostIP, st.HostIPs = "", nil
	seen := map[bool]bool{}
	for _, a := range n.Status.Addresses {
		ip, err := netip.ParseAddr(a.Address)
		if a.Type != corev1.NodeInternalIP || err != nil || seen[ip.Is4()] {
			continue
		}
		seen[ip.Is4()] = true // one address per family, as the kubelet
		if st.HostIP == "" {
			st.HostIP = a.Address
		}
		st.HostIPs = append(st.HostIPs, corev1.HostIP{IP: a.Address})
	}
	return nil
}

// translate sets the pod addresses of st to how this cluster reaches them
// through the network fabric, and says so in a condition. An address the
// fabric cannot translate (no agreement with the provider yet, or outside
// the ranges agreed with it) is not shown: the provider chose it, and this
// cluster's EndpointSlices would send its own clients to it. The
// provider's node addresses (hostIP) are never shown (setHostIPs shows the
// virtual node's).
// Opaque (a pod this broker runs for a consumer its aggregator serves)
// says neither the provider nor the addresses it reported.
func (r *Reflector) translate(ctx context.Context, providerID string, st *corev1.PodStatus, opaque bool) {
	st.HostIP, st.HostIPs = "", nil
	reported := podIPs(st)
	if len(reported) == 0 {
		return
	}
	if r.translateDirect(ctx, providerID, st) {
		return
	}
	var shown []corev1.PodIP
	var hidden []string
	for _, ip := range reported {
		a, err := netip.ParseAddr(ip.IP)
		if err == nil && r.Translate != nil {
			if t, ok := r.Translate(ctx, providerID, a); ok {
				shown = append(shown, corev1.PodIP{IP: t.String()})
				continue
			}
		}
		hidden = append(hidden, ip.IP)
	}
	st.PodIPs, st.PodIP = shown, ""
	if len(shown) > 0 {
		st.PodIP = shown[0].IP
	}
	cond := corev1.PodCondition{Type: offloadingv1alpha1.ConditionPodAddress, Status: corev1.ConditionTrue,
		Reason: offloadingv1alpha1.ReasonAddressTranslated, Message: "The provider's address, as this cluster reaches it through the tunnel"}
	who, addrs := "provider "+providerID, " ("+strings.Join(hidden, ", ")+")"
	if opaque {
		who, addrs = "its provider", ""
	}
	switch {
	case len(hidden) == 0:
	case r.Translate == nil || !r.agreed(ctx, providerID):
		cond.Status, cond.Reason = corev1.ConditionFalse, offloadingv1alpha1.ReasonNoNetwork
		cond.Message = fmt.Sprintf("No network is agreed with %s: its pod addresses%s would not be reachable from here, and are not shown", who, addrs)
	default:
		cond.Status, cond.Reason = corev1.ConditionFalse, offloadingv1alpha1.ReasonAddressOutsideRanges
		cond.Message = fmt.Sprintf("The pod's addresses reported by %s are outside the ranges agreed with it%s: they are not shown", who, addrs)
	}
	st.Conditions = append(slices.DeleteFunc(st.Conditions, func(c corev1.PodCondition) bool { return c.Type == cond.Type }), cond)
}

// noNetworkRetry is how often an opaque pod asks again for a transit
// address while its consumer has no network agreed.
const noNetworkRetry = 15 * time.Second

// transit shows, instead of the address at which this cluster, an
// aggregator, reaches an opaque pod at its provider, the address of this
// cluster's external range through which the pod's consumer reaches it
// (this cluster's gateway leads it there): the consumer never reads a
// provider's address, nor this cluster's view of one. The consumer is
// the namespace's, as this cluster labelled it (not the pod's label,
// which the consumer writes).
//
// A pod that ended or is going loses its route: its provider gives its
// address to another pod, maybe another consumer's, soon after.
func (r *Reflector) transit(ctx context.Context, pod *corev1.Pod, providerID string, st *corev1.PodStatus) error {
	shown := podIPs(st)
	ended := st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed || pod.DeletionTimestamp != nil
	if r.Transit != nil && (ended || len(shown) == 0) {
		st.PodIP, st.PodIPs = "", nil
		return r.Transit.Release(ctx, pod.Namespace+"/"+pod.Name)
	}
	if len(shown) == 0 {
		return nil // nothing to show; the address condition says why
	}
	st.PodIP, st.PodIPs = "", nil
	cond := corev1.PodCondition{Type: offloadingv1alpha1.ConditionPodAddress, Status: corev1.ConditionFalse, Reason: offloadingv1alpha1.ReasonNoTransit,
		Message: "This cluster offers its consumer no transit to the pod: its address at its provider is not shown"}
	defer func() {
		st.Conditions = append(slices.DeleteFunc(st.Conditions, func(c corev1.PodCondition) bool { return c.Type == cond.Type }), cond)
	}()
	var ns corev1.Namespace
	if err := r.Client.Get(ctx, client.ObjectKey{Name: pod.Namespace}, &ns); err != nil {
		return client.IgnoreNotFound(err)
	}
	consumer := ns.Labels[offloadingv1alpha1.OriginClusterLabel]
	var target netip.Addr
	for _, ip := range shown {
		if a, err := netip.ParseAddr(ip.IP); err == nil && a.Unmap().Is4() {
			target = a.Unmap()
			break
		}
	}
	if r.Transit == nil || consumer == "" || !target.IsValid() {
		return nil
	}
	addr, err := r.Transit.Assign(ctx, consumer, pod.Namespace+"/"+pod.Name, providerID, target)
	if err != nil {
		cond.Message = fmt.Sprintf("No transit address for the pod yet: %v", err)
		return err
	}
	st.PodIP, st.PodIPs = addr.String(), []corev1.PodIP{{IP: addr.String()}}
	cond.Status, cond.Reason = corev1.ConditionTrue, offloadingv1alpha1.ReasonTransit
	cond.Message = "The address, in this cluster's external range, through which the consumer reaches the pod: this cluster's gateway leads it there"
	return nil
}

// agreed says whether the network fabric has an agreement with the
// provider: any of its addresses translates, its pod range's first one
// at least.
func (r *Reflector) agreed(ctx context.Context, providerID string) bool {
	if r.Agreed == nil {
		return false
	}
	return r.Agreed(ctx, providerID)
}

// providerOf returns the provider of the virtual node pod is bound to, or
// "" for a pod not bound to a virtual node, and, for the node of one of
// the provider's pools, the node affinity of the pod there
// (node.PoolAffinity).
func (r *Reflector) providerOf(ctx context.Context, pod *corev1.Pod) (string, *corev1.NodeAffinity, error) {
	if pod.Spec.NodeName == "" {
		return "", nil, nil
	}
	var n corev1.Node
	err := r.Client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, &n)
	if apierrors.IsNotFound(err) {
		return "", nil, r.deleteIfNodeGone(ctx, pod)
	}
	if err != nil {
		return "", nil, err
	}
	if !sharing.IsVirtual(&n) {
		return "", nil, nil
	}
	return n.Labels[offloadingv1alpha1.RemoteClusterLabel], node.PoolAffinity(&n), nil
}

// deleteIfNodeGone deletes an offloadable pod bound to a node that no
// longer exists: a virtual node removed while the scheduler still placed
// pods on it. No kubelet will ever run it, and the pod garbage collector
// would wait 40 s; the API server, not the cache, confirms the node is gone.
func (r *Reflector) deleteIfNodeGone(ctx context.Context, pod *corev1.Pod) error {
	if r.APIReader == nil || !slices.ContainsFunc(pod.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == offloadingv1alpha1.VirtualNodeTaint }) {
		return nil
	}
	err := r.APIReader.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, &corev1.Node{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Deleting a pod bound to a removed virtual node", "node", pod.Spec.NodeName)
	return r.confirmDeletion(ctx, pod)
}

// ReasonWaitingForProviderQuota is the event of a pod the provider's
// quota for its namespace (its share of the offer) does not yet admit.
const ReasonWaitingForProviderQuota = "WaitingForProviderQuota"

// quotaExceeded says whether err is a ResourceQuota's refusal.
func quotaExceeded(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota")
}

// rejectedForGood says whether the provider's refusal of a pod will not
// change by asking again: an invalid spec, its Pod Security level, an
// admission policy. Any other refusal (RBAC not yet granted, a namespace
// being deleted, a quota) may pass later and is retried.
func rejectedForGood(err error) bool {
	if apierrors.IsInvalid(err) {
		return true
	}
	msg := err.Error()
	return apierrors.IsForbidden(err) && (strings.Contains(msg, "violates PodSecurity") || strings.Contains(msg, "ValidatingAdmissionPolicy"))
}

func (r *Reflector) createRemote(ctx context.Context, pns provider.Namespace, pod, desired *corev1.Pod) error {
	err := pns.Create(ctx, desired)
	switch {
	case apierrors.IsAlreadyExists(err):
		// The watch has not shown it yet: it will wake this up.
		return nil
	case err != nil && rejectedForGood(err):
		r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, offloadingv1alpha1.ReasonProviderRejected, "Offload", "Provider %s refused the pod: %v", pns.Provider(), err)
		data, perr := json.Marshal(map[string]any{"status": map[string]any{
			"phase": corev1.PodFailed, "reason": offloadingv1alpha1.ReasonProviderRejected,
			"message": fmt.Sprintf("Provider %s refused the pod: %v", pns.Provider(), err),
		}})
		if perr != nil {
			return perr
		}
		return client.IgnoreNotFound(r.Client.Status().Patch(ctx, pod, client.RawPatch(types.MergePatchType, data)))
	case err != nil && quotaExceeded(err):
		// Its namespace's share of the offer: it grows once the
		// consumer's other pods there end (or this one's turn comes).
		r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonWaitingForProviderQuota, "Offload", "Waiting for room in provider %s's quota: %v", pns.Provider(), err)
		return fmt.Errorf("creating provider pod %s/%s in %s: %w", desired.Namespace, desired.Name, pns.Provider(), err)
	case err != nil:
		r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, "ProviderPodFailed", "Offload", "Creating the pod in provider %s: %v", pns.Provider(), err)
		return fmt.Errorf("creating provider pod %s/%s in %s: %w", desired.Namespace, desired.Name, pns.Provider(), err)
	}
	r.latency.done(StepCreate, client.ObjectKeyFromObject(pod))
	return nil
}

func (r *Reflector) deleteRemote(ctx context.Context, pns provider.Namespace, remote *corev1.Pod, grace *int64) error {
	if err := pns.Delete(ctx, provider.Pods, remote.Name, remote.UID, grace); err != nil {
		return fmt.Errorf("deleting provider pod %s/%s in %s: %w", remote.Namespace, remote.Name, pns.Provider(), err)
	}
	return nil
}

// confirmDeletion removes the local pod once nothing runs for it, as a
// kubelet does once the containers stopped.
func (r *Reflector) confirmDeletion(ctx context.Context, pod *corev1.Pod) error {
	err := r.Client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: ptr.To(pod.UID)})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// deleteOrphans deletes the provider pods named name made for local
// namespace ns, except the one in provider keepProvider made for keepUID.
func (r *Reflector) deleteOrphans(ctx context.Context, ns, name, keepProvider string, keepUID types.UID) error {
	// A provider that does not answer does not keep the others' orphans.
	var errs []error
	for _, pns := range r.Providers.Open(ns) {
		remote, ok := pns.Get(provider.Pods, name).(*corev1.Pod)
		if !ok {
			continue
		}
		if pns.Provider() == keepProvider && remote.Annotations[offloadingv1alpha1.OriginUIDAnnotation] == string(keepUID) {
			continue
		}
		if remote.DeletionTimestamp != nil {
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Deleting orphan provider pod", "provider", pns.Provider(), "pod", remote.Namespace+"/"+remote.Name)
		if err := r.deleteRemote(ctx, pns, remote, nil); err != nil {
			errs = append(errs, err)
		}
	}
	// A token no pod of this name and UID uses any more goes too.
	errs = append(errs, token.Delete(ctx, r.Providers, ns, name, keepProvider, string(keepUID)))
	return errors.Join(errs...)
}

// SetupWithManager registers the reflector.
func (r *Reflector) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Providers == nil || r.LocalClusterID == "" {
		return fmt.Errorf("Reflector needs Client, Providers and LocalClusterID")
	}
	if r.Recorder == nil {
		r.Recorder = LiveNamespaces{EventRecorder: mgr.GetEventRecorder("liqo-virtual-kubelet"), Reader: mgr.GetClient(), Live: mgr.GetAPIReader()}
	}
	workers := r.Workers
	if workers == 0 {
		workers = 32
	}
	// Only bound pods concern a kubelet; a pod's status written back by
	// this reflector does not need another look, but a pod that turns
	// unready does: the node lifecycle controller marks the pods of a
	// NotReady virtual node so, and under load it may do it after the
	// node is Ready again, when nothing else would show the provider's
	// status anew.
	bound := predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return e.Object.(*corev1.Pod).Spec.NodeName != "" },
		DeleteFunc:  func(e event.DeleteEvent) bool { return e.Object.(*corev1.Pod).Spec.NodeName != "" },
		GenericFunc: func(event.GenericEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
			return n.Spec.NodeName != "" && (o.Spec.NodeName != n.Spec.NodeName || n.Generation != o.Generation ||
				!n.DeletionTimestamp.Equal(o.DeletionTimestamp) || !maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations) ||
				len(o.Spec.EphemeralContainers) != len(n.Spec.EphemeralContainers) ||
				forge.PodReady(o) && !forge.PodReady(n))
		},
	}
	enqueuePods := func(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
		var pods corev1.PodList
		if err := r.Client.List(ctx, &pods, opts...); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(pods.Items))
		for i := range pods.Items {
			if pods.Items[i].Spec.NodeName != "" {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pods.Items[i])})
			}
		}
		return reqs
	}
	// A virtual node Ready again: its pods' status, which the node
	// lifecycle controller may have changed meanwhile, is reflected again.
	nodeReady := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return enqueuePods(ctx, client.MatchingFields{node.PodsByNodeField: o.GetName()})
	})
	// A namespace offloaded to one more provider: its bound pods that
	// waited for it go now.
	offloaded := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return enqueuePods(ctx, client.InNamespace(o.GetNamespace()))
	})
	readyChanged := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
			return sharing.IsVirtual(n) && node.Ready(o) != node.Ready(n)
		},
	}
	b := ctrl.NewControllerManagedBy(mgr).
		// Pods are watched with the clock of their creation in the
		// provider started as each event arrives.
		Watches(&corev1.Pod{}, starting(&r.latency, StepCreate, boundAndLive, &handler.EnqueueRequestForObject{}), builder.WithPredicates(bound)).
		Watches(&corev1.Node{}, nodeReady, builder.WithPredicates(readyChanged)).
		Watches(&offloadingv1alpha1.NamespaceOffloading{}, offloaded).
		WatchesRawSource(r.Providers.Source(provider.Pods, starting(&r.latency, StepStatus, nil, &handler.EnqueueRequestForObject{}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers, RateLimiter: retryLimiter()}).
		Named("virtualkubelet-pods")
	if r.Translate != nil {
		// The network agreed with a provider, or changed: its pods'
		// addresses are shown again.
		remapped := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			var nodes corev1.NodeList
			if err := r.Client.List(ctx, &nodes, client.MatchingLabels{offloadingv1alpha1.RemoteClusterLabel: o.GetName()}); err != nil {
				return nil
			}
			var reqs []reconcile.Request
			for _, n := range nodes.Items {
				if sharing.IsVirtual(&n) {
					reqs = append(reqs, enqueuePods(ctx, client.MatchingFields{node.PodsByNodeField: n.Name})...)
				}
			}
			// And the pods a broker runs in that cluster, shown at their
			// address there when this cluster has a tunnel to it.
			var all corev1.NodeList
			if err := r.Client.List(ctx, &all, client.MatchingLabels{offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue}); err != nil {
				return reqs
			}
			for _, n := range all.Items {
				var pods corev1.PodList
				if err := r.Client.List(ctx, &pods, client.MatchingFields{node.PodsByNodeField: n.Name}); err != nil {
					continue
				}
				for i := range pods.Items {
					if slices.ContainsFunc(pods.Items[i].Status.Conditions, func(c corev1.PodCondition) bool {
						return c.Type == offloadingv1alpha1.ConditionProviderAddress && c.Reason == o.GetName()
					}) {
						reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pods.Items[i])})
					}
				}
			}
			return reqs
		})
		b = b.Watches(&netv1alpha1.TunnelEndpoint{}, remapped, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	return b.Complete(r)
}

// podIPs returns the addresses st reports.
func podIPs(st *corev1.PodStatus) []corev1.PodIP {
	if len(st.PodIPs) == 0 && st.PodIP != "" {
		return []corev1.PodIP{{IP: st.PodIP}}
	}
	return st.PodIPs
}

// setProviderAddress says, on the status of a pod this cluster runs for a
// consumer in provider, where it runs: the provider and the pod's
// addresses there, as the provider reported them.
func setProviderAddress(st *corev1.PodStatus, provider string) {
	dropProviderAddress(st)
	var ips []string
	for _, ip := range podIPs(st) {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 {
		return
	}
	st.Conditions = append(st.Conditions, corev1.PodCondition{Type: offloadingv1alpha1.ConditionProviderAddress, Status: corev1.ConditionTrue,
		Reason: provider, Message: strings.Join(ips, ",")})
}

// dropProviderAddress removes the ProviderAddress condition of st.
func dropProviderAddress(st *corev1.PodStatus) {
	st.Conditions = slices.DeleteFunc(st.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == offloadingv1alpha1.ConditionProviderAddress
	})
}

// translateDirect shows, for a pod a broker (providerID) runs in another
// provider, the pod's addresses there as this cluster reaches them
// through its own tunnel with that provider, when it has one and every
// address is inside what was agreed with it. What the broker says cannot
// point this cluster anywhere else: an address outside that provider's
// agreed ranges does not translate, and the broker's own address is
// shown instead.
func (r *Reflector) translateDirect(ctx context.Context, providerID string, st *corev1.PodStatus) bool {
	var pa *corev1.PodCondition
	for i := range st.Conditions {
		if st.Conditions[i].Type == offloadingv1alpha1.ConditionProviderAddress {
			pa = &st.Conditions[i]
		}
	}
	if pa == nil || r.Translate == nil || pa.Status != corev1.ConditionTrue || pa.Reason == providerID || pa.Reason == r.LocalClusterID ||
		len(validation.IsDNS1123Label(pa.Reason)) > 0 || pa.Message == "" {
		return false
	}
	var shown []corev1.PodIP
	for ip := range strings.SplitSeq(pa.Message, ",") {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			return false
		}
		t, ok := r.Translate(ctx, pa.Reason, a)
		if !ok {
			return false
		}
		shown = append(shown, corev1.PodIP{IP: t.String()})
	}
	if len(shown) == 0 || len(shown) > 2 {
		return false
	}
	st.PodIPs, st.PodIP = shown, shown[0].IP
	cond := corev1.PodCondition{Type: offloadingv1alpha1.ConditionPodAddress, Status: corev1.ConditionTrue, Reason: offloadingv1alpha1.ReasonAddressDirect,
		Message: fmt.Sprintf("The pod runs in provider %s, which broker %s chose: its address there, as this cluster reaches it through its own tunnel with %s", pa.Reason, providerID, pa.Reason)}
	st.Conditions = append(slices.DeleteFunc(st.Conditions, func(c corev1.PodCondition) bool { return c.Type == cond.Type }), cond)
	return true
}

// maxRetryDelay bounds the back-off of a pod whose reflection fails. A
// provider's refusal that passes later (its quota raised once another
// namespace's share went down, its RBAC granted) wakes nothing here: the
// next try is what finds it, and the default back-off, doubling up to
// 1000 s, would let a pod wait minutes after its quota was raised. A
// kubelet retries a pod's sync as often.
const maxRetryDelay = 10 * time.Second

// retryLimiter is controller-runtime's default rate limiter with each
// pod's back-off capped at maxRetryDelay.
func retryLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxRetryDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}
