// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package node keeps the virtual nodes: for each accepted Advertisement a
// Node whose capacity is the offer, its Lease renewed as a kubelet does,
// NotReady while the provider cannot be reached, and its pods deleted when
// it goes.
package node

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	klabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/sharing"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
)

const (
	// KubeletVersion is what virtual nodes report as their kubelet.
	KubeletVersion = "v1.37.1-liqo"
	// leaseDuration is the virtual nodes' Lease duration; renewed every
	// quarter of it, as the kubelet does.
	leaseDuration = 40 * time.Second
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes/status,verbs=get;update;patch

// Reconciler keeps one virtual node per accepted Advertisement: the
// node's making, naming and status work from the offer (PeerOffer), not
// from the peer behind it.
type Reconciler struct {
	// Client reads Advertisements and Secrets and writes Nodes and Leases.
	Client client.Client
	// APIReader, if set, reads a ForeignCluster again from the API server
	// when writing its status met another writer's change.
	APIReader client.Reader
	// Health says whether each provider can be reached.
	Health provider.Health
	// Now is injectable for tests.
	Now func() time.Time
	// Removed, if set, is called with the provider whose virtual node
	// went, to end what else runs for it.
	Removed func(provider string)
	// KubeletAddress is where the virtual nodes' kubelet API (logs, exec)
	// is reached, which the nodes carry as their InternalIP; empty means
	// they have none.
	KubeletAddress string
	// Kubelet gives each virtual node its kubelet API port and closes it
	// when the node goes (an api.Server).
	Kubelet interface {
		Endpoint(ctx context.Context, node string) (int32, error)
		Release(node string)
	}
	// Untainted leaves the virtual nodes without the taint
	// offloading.liqo.io/virtual-node (and takes it off one that has it),
	// for suites that take only untainted nodes as schedulable (upstream
	// conformance). A pod of a namespace not offloaded that lands on such
	// a node waits there, with a NamespaceNotOffloaded event.
	Untainted bool
	// Opaque names new virtual nodes liqo-<random>, never after their
	// provider: on an aggregating broker, whose consumers read their pods'
	// node names (and EndpointSlices' too) and must not learn a provider
	// from them. A node keeps the name it has.
	Opaque bool

	// applied holds, by node name, the labels and annotations last
	// applied to it (an appliedMeta).
	applied sync.Map
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// The provider is the one whose tenant namespace holds the offer:
	// nothing the provider wrote in it (its name, its clusterIdentity) may
	// make this act on another provider's node.
	provider, ok := sharing.ProviderOfTenant(req.Namespace)
	if !ok || req.Name != sharingv1alpha1.AdvertisementName(provider) {
		return ctrl.Result{}, nil // not a provider's offer: the operator refuses it
	}
	var adv sharingv1alpha1.Advertisement
	err := r.Client.Get(ctx, req.NamespacedName, &adv)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	gone := apierrors.IsNotFound(err) || !adv.DeletionTimestamp.IsZero()
	if !gone && adv.Status.Phase == "" {
		// Not judged yet (a provider that just wrote it again): whatever
		// node there is stays, as removing it drains every pod it runs;
		// the operator's verdict wakes this up.
		return ctrl.Result{}, nil
	}
	if gone || adv.Status.Phase != sharingv1alpha1.AdvertisementAccepted || adv.Spec.ClusterIdentity.ClusterID != provider {
		if err := r.removeNodes(ctx, provider); err != nil {
			return ctrl.Result{}, err
		}
		if r.Removed != nil {
			r.Removed(provider)
		}
		return ctrl.Result{}, r.reflect(ctx, provider, "", "", "")
	}
	// One node for the offer, or one for each of its pools; the nodes
	// of pools it no longer has go.
	var names, cordoned []string
	var errs []error
	ready, msg := r.reach(ctx, provider)
	for _, offer := range PeerOffers(&adv) {
		// One that fails holds up neither the others nor their Leases.
		node, err := r.keep(ctx, offer, ready, msg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		names = append(names, node.Name)
		if node.Spec.Unschedulable {
			cordoned = append(cordoned, node.Name)
		}
	}
	if err := errors.Join(errs...); err != nil {
		// Nothing goes while a node that should stay may not be named.
		return ctrl.Result{}, err
	}
	if err := r.removeNodes(ctx, provider, names...); err != nil {
		return ctrl.Result{}, err
	}
	status, reason := metav1.ConditionTrue, discoveryv1alpha1.ReasonVirtualNodeReady
	switch {
	case !ready:
		status, reason = metav1.ConditionFalse, discoveryv1alpha1.ReasonProviderUnreachable
	case len(cordoned) == len(names):
		reason = discoveryv1alpha1.ReasonVirtualNodeCordoned
		msg += "; cordoned: its pods run, no new pod is scheduled on it (kubectl uncordon " + strings.Join(cordoned, " ") + ")"
	case len(cordoned) > 0:
		msg += "; cordoned: " + strings.Join(cordoned, ", ")
	}
	what := "Virtual node " + names[0]
	if len(names) > 1 {
		what = fmt.Sprintf("Virtual nodes %s (one for each of the offer's %d pools)", strings.Join(names, ", "), len(names))
	}
	if err := r.reflect(ctx, provider, status, reason, what+": "+msg); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: RenewEvery}, nil
}

// Keep makes offer's virtual node, or keeps it as a kubelet keeps its
// own: its labels and taint, its capacity, its Ready condition (whether
// Health reaches the provider, said in msg) and its Lease. The peers'
// Advertisements are kept through it; a source of offers that are not
// one peer's (the broker's aggregator) calls it alike, every quarter of
// the Lease's duration (RenewEvery), and Remove when its offer goes.
func (r *Reconciler) Keep(ctx context.Context, offer *provider.Offer) (node *corev1.Node, ready bool, msg string, err error) {
	ready, msg = r.reach(ctx, offer.Provider)
	node, err = r.keep(ctx, offer, ready, msg)
	if err != nil {
		return nil, false, "", err
	}
	return node, ready, msg, nil
}

// reach says whether Health reaches provider, and in what words.
func (r *Reconciler) reach(ctx context.Context, provider string) (bool, string) {
	if err := r.probe(ctx, provider); err != nil {
		return false, "The provider cannot be reached: " + err.Error()
	}
	return true, "The provider's API server answers"
}

// keep is Keep with the provider's reach already asked (once for all the
// nodes of one offer's pools).
func (r *Reconciler) keep(ctx context.Context, offer *provider.Offer, ready bool, msg string) (*corev1.Node, error) {
	node, err := r.ensureNode(ctx, offer)
	if err != nil {
		return nil, err
	}
	if err := r.updateStatus(ctx, node, offer, ready, msg); err != nil {
		return nil, err
	}
	if err := r.renewLease(ctx, node); err != nil {
		return nil, err
	}
	return node, nil
}

// Remove drains and deletes provider's virtual nodes.
func (r *Reconciler) Remove(ctx context.Context, provider string) error {
	return r.removeNodes(ctx, provider)
}

// RenewEvery is how often a virtual node is kept (Keep): a quarter of its
// Lease's duration, as a kubelet renews.
const RenewEvery = leaseDuration / 4

// PeerOffer is the offer of a peer's Advertisement: its provider ID the
// peer's ClusterID, and only the labels a virtual node may show.
func PeerOffer(adv *sharingv1alpha1.Advertisement) *provider.Offer {
	return &provider.Offer{
		Provider: adv.Spec.ClusterIdentity.ClusterID, Name: adv.Spec.ClusterIdentity.ClusterName,
		Resources: adv.Spec.Resources, Labels: sharing.AllowedNodeLabels(adv.Spec.Labels),
		LargestPods: adv.Spec.LargestPods,
	}
}

// PeerOffers are the offers of a peer's Advertisement, one for each
// virtual node: the whole offer (PeerOffer), or, when it has pools, one
// for each: the offer's labels and the pool's (only those a virtual node
// may show; none the pool lacks), the pool's resources (never more of
// one than the whole offer has) and largest pods, and the pool as a
// selector of the exposed labels alone (Offer.Pool). Pools of one
// selector make one node, the first's; one that selects by nothing
// exposed, none; past sharing.MaxPools (the schema's bound), none; and
// without any, the whole offer makes its one node.
func PeerOffers(adv *sharingv1alpha1.Advertisement) []*provider.Offer {
	whole := PeerOffer(adv)
	var out []*provider.Offer
	for _, p := range adv.Spec.Pools[:min(len(adv.Spec.Pools), sharing.MaxPools)] {
		own := sharing.AllowedNodeLabels(p.Labels)
		absent := slices.DeleteFunc(slices.Clone(p.Absent), func(k string) bool { _, ok := own[k]; return !sharing.Exposed(k) || ok })
		sel := sharing.PoolSelector(own, absent)
		if sel == "" || slices.ContainsFunc(out, func(o *provider.Offer) bool { return o.Pool == sel }) {
			continue
		}
		labels := maps.Clone(whole.Labels)
		for _, k := range absent {
			delete(labels, k)
		}
		maps.Copy(labels, own)
		res := corev1.ResourceList{}
		for name, q := range p.Resources {
			if limit := whole.Resources[name]; q.Cmp(limit) > 0 {
				q = limit.DeepCopy()
			}
			res[name] = q
		}
		out = append(out, &provider.Offer{
			Provider: whole.Provider, Name: whole.Name, Resources: res, Labels: labels, LargestPods: p.LargestPods, Pool: sel,
		})
	}
	if len(out) == 0 {
		return []*provider.Offer{whole}
	}
	return out
}

// PoolKey is the key of a pool (its selector): eight hexadecimal digits
// of its hash, which its virtual node's name ends with.
func PoolKey(selector string) string {
	sum := sha256.Sum256([]byte(selector))
	return hex.EncodeToString(sum[:4])
}

// PoolAffinity is the node affinity of the pods bound to node at their
// provider: for a pool's node, its pool (PoolSelectorAnnotation) as
// required terms on the exposed labels alone; nil for another node.
func PoolAffinity(node *corev1.Node) *corev1.NodeAffinity {
	if node.Labels[offloadingv1alpha1.PoolLabel] == "" {
		return nil
	}
	sel, err := klabels.Parse(node.Annotations[offloadingv1alpha1.PoolSelectorAnnotation])
	if err != nil {
		return nil
	}
	reqs, _ := sel.Requirements()
	var exprs []corev1.NodeSelectorRequirement
	for _, r := range reqs {
		if !sharing.Exposed(r.Key()) {
			continue
		}
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			exprs = append(exprs, corev1.NodeSelectorRequirement{Key: r.Key(), Operator: corev1.NodeSelectorOpIn, Values: r.ValuesUnsorted()})
		case selection.DoesNotExist:
			exprs = append(exprs, corev1.NodeSelectorRequirement{Key: r.Key(), Operator: corev1.NodeSelectorOpDoesNotExist})
		}
	}
	if len(exprs) == 0 {
		return nil
	}
	return &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: exprs}},
	}}
}

// Name returns the virtual node's name for a provider: liqo-<name>
// when the provider's name is usable, liqo-<ClusterID> otherwise.
func Name(id discoveryv1alpha1.ClusterIdentity) string {
	if name := "liqo-" + id.ClusterName; id.ClusterName != "" && len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	return "liqo-" + id.ClusterID
}

// nodeName returns the name of provider's virtual node. A node keeps the
// name it was given, as a kubelet's does, whatever the provider calls
// itself later, and gets it back when made again. A new node is
// liqo-<the name the provider announces> only when that name is no other
// cluster's: no node of another provider has it, no other ForeignCluster
// announces it or had a node by it, so that a provider cannot take the
// name (and with it the pods bound to it by hostname) of another
// provider's node while that node is gone. Otherwise it is
// liqo-<ClusterID>.
func (r *Reconciler) nodeName(ctx context.Context, offer *provider.Offer) (string, error) {
	provider := offer.Provider
	var own corev1.NodeList
	if err := r.Client.List(ctx, &own, client.MatchingLabels{offloadingv1alpha1.RemoteClusterLabel: provider}); err != nil {
		return "", err
	}
	var names []string
	for _, n := range own.Items {
		// A pool's node is named after the name remembered below.
		if n.Labels[offloadingv1alpha1.PoolLabel] == "" {
			names = append(names, n.Name)
		}
	}
	if len(names) > 0 {
		slices.Sort(names)
		return names[0], nil
	}
	var clusters discoveryv1alpha1.ForeignClusterList
	if err := r.Client.List(ctx, &clusters); err != nil {
		return "", err
	}
	// claimedByOthers says whether another cluster has name: a node of
	// another provider, the name recorded for another one, or (for a name
	// not yet given, announced) another cluster's announced name.
	claimedByOthers := func(name string, announced bool) bool {
		if claimed(clusters.Items, provider, name, announced) {
			return true
		}
		var existing corev1.Node
		err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &existing)
		return err == nil && existing.Labels[offloadingv1alpha1.RemoteClusterLabel] != provider
	}
	fallback := "liqo-" + provider
	if r.Opaque {
		return r.opaqueName(offer, clusters.Items, claimedByOthers)
	}
	for i := range clusters.Items {
		fc := &clusters.Items[i]
		if remembered := fc.Annotations[offloadingv1alpha1.VirtualNodeNameAnnotation]; fc.Spec.ClusterIdentity.ClusterID == provider && remembered != "" {
			if remembered == fallback || !claimedByOthers(remembered, false) {
				return remembered, nil
			}
			return fallback, nil
		}
	}
	if name := Name(discoveryv1alpha1.ClusterIdentity{ClusterID: provider, ClusterName: offer.Name}); name != fallback && !claimedByOthers(name, true) {
		return name, nil
	}
	return fallback, nil
}

// claimed says whether another cluster than provider has name among
// clusters: the name recorded for its node, or (announced, for a name
// not yet given) the name it announces, or the name of a pool's node of
// either (the name, a dash and eight hexadecimal digits).
func claimed(clusters []discoveryv1alpha1.ForeignCluster, provider, name string, announced bool) bool {
	is := func(base string) bool {
		key, ok := strings.CutPrefix(name, base+"-")
		return base != "" && (name == base || ok && isPoolKey(key))
	}
	for i := range clusters {
		fc := &clusters[i]
		if fc.Spec.ClusterIdentity.ClusterID != provider && fc.Spec.ClusterIdentity.ClusterID != "" &&
			(is(fc.Annotations[offloadingv1alpha1.VirtualNodeNameAnnotation]) || announced && is(Name(fc.Spec.ClusterIdentity))) {
			return true
		}
	}
	return false
}

// isPoolKey says whether key could be a PoolKey.
func isPoolKey(key string) bool {
	_, err := hex.DecodeString(key)
	return len(key) == 8 && err == nil && strings.ToLower(key) == key
}

// opaqueName is the name of a new virtual node of provider that tells
// nothing of it: the one remembered for it, unless that names the
// provider (given before the names were opaque) or another cluster has
// it; else liqo- and ten random hexadecimal digits.
func (r *Reconciler) opaqueName(offer *provider.Offer, clusters []discoveryv1alpha1.ForeignCluster, claimedByOthers func(string, bool) bool) (string, error) {
	telling := func(name string) bool {
		return name == "liqo-"+offer.Provider || name == Name(discoveryv1alpha1.ClusterIdentity{ClusterID: offer.Provider, ClusterName: offer.Name}) ||
			strings.Contains(name, offer.Provider) || offer.Name != "" && strings.Contains(name, offer.Name)
	}
	for i := range clusters {
		fc := &clusters[i]
		if remembered := fc.Annotations[offloadingv1alpha1.VirtualNodeNameAnnotation]; fc.Spec.ClusterIdentity.ClusterID == offer.Provider && remembered != "" &&
			!telling(remembered) && !claimedByOthers(remembered, false) {
			return remembered, nil
		}
	}
	for range 8 {
		b := make([]byte, 5)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		if name := "liqo-" + hex.EncodeToString(b); !telling(name) && !claimedByOthers(name, true) {
			return name, nil
		}
	}
	return "", errors.New("no free random name")
}

// rememberNodeName records name on provider's ForeignCluster.
func (r *Reconciler) rememberNodeName(ctx context.Context, provider, name string) error {
	var list discoveryv1alpha1.ForeignClusterList
	if err := r.Client.List(ctx, &list, client.MatchingLabels{discoveryv1alpha1.ClusterIDLabel: provider}); err != nil {
		return err
	}
	for i := range list.Items {
		fc := &list.Items[i]
		if fc.Annotations[offloadingv1alpha1.VirtualNodeNameAnnotation] == name {
			continue
		}
		patch := client.MergeFrom(fc.DeepCopy())
		metav1.SetMetaDataAnnotation(&fc.ObjectMeta, offloadingv1alpha1.VirtualNodeNameAnnotation, name)
		if err := r.Client.Patch(ctx, fc, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("recording the virtual node name on ForeignCluster %s: %w", fc.Name, err)
		}
	}
	return nil
}

// FieldManager is the virtual kubelet's name in a virtual node's
// managedFields.
const FieldManager = "liqo-virtual-kubelet"

// ensureNode creates the provider's virtual node, or keeps what the
// virtual kubelet owns of it, and only that: its labels and the largest
// pods annotation (applied, so that those the provider no longer offers
// go and an operator's stay) and its taint (added if missing). The node is shared with operators and other
// controllers, as a kubelet shares its Node: spec.unschedulable (cordon),
// their taints, labels and annotations are theirs, never written back.
func (r *Reconciler) ensureNode(ctx context.Context, offer *provider.Offer) (*corev1.Node, error) {
	provider := offer.Provider
	base, err := r.nodeName(ctx, offer)
	if err != nil {
		return nil, fmt.Errorf("naming the virtual node of %s: %w", provider, err)
	}
	name := base
	labels := maps.Clone(offer.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	annotations := map[string]string{}
	if offer.Pool != "" {
		if name, err = r.poolNodeName(ctx, base, offer); err != nil {
			return nil, err
		}
		labels[offloadingv1alpha1.PoolLabel] = PoolKey(offer.Pool)
		annotations[offloadingv1alpha1.PoolSelectorAnnotation] = offer.Pool
	}
	labels[offloadingv1alpha1.VirtualNodeLabel] = offloadingv1alpha1.VirtualNodeValue
	labels[offloadingv1alpha1.RemoteClusterLabel] = provider
	labels[discoveryv1alpha1.ManagedByLabel] = discoveryv1alpha1.ManagedByValue
	labels["kubernetes.io/hostname"] = name
	labels["kubernetes.io/role"] = "agent"
	if v := sharing.FormatLargestPods(offer.LargestPods); v != "" {
		annotations[offloadingv1alpha1.LargestPodsAnnotation] = v
	}
	taint := corev1.Taint{Key: offloadingv1alpha1.VirtualNodeTaint, Value: "true", Effect: corev1.TaintEffectNoExecute}

	// Read live: the cache may still hold a node of this name that was
	// removed and is being made again, whose status would be taken as
	// already written.
	var reader client.Reader = r.Client
	if r.APIReader != nil {
		reader = r.APIReader
	}
	node := &corev1.Node{}
	err = reader.Get(ctx, client.ObjectKey{Name: name}, node)
	if apierrors.IsNotFound(err) {
		// Born tainted, so that nothing lands on it in between, and
		// labelled virtual: the controller manager may write no other node
		// (the admission policy liqo-controller-manager-nodes).
		node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint}}}
		if r.Untainted {
			node.Spec.Taints = nil
		}
		if err := r.Client.Create(ctx, node, client.FieldOwner(FieldManager)); err != nil {
			return nil, fmt.Errorf("creating virtual node %s: %w", name, err)
		}
	} else if err != nil {
		return nil, err
	} else if owner := node.Labels[offloadingv1alpha1.RemoteClusterLabel]; owner != provider {
		return nil, fmt.Errorf("node %s is not a virtual node of %s (its %s is %q)", name, provider, offloadingv1alpha1.RemoteClusterLabel, owner)
	}
	if !r.metaApplied(node, labels, annotations) {
		if err := r.Client.Apply(ctx, corev1ac.Node(name).WithLabels(labels).WithAnnotations(annotations), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("labelling virtual node %s: %w", name, err)
		}
		r.applied.Store(name, appliedMeta{labels: maps.Clone(labels), annotations: maps.Clone(annotations)})
		// What follows writes against the version read: read the one
		// the labels made.
		if err := reader.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return nil, err
		}
	}
	// Taints are one atomic list: ours is added to what the others set,
	// and a concurrent change makes this try again rather than drop theirs.
	ours := func(t corev1.Taint) bool { return t.Key == offloadingv1alpha1.VirtualNodeTaint }
	tainted := slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&taint) && t.Value == taint.Value })
	if r.Untainted && slices.ContainsFunc(node.Spec.Taints, ours) || !r.Untainted && !tainted {
		patch := client.MergeFromWithOptions(node.DeepCopy(), client.MergeFromWithOptimisticLock{})
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, ours)
		if !r.Untainted {
			node.Spec.Taints = append(node.Spec.Taints, taint)
		}
		if err := r.Client.Patch(ctx, node, patch, client.FieldOwner(FieldManager)); err != nil {
			return nil, fmt.Errorf("tainting virtual node %s: %w", name, err)
		}
	}
	if err := r.rememberNodeName(ctx, provider, base); err != nil {
		return nil, err
	}
	return node, nil
}

// poolNodeName is the name of the node of offer's pool: the provider's
// node name (base), a dash and the pool's key; or, when another cluster
// has that (a node of it, or a name it claims) or it cannot be a node's
// and a hostname label's, liqo-, twelve hexadecimal digits of the
// provider's hash and the key.
func (r *Reconciler) poolNodeName(ctx context.Context, base string, offer *provider.Offer) (string, error) {
	var clusters discoveryv1alpha1.ForeignClusterList
	if err := r.Client.List(ctx, &clusters); err != nil {
		return "", err
	}
	key := PoolKey(offer.Pool)
	sum := sha256.Sum256([]byte(offer.Provider))
	for _, name := range []string{base + "-" + key, "liqo-" + hex.EncodeToString(sum[:6]) + "-" + key} {
		if len(validation.IsDNS1123Subdomain(name)) > 0 || len(validation.IsValidLabelValue(name)) > 0 || claimed(clusters.Items, offer.Provider, name, true) {
			continue
		}
		var existing corev1.Node
		err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &existing)
		if apierrors.IsNotFound(err) || err == nil && existing.Labels[offloadingv1alpha1.RemoteClusterLabel] == offer.Provider {
			return name, nil
		}
		if err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("no free name for the virtual node of %s's pool %s", offer.Provider, offer.Pool)
}

// appliedMeta is what this controller manager last applied of a node.
type appliedMeta struct{ labels, annotations map[string]string }

// metaApplied says whether labels and annotations are what this
// controller manager last applied to node and the node still carries
// them: an apply a reconcile (every 10 s) is a write saved.
func (r *Reconciler) metaApplied(node *corev1.Node, labels, annotations map[string]string) bool {
	v, ok := r.applied.Load(node.Name)
	if !ok {
		return false
	}
	last := v.(appliedMeta)
	if !maps.Equal(last.labels, labels) || !maps.Equal(last.annotations, annotations) {
		return false
	}
	for k, v := range labels {
		if node.Labels[k] != v {
			return false
		}
	}
	for k, v := range annotations {
		if node.Annotations[k] != v {
			return false
		}
	}
	return true
}

func (r *Reconciler) updateStatus(ctx context.Context, node *corev1.Node, offer *provider.Offer, ready bool, msg string) error {
	orig := node.DeepCopy()
	now := metav1.NewTime(r.now())
	node.Status.Capacity = offer.Resources.DeepCopy()
	node.Status.Allocatable = offer.Resources.DeepCopy()
	node.Status.NodeInfo = corev1.NodeSystemInfo{
		KubeletVersion: KubeletVersion, OperatingSystem: "linux", Architecture: orDefault(offer.Labels["kubernetes.io/arch"], "amd64"),
		MachineID: offer.Provider, SystemUUID: offer.Provider,
	}
	status, reason := corev1.ConditionTrue, "ProviderReachable"
	if !ready {
		status, reason = corev1.ConditionFalse, "ProviderUnreachable"
	}
	conds := []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: status, Reason: reason, Message: msg},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "VirtualNode", Message: "A virtual node has no memory pressure"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "VirtualNode", Message: "A virtual node has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "VirtualNode", Message: "A virtual node has no PID pressure"},
		{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "VirtualNode", Message: "Reached through the provider"},
	}
	changed := false
	for i := range conds {
		c := &conds[i]
		c.LastHeartbeatTime, c.LastTransitionTime = now, now
		for _, old := range orig.Status.Conditions {
			if old.Type == c.Type {
				if old.Status == c.Status {
					c.LastTransitionTime = old.LastTransitionTime
				}
				if old.Status != c.Status || old.Reason != c.Reason || old.Message != c.Message {
					changed = true
				}
			}
		}
	}
	if len(orig.Status.Conditions) != len(conds) {
		changed = true
	}
	node.Status.Conditions = conds
	node.Status.Addresses, node.Status.DaemonEndpoints = nil, corev1.NodeDaemonEndpoints{}
	if r.KubeletAddress != "" && r.Kubelet != nil {
		port, err := r.Kubelet.Endpoint(ctx, node.Name)
		if err != nil {
			return err
		}
		// No Hostname address: the API server prefers it by default, and
		// the node's name resolves nowhere.
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: r.KubeletAddress}}
		node.Status.DaemonEndpoints.KubeletEndpoint.Port = port
	}
	if !equality.Semantic.DeepEqual(orig.Status.Addresses, node.Status.Addresses) || orig.Status.DaemonEndpoints != node.Status.DaemonEndpoints {
		changed = true
	}
	// Like a kubelet with leases: status written on change, and at least
	// every few minutes.
	if !changed && equality.Semantic.DeepEqual(orig.Status.Allocatable, node.Status.Allocatable) && orig.Status.NodeInfo == node.Status.NodeInfo &&
		len(orig.Status.Conditions) > 0 && r.now().Sub(orig.Status.Conditions[0].LastHeartbeatTime.Time) < 5*time.Minute {
		return nil
	}
	// Against the version read: a difference from another node of the
	// same name would leave out what the two share.
	return r.Client.Status().Patch(ctx, node, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

func (r *Reconciler) renewLease(ctx context.Context, node *corev1.Node) error {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: node.Name}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, lease, func() error {
		lease.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		lease.Spec.HolderIdentity = ptr.To(node.Name)
		lease.Spec.LeaseDurationSeconds = ptr.To(int32(leaseDuration / time.Second))
		lease.Spec.RenewTime = &metav1.MicroTime{Time: r.now()}
		return nil
	})
	return err
}

// removeNodes drains and deletes the virtual nodes of provider but those
// named in keep (their Leases go with them, being owned by them).
// Draining deletes the pods bound to the node at once, as a kubelet
// confirms their end, so that their controllers replace them without
// waiting for the pod garbage collector; the pod reflector deletes their
// provider copies.
func (r *Reconciler) removeNodes(ctx context.Context, provider string, keep ...string) error {
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, client.MatchingLabels{offloadingv1alpha1.RemoteClusterLabel: provider}); err != nil {
		return err
	}
	for i := range nodes.Items {
		if slices.Contains(keep, nodes.Items[i].Name) {
			continue
		}
		// Cordoned first, so that the scheduler stops placing pods on it.
		if !nodes.Items[i].Spec.Unschedulable {
			patch := client.MergeFrom(nodes.Items[i].DeepCopy())
			nodes.Items[i].Spec.Unschedulable = true
			if err := r.Client.Patch(ctx, &nodes.Items[i], patch); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("cordoning virtual node %s: %w", nodes.Items[i].Name, err)
			}
		}
		var pods corev1.PodList
		if err := r.Client.List(ctx, &pods, client.MatchingFields{PodsByNodeField: nodes.Items[i].Name}); err != nil {
			return err
		}
		for j := range pods.Items {
			if err := r.Client.Delete(ctx, &pods.Items[j], client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("draining virtual node %s: %w", nodes.Items[i].Name, err)
			}
		}
		if err := r.Client.Delete(ctx, &nodes.Items[i]); client.IgnoreNotFound(err) != nil {
			return err
		}
		r.applied.Delete(nodes.Items[i].Name)
		if r.Kubelet != nil {
			r.Kubelet.Release(nodes.Items[i].Name)
		}
		ctrl.LoggerFrom(ctx).Info("Virtual node removed", "node", nodes.Items[i].Name, "provider", provider)
	}
	return nil
}

// probe asks the provider's API server whether it is ready, as the
// virtual kubelet.
func (r *Reconciler) probe(ctx context.Context, id string) error {
	return r.Health.Ping(ctx, id)
}

// reflect sets (or, with an empty status, removes) VirtualNodeReady on
// the provider's ForeignCluster.
func (r *Reconciler) reflect(ctx context.Context, provider string, status metav1.ConditionStatus, reason, msg string) error {
	fc, err := foreigncluster.Find(ctx, r.Client, provider)
	if err != nil || fc == nil {
		return err
	}
	cur := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionVirtualNodeReady)
	if (status == "" && cur == nil) || (cur != nil && cur.Status == status && cur.Reason == reason && cur.Message == msg) {
		return nil
	}
	orig := fc.DeepCopy()
	if status == "" {
		meta.RemoveStatusCondition(&fc.Status.Conditions, discoveryv1alpha1.ConditionVirtualNodeReady)
	} else {
		meta.SetStatusCondition(&fc.Status.Conditions, metav1.Condition{
			Type: discoveryv1alpha1.ConditionVirtualNodeReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: fc.Generation,
		})
	}
	return client.IgnoreNotFound(foreigncluster.PatchStatus(ctx, r.Client, r.APIReader, orig, fc))
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	// The virtual kubelet's kubeconfig arrives in the consumer's identity
	// Secret for the provider: look at once.
	identityChanged := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		provider := o.GetLabels()[discoveryv1alpha1.ClusterIDLabel]
		if provider == "" || o.GetName() != identity.RemoteSecretName(provider) {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{
			Namespace: discoveryv1alpha1.TenantNamespace(provider), Name: sharingv1alpha1.AdvertisementName(provider),
		}}}
	})
	// A virtual node cordoned or uncordoned shows at once on its
	// ForeignCluster.
	nodeOf := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		provider := o.GetLabels()[offloadingv1alpha1.RemoteClusterLabel]
		if provider == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{
			Namespace: discoveryv1alpha1.TenantNamespace(provider), Name: sharingv1alpha1.AdvertisementName(provider),
		}}}
	})
	cordonChanged := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.(*corev1.Node).Spec.Unschedulable != e.ObjectNew.(*corev1.Node).Spec.Unschedulable
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&sharingv1alpha1.Advertisement{}).
		Watches(&corev1.Secret{}, identityChanged).
		Watches(&corev1.Node{}, nodeOf, builder.WithPredicates(cordonChanged)).
		Named("virtualnode").
		Complete(r)
}

// PodsByNodeField indexes pods by the node they are bound to.
const PodsByNodeField = "spec.nodeName"

// IndexPods adds the index of pods by node that the node Reconciler and
// the pod reflector list with; call it once, before setting them up.
func IndexPods(ctx context.Context, mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, PodsByNodeField, func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	})
}

// Ready returns the status of n's Ready condition (Unknown without one).
func Ready(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}
