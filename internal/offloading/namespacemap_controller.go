// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/clusterconfig"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/identity"
)

// +kubebuilder:rbac:groups=offloading.liqo.io,resources=namespacemaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=offloading.liqo.io,resources=namespacemaps/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=broker.liqo.io,resources=selections,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch;delete

// NamespaceMapReconciler runs in the provider: for each consumer's
// NamespaceMap it creates the namespaces asked for, labelled with the
// consumer's ClusterID, binds the consumer's virtual kubelet in each, and
// deletes the consumer's namespaces no longer asked for. A namespace that
// exists and is not the consumer's is never touched: the mapping fails.
// A consumer gets the names generated for it (GeneratedNamespaceName) and
// those the provider lists in its ForeignCluster for the consumer, no
// other.
type NamespaceMapReconciler struct {
	// Client reads NamespaceMaps and Namespaces (cached) and writes them.
	Client client.Client
	// Direct reads and writes Roles and RoleBindings uncached, so that the
	// provider does not watch every Role in the cluster.
	Direct client.Client
	// Config returns the ClusterConfig in force (the Pod Security level,
	// what a consumer may keep beyond its offer); nil, or a nil result,
	// means the defaults.
	Config func() *configv1alpha1.ClusterConfig
	// Changes receives a value when the ClusterConfig changed: every
	// NamespaceMap is reconciled again.
	Changes <-chan struct{}
	// Self is this controller manager's user name: it binds itself in
	// each namespace made for a consumer to delete there the consumer's
	// EndpointSlices that name what it may no longer name
	// (SlicePrunerRole). Empty: no binding.
	Self string
	// DNS, when set, makes each consumer a DNS Service of the provider's
	// DNS proxy and tells the consumer where it is (status.dns).
	DNS *DNSProxy
}

// Pod Security admission labels of the namespaces made for consumers.
const (
	PodSecurityEnforceLabel        = "pod-security.kubernetes.io/enforce"
	PodSecurityEnforceVersionLabel = "pod-security.kubernetes.io/enforce-version"
	defaultPodSecurityLevel        = "baseline"
)

// consumerQuota is what the ClusterConfig says a consumer may keep beyond
// its offer.
func (r *NamespaceMapReconciler) consumerQuota() configv1alpha1.ConsumerQuota {
	if r.Config != nil {
		if cc := r.Config(); cc != nil {
			return cc.Spec.SharingConfig.ConsumerQuota
		}
	}
	return configv1alpha1.ConsumerQuota{}
}

func (r *NamespaceMapReconciler) podSecurityLevel() string {
	if r.Config != nil {
		if cc := r.Config(); cc != nil && cc.Spec.SharingConfig.PodSecurityLevel != "" {
			return cc.Spec.SharingConfig.PodSecurityLevel
		}
	}
	return defaultPodSecurityLevel
}

// ReservedNamespace says whether name may never be a consumer's namespace
// in the provider: default, Liqo's own and tenant namespaces (liqo,
// liqo-*), the system's (kube-*). The schema refuses them too; this holds
// for objects written before it did.
func ReservedNamespace(name string) bool {
	return name == "default" || name == "liqo" || strings.HasPrefix(name, "liqo-") || strings.HasPrefix(name, "kube-")
}

// namespaceResync is how often the RBAC of each namespace is checked
// again; a namespace waiting for its deletion is woken by the Namespace
// watch.
const namespaceResync = time.Minute

// Reconcile implements reconcile.Reconciler.
func (r *NamespaceMapReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	consumer, ok := strings.CutPrefix(req.Namespace, discoveryv1alpha1.TenantNamespace(""))
	if !ok || consumer == "" || req.Name != offloadingv1alpha1.NamespaceMapName {
		return ctrl.Result{}, nil
	}
	var nm offloadingv1alpha1.NamespaceMap
	err := r.Client.Get(ctx, req.NamespacedName, &nm)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	gone := apierrors.IsNotFound(err) || !nm.DeletionTimestamp.IsZero()
	if !gone {
		// What a consumer offloaded lives only as long as its peering: once
		// its PeeringRequest is going, its namespaces go, whoever keeps the
		// tenant namespace (and this NamespaceMap) alive.
		if gone, err = r.peeringGone(ctx, consumer); err != nil {
			return ctrl.Result{}, err
		}
	}
	desired := map[string]string{}
	if !gone {
		for local, remote := range nm.Spec.Mappings {
			desired[local] = string(remote)
		}
	}

	status := map[string]offloadingv1alpha1.MappedNamespaceStatus{}
	claimed := map[string]string{} // provider namespace -> consumer namespace
	var managed []string           // provider namespaces set up, whose quotas share the offer
	fresh := map[string]bool{}     // those made on this pass
	var retry error
	// The first claim sticks: a provider namespace serves the consumer
	// namespace it was made for as long as that one asks for it, whatever
	// its state; another claim waits until it is released and made anew,
	// so that nothing of the holder's is handed over.
	holders, err := r.holders(ctx, consumer)
	if err != nil {
		return ctrl.Result{}, err
	}
	offered, err := offerOf(ctx, r.Client, consumer)
	if err != nil {
		return ctrl.Result{}, err
	}
	// The names this cluster lets the consumer choose, beyond the
	// generated ones: its ForeignCluster for the consumer says.
	var allowed *discoveryv1alpha1.OffloadedNamespaces
	if fc, err := foreigncluster.Find(ctx, r.Client, consumer); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the ForeignCluster of %s: %w", consumer, err)
	} else if fc != nil {
		allowed = fc.Spec.OffloadedNamespaces
	}
	locals := make([]string, 0, len(desired))
	for local := range desired {
		locals = append(locals, local)
	}
	slices.Sort(locals)
	for _, local := range locals {
		remote := desired[local]
		holder := holders[remote].local // "" when nobody holds it
		held := holder != ""
		switch {
		case ReservedNamespace(remote):
			status[local] = failed(remote, fmt.Sprintf("namespace %s is reserved in the provider: choose another remote name", remote))
			continue
		case remote != GeneratedNamespaceName(local, consumer) && !allowed.Allows(remote):
			status[local] = failed(remote, fmt.Sprintf("namespace %s is not a name this provider lets this consumer use: only the generated %s, "+
				"unless the provider lists the name in its ForeignCluster for this consumer (spec.offloadedNamespaces)", remote, GeneratedNamespaceName(local, consumer)))
			continue
		case held && holder != local && desired[holder] == remote:
			status[local] = failed(remote, fmt.Sprintf("namespace %s is already mapped to %s", remote, holder))
			continue
		case held && holder != local:
			// Released by its holder: deleted below, then made for local.
			status[local] = offloadingv1alpha1.MappedNamespaceStatus{Namespace: remote, Phase: offloadingv1alpha1.RemoteNamespacePending,
				Message: fmt.Sprintf("namespace %s still holds what %s offloaded; it is made again once deleted", remote, holder)}
			continue
		}
		if other, dup := claimed[remote]; dup {
			status[local] = failed(remote, fmt.Sprintf("namespace %s is already mapped to %s", remote, other))
			continue
		}
		claimed[remote] = local
		var err error
		var created bool
		if status[local], created, err = r.ensureNamespace(ctx, consumer, local, remote, offered); err != nil {
			retry = err
		}
		if status[local].Phase == offloadingv1alpha1.RemoteNamespaceReady {
			managed = append(managed, remote)
			fresh[remote] = created
		}
	}
	if err := DeleteNamespaces(ctx, r.Client, consumer, func(name string) bool { _, keep := claimed[name]; return keep }); err != nil {
		return ctrl.Result{}, err
	}
	// One offer, one quota: what the consumer may use is shared between
	// its namespaces.
	if !gone {
		var others []string
		for name := range holders {
			if !slices.Contains(managed, name) {
				others = append(others, name)
			}
		}
		demands := map[string]corev1.ResourceList{}
		for remote, local := range claimed {
			demands[remote] = nm.Spec.Demands[local]
		}
		// In the order they came (made on this pass: last), for the
		// shares to serve whole wants in.
		// (Now to the second, as creation times are.)
		now := time.Now().Truncate(time.Second)
		when := func(ns string) time.Time {
			if h, ok := holders[ns]; ok {
				return h.made
			}
			return now
		}
		slices.SortFunc(managed, func(a, b string) int {
			return cmp.Or(when(a).Compare(when(b)), strings.Compare(a, b))
		})
		quotas, err := r.ensureQuotas(ctx, consumer, managed, others, fresh, QuotaOf(offered, r.consumerQuota()), demands)
		if err != nil {
			retry = err
		}
		for remote, st := range quotas {
			if st.Phase != offloadingv1alpha1.RemoteNamespaceFailed {
				bound, err := r.bindVirtualKubelet(ctx, consumer, remote)
				if err != nil {
					st, retry = bound, err
				}
			}
			status[claimed[remote]] = st
		}
	}
	var dns *offloadingv1alpha1.ConsumerDNS
	if r.DNS != nil {
		// Uncached: no watch of every Service, and the port another
		// consumer just took is seen.
		if dns, err = r.DNS.ensureDNS(ctx, r.Direct, consumer, gone); err != nil {
			retry = err
		}
	}
	if gone {
		return ctrl.Result{}, retry
	}
	if !equality.Semantic.DeepEqual(nm.Status.Namespaces, status) || nm.Status.ObservedGeneration != nm.Generation ||
		!equality.Semantic.DeepEqual(nm.Status.DNS, dns) {
		// A patch, not an update: the consumer writes the spec (its
		// demands move with its pods), and an update from the generation
		// read would conflict with each of its writes and wait out a
		// back-off; the generation observed says which spec this is of.
		orig := nm.DeepCopy()
		nm.Status.Namespaces, nm.Status.ObservedGeneration, nm.Status.DNS = status, nm.Generation, dns
		if err := r.Client.Status().Patch(ctx, &nm, client.MergeFrom(orig)); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
	}
	if retry != nil {
		return ctrl.Result{}, retry
	}
	return ctrl.Result{RequeueAfter: namespaceResync}, nil
}

// peeringGone tells whether consumer's PeeringRequest is absent or being
// deleted. Absent from the cache is confirmed by the API server: a request
// just made must never look gone.
func (r *NamespaceMapReconciler) peeringGone(ctx context.Context, consumer string) (bool, error) {
	var pr discoveryv1alpha1.PeeringRequest
	err := r.Client.Get(ctx, client.ObjectKey{Name: consumer}, &pr)
	if apierrors.IsNotFound(err) {
		err = r.Direct.Get(ctx, client.ObjectKey{Name: consumer}, &pr)
	}
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading the PeeringRequest of %s: %w", consumer, err)
	}
	return !pr.DeletionTimestamp.IsZero(), nil
}

// heldBy is what a provider namespace made for a consumer serves: the
// consumer namespace ("" for none), and when it was made.
type heldBy struct {
	local string
	made  time.Time
}

// holders returns, by name, what each provider namespace made for
// consumer serves.
func (r *NamespaceMapReconciler) holders(ctx context.Context, consumer string) (map[string]heldBy, error) {
	var list corev1.NamespaceList
	if err := r.Client.List(ctx, &list, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumer}); err != nil {
		return nil, fmt.Errorf("listing the namespaces of %s: %w", consumer, err)
	}
	out := make(map[string]heldBy, len(list.Items))
	for _, ns := range list.Items {
		out[ns.Name] = heldBy{local: ns.Annotations[offloadingv1alpha1.OriginNamespaceAnnotation], made: ns.CreationTimestamp.Time}
	}
	return out, nil
}

// errRetry says that a namespace failed on an API error (a stale cache, a
// conflict, an API server away): its status says which, and the map is
// reconciled again with back-off instead of at the next resync.
var errRetry = errors.New("a namespace failed on an API error")

// apiFailure is failed for a step that the API refused or could not
// answer, which is retried.
func apiFailure(remote, msg string) (offloadingv1alpha1.MappedNamespaceStatus, error) {
	return failed(remote, msg), errRetry
}

func failed(remote, msg string) offloadingv1alpha1.MappedNamespaceStatus {
	return offloadingv1alpha1.MappedNamespaceStatus{Namespace: remote, Phase: offloadingv1alpha1.RemoteNamespaceFailed, Message: msg}
}

// ensureNamespace creates (or repairs) the provider namespace remote for
// the consumer's namespace local and the LimitRange that gives containers
// their defaults; created says whether it made the namespace on this
// pass. The quota comes after (ensureQuotas), shared with the consumer's
// other namespaces, and the virtual kubelet's rights last
// (bindVirtualKubelet).
func (r *NamespaceMapReconciler) ensureNamespace(ctx context.Context, consumer, local, remote string, offered corev1.ResourceList) (st offloadingv1alpha1.MappedNamespaceStatus, created bool, err error) {
	level := r.podSecurityLevel()
	var ns corev1.Namespace
	err = r.Client.Get(ctx, client.ObjectKey{Name: remote}, &ns)
	switch {
	case apierrors.IsNotFound(err):
		ns = corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: remote,
			Labels: map[string]string{
				offloadingv1alpha1.OriginClusterLabel: consumer, discoveryv1alpha1.ManagedByLabel: discoveryv1alpha1.ManagedByValue,
				PodSecurityEnforceLabel: level, PodSecurityEnforceVersionLabel: "latest",
			},
			Annotations: map[string]string{offloadingv1alpha1.OriginNamespaceAnnotation: local},
		}}
		// A consumer a broker orchestrates (it has a Selection here):
		// its namespace is orchestrated from its first moment, towards no
		// provider until the broker says which, so that no pod of it
		// starts on this cluster's own nodes meanwhile.
		switch orchestrated, err := r.orchestrated(ctx, consumer); {
		case err != nil:
			st, err := apiFailure(remote, fmt.Sprintf("reading the broker's selection of %s: %v", consumer, err))
			return st, false, err
		case orchestrated:
			ns.Labels[brokerv1alpha1.OrchestratedLabel] = brokerv1alpha1.OrchestratedValue
			ns.Annotations[brokerv1alpha1.ProvidersAnnotation] = ""
		}
		if err := r.Client.Create(ctx, &ns); err != nil && !apierrors.IsAlreadyExists(err) {
			st, err := apiFailure(remote, fmt.Sprintf("creating namespace %s: %v", remote, err))
			return st, false, err
		} else if err == nil {
			created = true
		}
	case err != nil:
		st, err := apiFailure(remote, fmt.Sprintf("reading namespace %s: %v", remote, err))
		return st, false, err
	case ns.Labels[offloadingv1alpha1.OriginClusterLabel] != consumer:
		return failed(remote, fmt.Sprintf("namespace %s already exists in the provider and is not this consumer's: choose another remote name", remote)), false, nil
	case !ns.DeletionTimestamp.IsZero():
		return offloadingv1alpha1.MappedNamespaceStatus{Namespace: remote, Phase: offloadingv1alpha1.RemoteNamespacePending,
			Message: fmt.Sprintf("namespace %s is being deleted; it is created again once gone", remote)}, false, nil
	case ns.Annotations[offloadingv1alpha1.OriginNamespaceAnnotation] == "" || ns.Labels[PodSecurityEnforceLabel] != level ||
		ns.Labels[PodSecurityEnforceVersionLabel] != "latest":
		patch := client.MergeFrom(ns.DeepCopy())
		metav1.SetMetaDataAnnotation(&ns.ObjectMeta, offloadingv1alpha1.OriginNamespaceAnnotation, local)
		metav1.SetMetaDataLabel(&ns.ObjectMeta, PodSecurityEnforceLabel, level)
		metav1.SetMetaDataLabel(&ns.ObjectMeta, PodSecurityEnforceVersionLabel, "latest")
		if err := r.Client.Patch(ctx, &ns, patch); err != nil {
			st, err := apiFailure(remote, fmt.Sprintf("labelling namespace %s: %v", remote, err))
			return st, false, err
		}
	}
	st, err = r.ensureLimitRange(ctx, consumer, remote, offered)
	return st, created, err
}

// orchestrated says whether a broker orchestrates consumer's pods here:
// it keeps a Selection for it.
func (r *NamespaceMapReconciler) orchestrated(ctx context.Context, consumer string) (bool, error) {
	var sel brokerv1alpha1.Selection
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer), Name: brokerv1alpha1.SelectionName}, &sel)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return false, nil
	}
	return false, err
}

// bindVirtualKubelet binds the consumer's virtual kubelet in remote, once
// its LimitRange and quota are there: never a moment when it could run a
// pod unbounded.
func (r *NamespaceMapReconciler) bindVirtualKubelet(ctx context.Context, consumer, remote string) (offloadingv1alpha1.MappedNamespaceStatus, error) {
	if err := identity.EnsureClusterRoleBinding(ctx, r.Direct, remote, VirtualKubeletRole, VirtualKubeletRole,
		rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: identity.VirtualKubeletUserPrefix + consumer},
		map[string]string{discoveryv1alpha1.ClusterIDLabel: consumer, discoveryv1alpha1.ManagedByLabel: discoveryv1alpha1.ManagedByValue}); err != nil {
		return apiFailure(remote, err.Error())
	}
	if r.Self != "" {
		for _, role := range []string{SlicePrunerRole, ShadowPodKeeperRole} {
			if err := identity.EnsureClusterRoleBinding(ctx, r.Direct, remote, role, role,
				rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: r.Self},
				map[string]string{discoveryv1alpha1.ManagedByLabel: discoveryv1alpha1.ManagedByValue}); err != nil {
				return apiFailure(remote, err.Error())
			}
		}
	}
	return offloadingv1alpha1.MappedNamespaceStatus{Namespace: remote, Phase: offloadingv1alpha1.RemoteNamespaceReady}, nil
}

// DeleteNamespaces deletes the provider namespaces created for consumer,
// except those keep says to keep; their pods and objects go with them.
func DeleteNamespaces(ctx context.Context, c client.Client, consumer string, keep func(name string) bool) error {
	var list corev1.NamespaceList
	if err := c.List(ctx, &list, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumer}); err != nil {
		return fmt.Errorf("listing the namespaces of %s: %w", consumer, err)
	}
	for i := range list.Items {
		ns := &list.Items[i]
		// A tenant namespace is never a consumer's to delete, whatever
		// labels it carries.
		if (keep != nil && keep(ns.Name)) || !ns.DeletionTimestamp.IsZero() || ns.Labels[discoveryv1alpha1.TenantLabel] != "" || ReservedNamespace(ns.Name) {
			continue
		}
		if err := c.Delete(ctx, ns); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting namespace %s: %w", ns.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Offloaded namespace released", "namespace", ns.Name, "consumer", consumer)
	}
	return nil
}

// uncountedShadowPods says whether q enforces a count of ShadowPods it
// has no usage of (countShadowPods).
func uncountedShadowPods(q *corev1.ResourceQuota) bool {
	_, enforced := q.Status.Hard[QuotaShadowPods]
	_, counted := q.Status.Used[QuotaShadowPods]
	return enforced && !counted
}

// nearlyFull says whether a namespace used three quarters or more of its
// quota for some resource: its share may need to grow.
func nearlyFull(q *corev1.ResourceQuota) bool {
	for name, hard := range q.Status.Hard {
		h, used := get(name, corev1.ResourceList{name: hard}), get(name, q.Status.Used)
		if h > 0 && used*4 >= h*3 {
			return true
		}
	}
	return false
}

// SetupWithManager registers the reconciler.
func (r *NamespaceMapReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Direct == nil {
		return fmt.Errorf("NamespaceMapReconciler needs Client and Direct")
	}
	// mapOf is the NamespaceMap of the consumer a label or a name gives.
	mapOf := func(consumer func(client.Object) string) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			id := consumer(o)
			if id == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: client.ObjectKey{
				Namespace: discoveryv1alpha1.TenantNamespace(id), Name: offloadingv1alpha1.NamespaceMapName,
			}}}
		})
	}
	// A consumer's namespace deleted or changed by hand is repaired.
	nsChanged := mapOf(func(o client.Object) string { return o.GetLabels()[offloadingv1alpha1.OriginClusterLabel] })
	// A new offer changes the quota of every namespace of the consumer;
	// the end of its peering releases them.
	peeringChanged := mapOf(client.Object.GetName)
	// The names a consumer may use are on its ForeignCluster.
	fcChanged := mapOf(func(o client.Object) string { return o.GetLabels()[discoveryv1alpha1.ClusterIDLabel] })
	// The ClusterConfig says what every consumer may keep and which Pod
	// Security level its namespaces enforce.
	allMaps := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var maps offloadingv1alpha1.NamespaceMapList
		if err := r.Client.List(ctx, &maps); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(maps.Items))
		for _, m := range maps.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&m)})
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&offloadingv1alpha1.NamespaceMap{}).
		Watches(&corev1.Namespace{}, nsChanged).
		WatchesRawSource(clusterconfig.ChangeSource(mgr, r.Changes, &offloadingv1alpha1.NamespaceMap{}, allMaps)).
		Watches(&discoveryv1alpha1.ForeignCluster{}, fcChanged, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// The quota controller counting a namespace makes it Ready, and
		// enforcing a lowered quota lets another namespace's go up; a
		// namespace that used most of its share gets a new one. (Not
		// every change of usage: it changes with every pod.)
		Watches(&corev1.ResourceQuota{}, nsChanged, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				o, n := e.ObjectOld.(*corev1.ResourceQuota), e.ObjectNew.(*corev1.ResourceQuota)
				return !equality.Semantic.DeepEqual(o.Status.Hard, n.Status.Hard) || !equality.Semantic.DeepEqual(o.Spec.Hard, n.Spec.Hard) ||
					nearlyFull(n) != nearlyFull(o) || (nearlyFull(n) && !equality.Semantic.DeepEqual(o.Status.Used, n.Status.Used)) ||
					uncountedShadowPods(n)
			},
		})).
		Watches(&discoveryv1alpha1.PeeringRequest{}, peeringChanged, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				o, n := e.ObjectOld.(*discoveryv1alpha1.PeeringRequest), e.ObjectNew.(*discoveryv1alpha1.PeeringRequest)
				return !equality.Semantic.DeepEqual(o.Status.OfferedResources, n.Status.OfferedResources) ||
					o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
			},
		})).
		Named("namespacemap").
		Complete(r)
}
