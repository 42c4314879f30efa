// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package claims keeps the volumes of offloaded pods in their providers.
// A claim of the StorageClass liqo stands for "the provider's storage":
// the class binds when a pod first uses it (WaitForFirstConsumer), and
// its allowed topology is the virtual nodes, so the scheduler picks a
// virtual node for the pod and names it on the claim. The Reflector then
// makes a claim of the same name in the provider namespace, of the class
// the provider's offer names (its default, or the one it maps consumers
// to), and here a PersistentVolume bound to the claim and pinned to that
// virtual node: the claim is Bound, the pod goes to the provider, which
// binds its claim when the pod first runs there. The provider claim's
// phase comes back as the claim's ProviderBound condition. When the claim
// is deleted here its volume is released, and by the class's reclaim
// policy the provider's claim goes with it (Delete) or stays (Retain).
package claims

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/sharing"
	"github.com/liqo-go/liqo/internal/virtualkubelet/forge"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
)

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get;list;watch;create;delete

const (
	// StorageClass is the consumer's StorageClass that stands for the
	// providers' storage.
	StorageClass = "liqo"
	// Provisioner is the liqo StorageClass's provisioner: this package.
	Provisioner = "storage.liqo.io/provider"
	// SelectedNodeAnnotation is where the scheduler names, on a claim
	// that binds when first used, the node its pod goes to.
	SelectedNodeAnnotation = "volume.kubernetes.io/selected-node"
	// ProvisionedByAnnotation names, on a volume, its provisioner.
	ProvisionedByAnnotation = "pv.kubernetes.io/provisioned-by"
	// RemoteNamespaceAnnotation records, on a volume this package made,
	// the provider namespace its claim is in.
	RemoteNamespaceAnnotation = "storage.liqo.io/remote-namespace"
	// RemoteUIDAnnotation records, on a volume this package made, the UID
	// of the provider's claim.
	RemoteUIDAnnotation = "storage.liqo.io/remote-uid"
	// ConditionProviderBound is the claim condition that says whether
	// the provider's claim is bound there.
	ConditionProviderBound corev1.PersistentVolumeClaimConditionType = "ProviderBound"
)

// VolumeName is the name of the volume made for claim.
func VolumeName(claim *corev1.PersistentVolumeClaim) string {
	return volumeName(claim.UID)
}

func volumeName(uid types.UID) string { return "liqo-" + string(uid) }

// Reflector makes, keeps and releases the provider claims of the
// consumer's claims of class liqo.
type Reflector struct {
	// Client reads claims, nodes, NamespaceOffloadings and
	// Advertisements, and writes volumes and the claims' status.
	Client client.Client
	// Providers hold the claims.
	Providers provider.Providers
	// LocalClusterID labels the provider claims.
	LocalClusterID string
	// Recorder emits events on the claims.
	Recorder events.EventRecorder
}

// Reconcile implements reconcile.Reconciler, for a claim.
func (r *Reflector) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, err error) {
	var claim corev1.PersistentVolumeClaim
	err = r.Client.Get(ctx, req.NamespacedName, &claim)
	if apierrors.IsNotFound(err) {
		// A provider claim whose volume here was never made goes; one
		// with a volume is the volume's business (Release).
		_, err := r.deleteOrphans(ctx, req.Namespace, req.Name, "", "")
		return ctrl.Result{}, err
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if ptr.Deref(claim.Spec.StorageClassName, "") != StorageClass || claim.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	var volume *corev1.PersistentVolume
	if claim.Spec.VolumeName != "" {
		volume = &corev1.PersistentVolume{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, volume); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if volume.Annotations[ProvisionedByAnnotation] != Provisioner {
			return ctrl.Result{}, nil // bound by hand to a volume of another kind
		}
	}
	providerID, nodeName := "", claim.Annotations[SelectedNodeAnnotation]
	switch {
	case volume != nil:
		providerID = volume.Labels[offloadingv1alpha1.RemoteClusterLabel]
	case nodeName == "":
		return ctrl.Result{}, nil // no pod has used it yet
	default:
		var n corev1.Node
		if err := r.Client.Get(ctx, client.ObjectKey{Name: nodeName}, &n); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		if !sharing.IsVirtual(&n) {
			r.Recorder.Eventf(&claim, nil, corev1.EventTypeWarning, "ProvisioningFailed", "Provision",
				"Node %s is not a virtual node: a claim of class %s is kept by a provider, for pods on its virtual nodes", nodeName, StorageClass)
			return ctrl.Result{}, nil
		}
		providerID = n.Labels[offloadingv1alpha1.RemoteClusterLabel]
	}
	if providerID == "" {
		return ctrl.Result{}, nil
	}
	defer func() { provider.ReflectionFailed(providerID, provider.PersistentVolumeClaims, err) }()
	// Made in another provider before the scheduler chose again, or
	// for an earlier claim of this name: those never bound there go.
	// One in this provider is gone once its deletion is seen.
	if here, err := r.deleteOrphans(ctx, claim.Namespace, claim.Name, providerID, claim.UID); err != nil || here {
		return ctrl.Result{}, err
	}

	var no offloadingv1alpha1.NamespaceOffloading
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	remoteNS, ok := no.ReadyRemoteNamespace(providerID)
	if !ok {
		// The NamespaceOffloading's status, once ready, wakes this up.
		r.Recorder.Eventf(&claim, nil, corev1.EventTypeWarning, "NamespaceNotOffloaded", "Provision",
			"Namespace %s has no ready namespace in provider %s yet (see its NamespaceOffloading)", claim.Namespace, providerID)
		return ctrl.Result{}, nil
	}
	pns, err := r.Providers.Namespace(ctx, providerID, claim.Namespace, remoteNS)
	if errors.Is(err, provider.ErrNotSynced) {
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if !pns.Watch(provider.PersistentVolumeClaims) {
		// Its listing wakes this up; until then, look again shortly.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	remote, _ := pns.Get(provider.PersistentVolumeClaims, claim.Name).(*corev1.PersistentVolumeClaim)
	if remote != nil && remote.DeletionTimestamp != nil {
		return ctrl.Result{}, nil // its deletion wakes this up
	}
	if remote != nil && remote.Annotations[offloadingv1alpha1.OriginUIDAnnotation] != string(claim.UID) {
		// A claim of an earlier claim of this name, whose volume was
		// retained (or is being released), or that was bound there
		// without a volume here: never this one's data.
		r.Recorder.Eventf(&claim, nil, corev1.EventTypeWarning, "ProvisioningFailed", "Provision",
			"Provider %s still keeps claim %s/%s of an earlier claim of this name (its volume's reclaim policy is Retain, or it is being released): delete it there, or name this claim otherwise",
			providerID, remoteNS, claim.Name)
		return ctrl.Result{}, nil
	}
	if volume == nil {
		return r.provision(ctx, &claim, pns, remote)
	}
	return ctrl.Result{}, r.reflectStatus(ctx, &claim, providerID, remote)
}

// provision makes the provider's claim, if it is not there yet, and the
// volume here that binds claim.
func (r *Reflector) provision(ctx context.Context, claim *corev1.PersistentVolumeClaim, pns provider.Namespace, remote *corev1.PersistentVolumeClaim) (ctrl.Result, error) {
	providerID := pns.Provider()
	if remote == nil {
		class, err := r.providerClass(ctx, providerID)
		if err != nil {
			return ctrl.Result{}, err
		}
		if class == "" {
			r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, "ProvisioningFailed", "Provision",
				"Provider %s keeps no volumes for this cluster: its offer names no storage class (its ClusterConfig names no consumerStorageClass and it has no default StorageClass)", providerID)
			// Its offer is looked at again when it changes.
			return ctrl.Result{}, nil
		}
		remote = RemoteClaim(claim, pns.Name(), r.LocalClusterID, class)
		switch err := pns.Create(ctx, remote); {
		case apierrors.IsAlreadyExists(err):
			// The view's watch shows it shortly, and wakes this up.
			return ctrl.Result{}, nil
		case err != nil:
			r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, "ProvisioningFailed", "Provision",
				"Provider %s refused the claim: %v", providerID, err)
			return ctrl.Result{}, err
		}
		r.Recorder.Eventf(claim, nil, corev1.EventTypeNormal, "Provisioned", "Provision",
			"Claim made in provider %s (namespace %s, class %s)", providerID, pns.Name(), class)
	}
	// At once (Create gave the provider claim its UID): a claim deleted
	// here before its volume exists leaves, at worst, a provider claim
	// that is not bound yet, which deleteOrphans removes.
	pv := Volume(claim, providerID, pns.Name(), remote.UID, r.reclaimPolicy(ctx))
	if err := r.Client.Create(ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
		r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, "ProvisioningFailed", "Provision", "Creating its volume: %v", err)
		return ctrl.Result{}, fmt.Errorf("creating the volume of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return ctrl.Result{}, nil
}

// providerClass is the class the provider's offer says the consumer's
// claims are made with.
func (r *Reflector) providerClass(ctx context.Context, providerID string) (string, error) {
	var adv sharingv1alpha1.Advertisement
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(providerID), Name: sharingv1alpha1.AdvertisementName(providerID)}, &adv)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	return adv.Spec.StorageClass, err
}

// reclaimPolicy is the liqo StorageClass's: Delete unless it says Retain.
func (r *Reflector) reclaimPolicy(ctx context.Context) corev1.PersistentVolumeReclaimPolicy {
	var sc storagev1.StorageClass
	if err := r.Client.Get(ctx, client.ObjectKey{Name: StorageClass}, &sc); err == nil && sc.ReclaimPolicy != nil {
		return *sc.ReclaimPolicy
	}
	return corev1.PersistentVolumeReclaimDelete
}

// RemoteClaim is the provider's claim of claim, of class in remoteNS:
// the same size, access modes and volume mode, its labels (the origin
// among them) but none of the annotations the consumer's controllers set.
func RemoteClaim(claim *corev1.PersistentVolumeClaim, remoteNS, consumerID, class string) *corev1.PersistentVolumeClaim {
	m := forge.Meta(&claim.ObjectMeta, remoteNS, consumerID)
	m.Annotations = map[string]string{
		offloadingv1alpha1.OriginUIDAnnotation:       string(claim.UID),
		offloadingv1alpha1.OriginNamespaceAnnotation: claim.Namespace,
	}
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: m,
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      claim.Spec.AccessModes,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: claim.Spec.Resources.Requests[corev1.ResourceStorage]}},
			VolumeMode:       claim.Spec.VolumeMode,
			StorageClassName: ptr.To(class),
		},
	}
}

// Volume is the volume here that binds claim, whose provider claim in
// remoteNS has UID remoteUID: of its size and modes, pinned to the
// provider's virtual nodes (a node made again, or another pool's, is
// the same provider). Its source, a local path no node mounts, is never
// used: the pod that uses it runs in the provider.
func Volume(claim *corev1.PersistentVolumeClaim, providerID, remoteNS string, remoteUID types.UID, reclaim corev1.PersistentVolumeReclaimPolicy) *corev1.PersistentVolume {
	size := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:   VolumeName(claim),
			Labels: map[string]string{offloadingv1alpha1.RemoteClusterLabel: providerID},
			Annotations: map[string]string{
				ProvisionedByAnnotation:   Provisioner,
				RemoteNamespaceAnnotation: remoteNS,
				RemoteUIDAnnotation:       string(remoteUID),
			},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size.DeepCopy()},
			AccessModes:                   claim.Spec.AccessModes,
			VolumeMode:                    claim.Spec.VolumeMode,
			StorageClassName:              StorageClass,
			PersistentVolumeReclaimPolicy: reclaim,
			ClaimRef: &corev1.ObjectReference{
				APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/var/lib/liqo/provider/" + providerID}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: offloadingv1alpha1.VirtualNodeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{offloadingv1alpha1.VirtualNodeValue}},
					{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{providerID}},
				},
			}}}},
		},
	}
}

// reflectStatus shows the provider claim's phase as claim's
// ProviderBound condition.
func (r *Reflector) reflectStatus(ctx context.Context, claim *corev1.PersistentVolumeClaim, providerID string, remote *corev1.PersistentVolumeClaim) error {
	cond := corev1.PersistentVolumeClaimCondition{Type: ConditionProviderBound, Status: corev1.ConditionFalse}
	switch {
	case remote == nil:
		cond.Reason, cond.Message = "Lost", fmt.Sprintf("Provider %s no longer has the claim: its data is gone", providerID)
	case remote.Status.Phase == corev1.ClaimBound:
		size := remote.Status.Capacity[corev1.ResourceStorage]
		cond.Status, cond.Reason = corev1.ConditionTrue, "Bound"
		cond.Message = fmt.Sprintf("Bound in provider %s (claim %s/%s, class %s, %s)", providerID, remote.Namespace, remote.Name, ptr.Deref(remote.Spec.StorageClassName, ""), size.String())
	case remote.Status.Phase == corev1.ClaimLost:
		cond.Reason, cond.Message = "Lost", fmt.Sprintf("Provider %s lost the claim's volume", providerID)
	default:
		cond.Reason = "Pending"
		cond.Message = fmt.Sprintf("Pending in provider %s (claim %s/%s): a class that binds when first used binds once the pod runs there", providerID, remote.Namespace, remote.Name)
	}
	for _, c := range claim.Status.Conditions {
		if c.Type == cond.Type && c.Status == cond.Status && c.Reason == cond.Reason && c.Message == cond.Message {
			return nil
		}
	}
	if cond.Reason == "Lost" {
		r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, "ProviderClaimLost", "Reflect", "%s", cond.Message)
	}
	patch := client.MergeFromWithOptions(claim.DeepCopy(), client.MergeFromWithOptimisticLock{})
	cond.LastTransitionTime = metav1.Now()
	claim.Status.Conditions = append(slices.DeleteFunc(slices.Clone(claim.Status.Conditions), func(c corev1.PersistentVolumeClaimCondition) bool {
		return c.Type == cond.Type
	}), cond)
	return r.Client.Status().Patch(ctx, claim, patch)
}

// deleteOrphans deletes the provider claims of the consumer's claim
// namespace/name that no volume here stands for and that are Pending
// there (so that no pod ever wrote to them), but the one of the claim of
// UID uid in provider current: made in another provider before the
// scheduler chose again, for an earlier claim of this name, or for a
// claim deleted before its volume was made. A bound one is never deleted
// for want of a volume here: a volume retained, then deleted by hand,
// leaves its data there, as the reclaim policy said; nor is one of a
// class that binds at once (bound before any pod used it), which stays
// until its namespace goes. It says whether it deleted one in current.
//
// It looks in every provider the namespace is open in, and so starts
// watching claims there: only in namespaces that use claims of class
// liqo, as the claim could have been made in any of them.
func (r *Reflector) deleteOrphans(ctx context.Context, namespace, name, current string, uid types.UID) (bool, error) {
	var errs []error
	here := false
	for _, pns := range r.Providers.Open(namespace) {
		if !pns.Watch(provider.PersistentVolumeClaims) {
			continue
		}
		remote, _ := pns.Get(provider.PersistentVolumeClaims, name).(*corev1.PersistentVolumeClaim)
		if remote == nil || remote.DeletionTimestamp != nil || remote.Status.Phase != corev1.ClaimPending || remote.Spec.VolumeName != "" {
			continue
		}
		origin := types.UID(remote.Annotations[offloadingv1alpha1.OriginUIDAnnotation])
		if origin == uid && pns.Provider() == current {
			continue
		}
		var pv corev1.PersistentVolume
		err := r.Client.Get(ctx, client.ObjectKey{Name: volumeName(origin)}, &pv)
		if err == nil && pv.Labels[offloadingv1alpha1.RemoteClusterLabel] == pns.Provider() && pv.Annotations[RemoteNamespaceAnnotation] == pns.Name() {
			continue // released or retained: Release decides
		}
		if client.IgnoreNotFound(err) != nil {
			errs = append(errs, err)
			continue
		}
		if err := pns.Delete(ctx, provider.PersistentVolumeClaims, name, remote.UID, nil); err != nil {
			errs = append(errs, fmt.Errorf("deleting the orphan claim %s/%s in provider %s: %w", pns.Name(), name, pns.Provider(), err))
			continue
		}
		here = here || pns.Provider() == current
	}
	return here, errors.Join(errs...)
}

// Release deletes, for a volume this package made that its claim
// released, the provider's claim, when the volume's reclaim policy is
// Delete, and then the volume.
func (r *Reflector) Release(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pv corev1.PersistentVolume
	if err := r.Client.Get(ctx, req.NamespacedName, &pv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pv.Annotations[ProvisionedByAnnotation] != Provisioner || pv.Status.Phase != corev1.VolumeReleased ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.DeletionTimestamp != nil || pv.Spec.ClaimRef == nil {
		return ctrl.Result{}, nil
	}
	providerID, remoteNS := pv.Labels[offloadingv1alpha1.RemoteClusterLabel], pv.Annotations[RemoteNamespaceAnnotation]
	local := pv.Spec.ClaimRef.Namespace
	var no offloadingv1alpha1.NamespaceOffloading
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: local, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	// A namespace no longer offloaded there, or on its way out, has its
	// provider namespace, and the claim in it, deleted; one not ready
	// for now (pending, a failure) is waited for.
	phase := offloadingv1alpha1.RemoteNamespaceTerminating
	for _, st := range no.Status.RemoteNamespaces {
		if st.ClusterID == providerID && st.Namespace == remoteNS {
			phase = st.Phase
		}
	}
	switch phase {
	case offloadingv1alpha1.RemoteNamespaceTerminating:
	case offloadingv1alpha1.RemoteNamespaceReady:
		pns, err := r.Providers.Namespace(ctx, providerID, local, remoteNS)
		if errors.Is(err, provider.ErrNotSynced) {
			return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
		} else if err != nil {
			return ctrl.Result{}, err
		}
		uid := pv.Annotations[RemoteUIDAnnotation]
		if err := pns.Delete(ctx, provider.PersistentVolumeClaims, pv.Spec.ClaimRef.Name, types.UID(uid), nil); err != nil {
			provider.ReflectionFailed(providerID, provider.PersistentVolumeClaims, err)
			return ctrl.Result{}, fmt.Errorf("deleting claim %s/%s in provider %s: %w", remoteNS, pv.Spec.ClaimRef.Name, providerID, err)
		}
	default:
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, &pv, client.Preconditions{UID: &pv.UID}))
}

// SetupWithManager registers the claim and volume controllers.
func (r *Reflector) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Providers == nil || r.LocalClusterID == "" {
		return errors.New("claims.Reflector needs Client, Providers and LocalClusterID")
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("liqo-virtual-kubelet")
	}
	ofClass := predicate.NewPredicateFuncs(func(o client.Object) bool {
		c, ok := o.(*corev1.PersistentVolumeClaim)
		return ok && ptr.Deref(c.Spec.StorageClassName, "") == StorageClass
	})
	claimsIn := func(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
		var list corev1.PersistentVolumeClaimList
		if err := r.Client.List(ctx, &list, opts...); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for i := range list.Items {
			if ptr.Deref(list.Items[i].Spec.StorageClassName, "") == StorageClass {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
		return reqs
	}
	err := ctrl.NewControllerManagedBy(mgr).
		For(&corev1.PersistentVolumeClaim{}, builder.WithPredicates(ofClass)).
		// A namespace offloaded to one more provider; a provider's offer
		// that names a class now.
		Watches(&offloadingv1alpha1.NamespaceOffloading{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return claimsIn(ctx, client.InNamespace(o.GetNamespace()))
		})).
		Watches(&sharingv1alpha1.Advertisement{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			return claimsIn(ctx)
		}), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return e.ObjectOld.(*sharingv1alpha1.Advertisement).Spec.StorageClass != e.ObjectNew.(*sharingv1alpha1.Advertisement).Spec.StorageClass
			},
		})).
		WatchesRawSource(r.Providers.Source(provider.PersistentVolumeClaims, &handler.EnqueueRequestForObject{})).
		Named("virtualkubelet-claims").
		Complete(r)
	if err != nil {
		return err
	}
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetAnnotations()[ProvisionedByAnnotation] == Provisioner })
	return ctrl.NewControllerManagedBy(mgr).
		For(&corev1.PersistentVolume{}, builder.WithPredicates(ours)).
		Named("virtualkubelet-volumes").
		Complete(reconcile.Func(r.Release))
}
