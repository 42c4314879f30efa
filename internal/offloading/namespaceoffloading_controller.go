// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/phase"
)

// +kubebuilder:rbac:groups=offloading.liqo.io,resources=namespaceoffloadings,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=offloading.liqo.io,resources=namespaceoffloadings/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// NamespaceOffloadingReconciler runs in the consumer: for each
// NamespaceOffloading it selects the providers (by their virtual nodes'
// labels), asks each for the namespace through its NamespaceMap, and lists
// the provider namespaces and their state in the status.
type NamespaceOffloadingReconciler struct {
	// Client reads NamespaceOffloadings and Nodes (cached) and writes them
	// and Namespaces.
	Client client.Client
	// Direct writes the RoleBinding that lets this controller manager
	// (Self) request the tokens of the namespace's service accounts,
	// uncached; with no Self, none is made.
	Direct client.Client
	// Self is this controller manager's own user.
	Self string
	// Remotes gives the virtual kubelet's client in each provider.
	Remotes *identity.Remotes
	// Namespaces asks the providers for the namespaces; nil: each through
	// its NamespaceMap, as a peer (PeerNamespaces, with Remotes).
	Namespaces ProviderNamespaces
	// LocalClusterID names the default provider namespaces.
	LocalClusterID string
	// Released, if set, is called with a namespace and the providers it
	// still offloads to, once the others released it.
	Released func(namespace string, keep map[string]bool)
}

// RemoteNamespaceName is the provider namespace of the consumer namespace
// local: <local>-<the consumer's suffix> by default (cut to 63
// characters), the same name, or the selected one.
func RemoteNamespaceName(local, consumerID string, spec *offloadingv1alpha1.NamespaceOffloadingSpec) string {
	switch spec.NamespaceMappingStrategy {
	case offloadingv1alpha1.EnforceSameNameMapping:
		return local
	case offloadingv1alpha1.SelectedNameMapping:
		return spec.RemoteNamespaceName
	}
	return GeneratedNamespaceName(local, consumerID)
}

// GeneratedNamespaceName is the name generated for the consumer namespace
// local in a provider: <local>-<suffix>, where the suffix is 8 hex digits
// of the consumer's own (the first 8 characters of its ClusterID when
// they are hex digits, as a UUID's are, else of a hash of it). A consumer
// picks its ClusterID, but not hex digits that spell a name such as
// cert-manager: generated names never take one a provider would choose.
func GeneratedNamespaceName(local, consumerID string) string {
	suffix := strings.ToLower(consumerID)
	if len(suffix) < 8 || strings.Trim(suffix[:8], "0123456789abcdef") != "" {
		sum := sha256.Sum256([]byte(consumerID))
		suffix = hex.EncodeToString(sum[:])
	}
	suffix = suffix[:8]
	base := local
	if max := 63 - len(suffix) - 1; len(base) > max {
		base = strings.TrimRight(base[:max], "-")
	}
	return base + "-" + suffix
}

// Reconcile implements reconcile.Reconciler.
func (r *NamespaceOffloadingReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var no offloadingv1alpha1.NamespaceOffloading
	if err := r.Client.Get(ctx, req.NamespacedName, &no); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if no.Name != offloadingv1alpha1.NamespaceOffloadingName {
		return ctrl.Result{}, nil
	}
	if !no.DeletionTimestamp.IsZero() {
		return r.release(ctx, &no)
	}
	if controllerutil.AddFinalizer(&no, offloadingv1alpha1.NamespacesFinalizer) {
		if err := r.Client.Update(ctx, &no); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.labelNamespace(ctx, no.Namespace, true); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.tokenRequester(ctx, no.Namespace, true); err != nil {
		return ctrl.Result{}, err
	}
	s := &offloadingScope{no: &no, entries: no.Status.RemoteNamespaces}
	orig := no.DeepCopy()
	result, err := phase.Run(ctx, s, r.chooseProviders, r.requestNamespaces, r.summarize)
	if s.status != "" { // every pass that ends without an error says where it stands
		meta.SetStatusCondition(&no.Status.Conditions, metav1.Condition{
			Type: offloadingv1alpha1.ConditionReady, Status: s.status, Reason: s.reason, Message: s.message, ObservedGeneration: no.Generation,
		})
	}
	no.Status.RemoteNamespaces = s.entries
	if !equality.Semantic.DeepEqual(orig.Status, no.Status) {
		if perr := r.Client.Status().Patch(ctx, &no, client.MergeFrom(orig)); client.IgnoreNotFound(perr) != nil {
			return ctrl.Result{}, errors.Join(err, perr)
		}
	}
	if err != nil {
		return result, err
	}
	// A watch of each waiting provider's NamespaceMap wakes this up when
	// it answers (the answers are also polled, see summarize).
	for _, st := range s.entries {
		if st.Phase == offloadingv1alpha1.RemoteNamespacePending {
			r.Namespaces.Watch(ctx, st.ClusterID)
		}
	}
	return result, nil
}

// offloadingScope is what the phases of a NamespaceOffloading pass share:
// the status they build, written once after the pass.
type offloadingScope struct {
	no         *offloadingv1alpha1.NamespaceOffloading
	remoteName string
	providers  []string
	// entries are the provider namespaces for the status.
	entries  []offloadingv1alpha1.RemoteNamespaceStatus
	pending  bool
	problems []string
	// The Ready condition.
	status          metav1.ConditionStatus
	reason, message string
}

func (s *offloadingScope) ready(status metav1.ConditionStatus, reason, message string) {
	s.status, s.reason, s.message = status, reason, message
}

// chooseProviders selects the providers by their virtual nodes and names
// the provider namespace; a selector that does not parse or a reserved
// name ends the pass, said in the condition.
func (r *NamespaceOffloadingReconciler) chooseProviders(ctx context.Context, s *offloadingScope) (ctrl.Result, bool, error) {
	providers, err := r.selectProviders(ctx, s.no)
	if err != nil {
		s.ready(metav1.ConditionFalse, "InvalidClusterSelector", err.Error())
		return ctrl.Result{}, false, nil
	}
	s.providers = providers
	s.remoteName = RemoteNamespaceName(s.no.Namespace, r.LocalClusterID, &s.no.Spec)
	if ReservedNamespace(s.remoteName) {
		// Providers refuse it (their NamespaceMap schema); say why here
		// instead of asking them again and again.
		s.ready(metav1.ConditionFalse, "ReservedRemoteName", fmt.Sprintf(
			"the remote name %s is reserved in providers (default, liqo, liqo-*, kube-*): set namespaceMappingStrategy SelectedName with another remoteNamespaceName", s.remoteName))
		return ctrl.Result{}, false, nil
	}
	return ctrl.Result{}, true, nil
}

// requestNamespaces asks each selected provider for the namespace, and
// releases it in the providers no longer selected.
func (r *NamespaceOffloadingReconciler) requestNamespaces(ctx context.Context, s *offloadingScope) (ctrl.Result, bool, error) {
	previous := map[string]offloadingv1alpha1.RemoteNamespaceStatus{}
	for _, st := range s.no.Status.RemoteNamespaces {
		previous[st.ClusterID] = st
	}
	// What the namespace's pods on each provider ask for: the provider
	// shares its offer between this cluster's namespaces by it.
	demands, err := Demands(ctx, r.Client, s.no.Namespace)
	if err != nil {
		return ctrl.Result{}, false, fmt.Errorf("counting what the pods of %s ask for: %w", s.no.Namespace, err)
	}
	var entries []offloadingv1alpha1.RemoteNamespaceStatus
	for _, p := range s.providers {
		st, err := r.Namespaces.Request(ctx, p, s.no.Namespace, s.remoteName, demands[p])
		if err != nil {
			// The provider cannot be asked now: what it said last stands.
			s.problems = append(s.problems, fmt.Sprintf("%s: %v", p, err))
			if prev, ok := previous[p]; ok && prev.Namespace == s.remoteName {
				st = prev
			} else {
				st = offloadingv1alpha1.RemoteNamespaceStatus{ClusterID: p, Namespace: s.remoteName, Phase: offloadingv1alpha1.RemoteNamespacePending, Message: err.Error()}
			}
		}
		s.pending = s.pending || st.Phase != offloadingv1alpha1.RemoteNamespaceReady
		if st.Phase == offloadingv1alpha1.RemoteNamespaceFailed {
			s.problems = append(s.problems, fmt.Sprintf("%s: %s", p, st.Message))
		}
		entries = append(entries, st)
		delete(previous, p)
	}
	// Providers no longer selected: release their namespace.
	for p, st := range previous {
		if err := r.Namespaces.Release(ctx, p, s.no.Namespace); err != nil {
			st.Phase, st.Message = offloadingv1alpha1.RemoteNamespaceTerminating, err.Error()
			entries = append(entries, st)
			s.pending = true
		}
	}
	if r.Released != nil {
		keep := map[string]bool{}
		for _, st := range entries {
			keep[st.ClusterID] = true
		}
		r.Released(s.no.Namespace, keep)
	}
	slices.SortFunc(entries, func(a, b offloadingv1alpha1.RemoteNamespaceStatus) int {
		return strings.Compare(a.ClusterID, b.ClusterID)
	})
	s.entries = entries
	return ctrl.Result{}, true, nil
}

// summarize sets the Ready condition, and says when to look again: the
// answers are polled in case a watch fails, every 2 s while a namespace
// is being made, every 5 s while one failed (it may be for good, such as
// a name taken in the provider), every minute otherwise.
func (r *NamespaceOffloadingReconciler) summarize(_ context.Context, s *offloadingScope) (ctrl.Result, bool, error) {
	s.ready(metav1.ConditionTrue, "NamespacesReady", fmt.Sprintf("Namespace %s is ready in %d provider(s)", s.remoteName, len(s.entries)))
	switch {
	case len(s.problems) > 0:
		s.ready(metav1.ConditionFalse, "NamespacesNotReady", strings.Join(s.problems, "; "))
	case s.pending:
		s.ready(metav1.ConditionFalse, "NamespacesPending", "Waiting for the providers to create namespace "+s.remoteName)
	case len(s.entries) == 0:
		s.ready(metav1.ConditionFalse, "NoProviderSelected", "No virtual node matches the cluster selector")
	}
	switch {
	case s.pending:
		return ctrl.Result{RequeueAfter: 2 * time.Second}, true, nil
	case len(s.problems) > 0:
		return ctrl.Result{RequeueAfter: 5 * time.Second}, true, nil
	}
	return ctrl.Result{RequeueAfter: time.Minute}, true, nil
}

// selectProviders returns the ClusterIDs of the providers whose virtual
// nodes match the cluster selector.
func (r *NamespaceOffloadingReconciler) selectProviders(ctx context.Context, no *offloadingv1alpha1.NamespaceOffloading) ([]string, error) {
	var sel *nodeaffinity.NodeSelector
	if no.Spec.ClusterSelector != nil && len(no.Spec.ClusterSelector.NodeSelectorTerms) > 0 {
		s, err := nodeaffinity.NewNodeSelector(no.Spec.ClusterSelector)
		if err != nil {
			return nil, fmt.Errorf("spec.clusterSelector: %w", err)
		}
		sel = s
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, client.MatchingLabels{offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue}); err != nil {
		return nil, err
	}
	var out []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		p := n.Labels[offloadingv1alpha1.RemoteClusterLabel]
		if p == "" || slices.Contains(out, p) || (sel != nil && !sel.Match(n)) {
			continue
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

// release removes the namespace from every provider, then the label and
// the finalizer.
func (r *NamespaceOffloadingReconciler) release(ctx context.Context, no *offloadingv1alpha1.NamespaceOffloading) (ctrl.Result, error) {
	var left []offloadingv1alpha1.RemoteNamespaceStatus
	var problems []string
	for _, st := range no.Status.RemoteNamespaces {
		if err := r.Namespaces.Release(ctx, st.ClusterID, no.Namespace); err != nil {
			st.Phase, st.Message = offloadingv1alpha1.RemoteNamespaceTerminating, err.Error()
			left = append(left, st)
			problems = append(problems, fmt.Sprintf("%s: %v", st.ClusterID, err))
		}
	}
	if len(left) > 0 {
		err := r.setStatus(ctx, no, left, metav1.ConditionFalse, "Releasing", strings.Join(problems, "; "))
		return ctrl.Result{RequeueAfter: 2 * time.Second}, err
	}
	if r.Released != nil {
		r.Released(no.Namespace, nil)
	}
	if err := r.labelNamespace(ctx, no.Namespace, false); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.tokenRequester(ctx, no.Namespace, false); err != nil {
		return ctrl.Result{}, err
	}
	if controllerutil.RemoveFinalizer(no, offloadingv1alpha1.NamespacesFinalizer) {
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Update(ctx, no))
	}
	return ctrl.Result{}, nil
}

// tokenRequester binds this controller manager, in namespace, to the
// ClusterRole liqo-token-requester while the namespace is offloaded (on),
// and removes the binding after: it requests the tokens of the service
// accounts of the namespaces it offloads, and holds no such right
// elsewhere.
func (r *NamespaceOffloadingReconciler) tokenRequester(ctx context.Context, namespace string, on bool) error {
	if r.Self == "" || r.Direct == nil {
		return nil
	}
	if !on {
		err := r.Direct.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: TokenRequesterRole}})
		return client.IgnoreNotFound(err)
	}
	return identity.EnsureClusterRoleBinding(ctx, r.Direct, namespace, TokenRequesterRole, TokenRequesterRole,
		rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: r.Self},
		map[string]string{discoveryv1alpha1.ManagedByLabel: discoveryv1alpha1.ManagedByValue})
}

func (r *NamespaceOffloadingReconciler) labelNamespace(ctx context.Context, name string, on bool) error {
	var ns corev1.Namespace
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
		return client.IgnoreNotFound(err)
	}
	if (ns.Labels[offloadingv1alpha1.OffloadingEnabledLabel] == "true") == on {
		return nil
	}
	patch := client.MergeFrom(ns.DeepCopy())
	if on {
		metav1.SetMetaDataLabel(&ns.ObjectMeta, offloadingv1alpha1.OffloadingEnabledLabel, "true")
	} else {
		delete(ns.Labels, offloadingv1alpha1.OffloadingEnabledLabel)
	}
	return client.IgnoreNotFound(r.Client.Patch(ctx, &ns, patch))
}

func (r *NamespaceOffloadingReconciler) setStatus(ctx context.Context, no *offloadingv1alpha1.NamespaceOffloading,
	entries []offloadingv1alpha1.RemoteNamespaceStatus, status metav1.ConditionStatus, reason, msg string,
) error {
	orig := no.DeepCopy()
	no.Status.RemoteNamespaces = entries
	meta.SetStatusCondition(&no.Status.Conditions, metav1.Condition{
		Type: offloadingv1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: no.Generation,
	})
	if equality.Semantic.DeepEqual(orig.Status, no.Status) {
		return nil
	}
	return client.IgnoreNotFound(r.Client.Status().Patch(ctx, no, client.MergeFrom(orig)))
}

// SetupWithManager registers the reconciler.
func (r *NamespaceOffloadingReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || (r.Remotes == nil && r.Namespaces == nil) || r.LocalClusterID == "" {
		return fmt.Errorf("NamespaceOffloadingReconciler needs Client, Remotes (or Namespaces) and LocalClusterID")
	}
	if r.Namespaces == nil {
		r.Namespaces = &PeerNamespaces{Client: r.Client, Remotes: r.Remotes, LocalClusterID: r.LocalClusterID}
	}
	// A virtual node that comes, goes or changes labels may change which
	// providers each namespace offloads to.
	all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		if o.GetLabels()[offloadingv1alpha1.VirtualNodeLabel] != offloadingv1alpha1.VirtualNodeValue {
			return nil
		}
		var list offloadingv1alpha1.NamespaceOffloadingList
		if err := r.Client.List(ctx, &list); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	})
	// A pod bound to a virtual node, or ending there, changes what its
	// namespace asks of that node's provider; pods on this cluster's own
	// nodes change nothing there.
	pods := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		pod, ok := o.(*corev1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return nil
		}
		var node corev1.Node
		if err := r.Client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, &node); err == nil &&
			node.Labels[offloadingv1alpha1.VirtualNodeLabel] != offloadingv1alpha1.VirtualNodeValue {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: offloadingv1alpha1.NamespaceOffloadingName}}}
	})
	demandChanged := predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			a, ok1 := e.ObjectOld.(*corev1.Pod)
			b, ok2 := e.ObjectNew.(*corev1.Pod)
			return !ok1 || !ok2 || a.Spec.NodeName != b.Spec.NodeName || a.Status.Phase != b.Status.Phase ||
				!equality.Semantic.DeepEqual(a.Spec.Containers, b.Spec.Containers)
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&offloadingv1alpha1.NamespaceOffloading{}).
		Watches(&corev1.Node{}, all).
		Watches(&corev1.Pod{}, pods, builder.WithPredicates(demandChanged)).
		// A provider answering.
		WatchesRawSource(source.Channel(r.Namespaces.Events(), &handler.EnqueueRequestForObject{})).
		Named("namespaceoffloading").
		Complete(r)
}
