// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

// +kubebuilder:rbac:groups=offloading.liqo.io,resources=shadowpods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=offloading.liqo.io,resources=shadowpods/status,verbs=get;update;patch

// ShadowPod conditions.
const (
	// ConditionPodCreated is True once the ShadowPod's pod was made, False
	// with the provider's refusal.
	ConditionPodCreated = "PodCreated"
	// ReasonPodMade: the pod kept now was made.
	ReasonPodMade = "PodMade"
	// ReasonPodRefused: this cluster refused the pod (a quota, an
	// admission policy, an invalid spec); the message says why.
	ReasonPodRefused = "PodRefused"
	// ReasonNameTaken: a pod of the ShadowPod's name exists that it does
	// not keep (an older ShadowPod's, going with it, or one made by hand).
	ReasonNameTaken = "NameTaken"
)

// nameTakenRetry is how soon a ShadowPod whose pod name is taken by a pod
// it is not told of looks again.
const nameTakenRetry = 10 * time.Second

// ShadowPodReconciler runs in the provider: it keeps, for each ShadowPod a
// consumer's virtual kubelet wrote, a pod of the same name made from its
// template and owned by it, and makes it again when it is deleted or
// evicted (the consumer may be unreachable for minutes meanwhile). A pod
// that ended is not made again, nor one whose name is taken. The pod
// goes with its ShadowPod (the garbage collector). The controller manager
// makes the pods with the rights of ShadowPodKeeperRole, which it binds
// to itself in each namespace made for a consumer, and nowhere else.
type ShadowPodReconciler struct {
	// Client reads ShadowPods and pods from a cache that trims both
	// (TrimShadowPod: no template), and writes them.
	Client client.Client
	// APIReader reads a ShadowPod whole when its pod is made.
	APIReader client.Reader
	// FirstPodGrace is how long the pod of a new ShadowPod is left to
	// the virtual kubelet that wrote it, which makes it at once (and so
	// hears the provider's refusal itself): made here only when none
	// came by then. Zero: made at once.
	FirstPodGrace time.Duration
}

// DefaultFirstPodGrace is the controller manager's FirstPodGrace.
const DefaultFirstPodGrace = 10 * time.Second

// Reconcile implements reconcile.Reconciler.
func (r *ShadowPodReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var sp offloadingv1alpha1.ShadowPod
	if err := r.Client.Get(ctx, req.NamespacedName, &sp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sp.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // its pod goes with it
	}
	status := *sp.Status.DeepCopy()
	var pod corev1.Pod
	err := r.Client.Get(ctx, req.NamespacedName, &pod)
	switch {
	case err == nil:
		if owner := metav1.GetControllerOf(&pod); owner == nil || owner.UID != sp.UID {
			// Its deletion, if it goes, wakes this up (pods are mapped by
			// name).
			setShadowCondition(&status, sp.Generation, metav1.ConditionFalse, ReasonNameTaken,
				fmt.Sprintf("pod %s exists and is not this ShadowPod's: it is made once that one is gone", pod.Name))
			// A pod made by hand is not watched: looked at again.
			return ctrl.Result{RequeueAfter: nameTakenRetry}, r.patchStatus(ctx, &sp, status)
		}
		// Kept: nothing is written while it runs; an end is.
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			status.Ended = pod.Status.Phase
		}
		if c := meta.FindStatusCondition(status.Conditions, ConditionPodCreated); c != nil && c.Status != metav1.ConditionTrue {
			setShadowCondition(&status, sp.Generation, metav1.ConditionTrue, ReasonPodMade, "")
		}
		return ctrl.Result{}, r.patchStatus(ctx, &sp, status)
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	}
	if status.Ended != "" {
		// A pod that ended is the consumer's to follow up, as one of its
		// own: run again, it would do its work twice. Gone, it leaves its
		// ShadowPod nothing to keep: it goes too, and frees its place in
		// the consumer's quota.
		ctrl.LoggerFrom(ctx).Info("The pod ended and went: its ShadowPod goes", "ended", status.Ended)
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, &sp, client.Preconditions{UID: ptr.To(sp.UID)}))
	}
	if meta.FindStatusCondition(status.Conditions, ConditionPodCreated) == nil {
		if wait := r.FirstPodGrace - time.Since(sp.CreationTimestamp.Time); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	// The template is not cached: read it now.
	var whole offloadingv1alpha1.ShadowPod
	if err := r.APIReader.Get(ctx, req.NamespacedName, &whole); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if whole.UID != sp.UID || !whole.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // replaced or going meanwhile: its own event comes
	}
	made, err := ShadowPodPod(&whole)
	if err != nil {
		// Its writer's error alone: tried again once the template changes.
		setShadowCondition(&status, sp.Generation, metav1.ConditionFalse, ReasonPodRefused, err.Error())
		return ctrl.Result{}, r.patchStatus(ctx, &sp, status)
	}
	err = r.Client.Create(ctx, made)
	switch {
	case apierrors.IsAlreadyExists(err):
		return ctrl.Result{}, nil // the cache lags: the pod's event comes
	case err != nil:
		setShadowCondition(&status, sp.Generation, metav1.ConditionFalse, ReasonPodRefused, err.Error())
		if perr := r.patchStatus(ctx, &sp, status); perr != nil {
			return ctrl.Result{}, perr
		}
		return ctrl.Result{}, fmt.Errorf("making pod %s/%s: %w", made.Namespace, made.Name, err)
	}
	status.Recreations++
	setShadowCondition(&status, sp.Generation, metav1.ConditionTrue, ReasonPodMade, "")
	ctrl.LoggerFrom(ctx).Info("Pod made", "pod", made.Name, "uid", made.UID, "recreations", status.Recreations)
	return ctrl.Result{}, r.patchStatus(ctx, &sp, status)
}

// ShadowPodPod is the pod sp keeps: its template, named and placed as sp,
// owned by it, labelled with sp's origin (which the admission policy
// liqo-offloaded-objects checked on sp itself) whatever the template
// says. An error: the template's spec is no PodSpec.
func ShadowPodPod(sp *offloadingv1alpha1.ShadowPod) (*corev1.Pod, error) {
	spec, err := sp.Spec.Template.PodSpec()
	if err != nil {
		return nil, err
	}
	labels := maps.Clone(sp.Spec.Template.Labels)
	if origin, ok := sp.Labels[offloadingv1alpha1.OriginClusterLabel]; ok {
		if labels == nil {
			labels = map[string]string{}
		}
		labels[offloadingv1alpha1.OriginClusterLabel] = origin
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: sp.Name, Namespace: sp.Namespace,
			Labels: labels, Annotations: maps.Clone(sp.Spec.Template.Annotations),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sp, offloadingv1alpha1.GroupVersion.WithKind("ShadowPod"))},
		},
		Spec: *spec,
	}
	// Its owner may be deleted at once: nothing waits for the pod.
	pod.OwnerReferences[0].BlockOwnerDeletion = nil
	return pod, nil
}

// shortMessage cuts a refusal to what a condition's message holds (32768
// bytes; a policy's message may quote the whole pod), on a rune boundary.
func shortMessage(s string) string {
	const most = 1024
	if len(s) <= most {
		return s
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func setShadowCondition(st *offloadingv1alpha1.ShadowPodStatus, generation int64, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: ConditionPodCreated, Status: status, Reason: reason, Message: shortMessage(message), ObservedGeneration: generation,
	})
}

// patchStatus writes status when it changed, by a merge patch of the
// status alone: the cached ShadowPod has no template to send back.
func (r *ShadowPodReconciler) patchStatus(ctx context.Context, sp *offloadingv1alpha1.ShadowPod, status offloadingv1alpha1.ShadowPodStatus) error {
	if shadowStatusEqual(&sp.Status, &status) {
		return nil
	}
	data, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(r.Client.Status().Patch(ctx, sp, client.RawPatch(types.MergePatchType, data)))
}

func shadowStatusEqual(a, b *offloadingv1alpha1.ShadowPodStatus) bool {
	if a.Ended != b.Ended || a.Recreations != b.Recreations || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for _, c := range b.Conditions {
		o := meta.FindStatusCondition(a.Conditions, c.Type)
		if o == nil || o.Status != c.Status || o.Reason != c.Reason || o.Message != c.Message || o.ObservedGeneration != c.ObservedGeneration {
			return false
		}
	}
	return true
}

// TrimShadowPod keeps of a ShadowPod what ShadowPodReconciler reads from
// its cache: no template, so that no consumer makes the controller
// manager's memory grow with what it writes.
func TrimShadowPod(obj any) (any, error) {
	sp, ok := obj.(*offloadingv1alpha1.ShadowPod)
	if !ok {
		return obj, nil
	}
	sp.ManagedFields = nil
	sp.Annotations = nil
	sp.Spec = offloadingv1alpha1.ShadowPodSpec{}
	return sp, nil
}

// SetupWithManager registers the reconciler: ShadowPods, and pods by name
// (a pod's deletion, its phase, a pod of the name that goes).
func (r *ShadowPodReconciler) SetupWithManager(mgr ctrl.Manager) error {
	byName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		_, consumers := obj.GetLabels()[offloadingv1alpha1.OriginClusterLabel]
		owner := metav1.GetControllerOf(obj)
		if !consumers && (owner == nil || owner.Kind != "ShadowPod" || owner.APIVersion != offloadingv1alpha1.GroupVersion.String()) {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(obj)}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("shadowpods").
		For(&offloadingv1alpha1.ShadowPod{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, byName, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				o, n := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
				return o.Status.Phase != n.Status.Phase && (n.Status.Phase == corev1.PodSucceeded || n.Status.Phase == corev1.PodFailed)
			},
		})).
		Complete(r)
}
