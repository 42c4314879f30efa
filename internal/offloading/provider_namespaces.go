// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/remotewatch"
)

// ProviderNamespaces is how a consumer asks a provider for the namespace
// one of its namespaces is offloaded to there, and gives it back. A peer
// is asked through its NamespaceMap (PeerNamespaces); a provider that is
// not one peer (the broker's aggregator, which would make the namespace
// in each cluster it spreads over) asks its own way. Whatever backs a
// provider, the NamespaceOffloading's status has one entry for it, by its
// provider ID, which the reflectors follow.
type ProviderNamespaces interface {
	// Request asks provider for remote, where local goes, tells it what
	// local's pods bound to it ask for (demand, under a ResourceQuota's
	// names; see Demands), and returns what the provider says of remote
	// so far.
	Request(ctx context.Context, provider, local, remote string, demand corev1.ResourceList) (offloadingv1alpha1.RemoteNamespaceStatus, error)
	// Release gives local's namespace in provider back; nil when the
	// provider released it already.
	Release(ctx context.Context, provider, local string) error
	// Watch wakes, on Events, the NamespaceOffloadings waiting for
	// provider when it answers.
	Watch(ctx context.Context, provider string)
	// Events are those wake-ups, for a reconciler's source.Channel.
	Events() <-chan event.GenericEvent
}

// PeerNamespaces asks a peer for namespaces through the NamespaceMap this
// cluster keeps in its tenant namespace there, with its virtual kubelet's
// identity, and watches the peer's answers in that NamespaceMap's status.
type PeerNamespaces struct {
	// Client lists the local NamespaceOffloadings; its scheme decodes.
	Client client.Client
	// Remotes gives the virtual kubelet's client in each provider.
	Remotes *identity.Remotes
	// LocalClusterID names the tenant namespace in the peer.
	LocalClusterID string

	once          sync.Once
	namespaceMaps *remotewatch.Set
}

var _ ProviderNamespaces = &PeerNamespaces{}

func (p *PeerNamespaces) init() {
	p.once.Do(func() { p.namespaceMaps = remotewatch.New(namespaceMapWatchLimit) })
}

// Events implements ProviderNamespaces.
func (p *PeerNamespaces) Events() <-chan event.GenericEvent {
	p.init()
	return p.namespaceMaps.Events
}

// namespaceMapWatchLimit bounds one watch of a provider's NamespaceMap.
const namespaceMapWatchLimit = 2 * time.Minute

// Watch watches this cluster's NamespaceMap in provider (the
// virtual kubelet's identity may watch it in its tenant namespace) and, on
// each change, wakes the NamespaceOffloadings that wait for that provider.
func (p *PeerNamespaces) Watch(ctx context.Context, provider string) {
	p.init()
	p.namespaceMaps.Start(ctx, provider, func(ctx context.Context) (watch.Interface, error) {
		cfg, err := p.Remotes.Config(ctx, provider)
		if err != nil {
			return nil, err
		}
		return remotewatch.ByName(ctx, cfg, p.Client.Scheme(), &offloadingv1alpha1.NamespaceMapList{},
			discoveryv1alpha1.TenantNamespace(p.LocalClusterID), offloadingv1alpha1.NamespaceMapName)
	}, func(ctx context.Context, obj runtime.Object) ([]client.Object, bool) {
		nm, _ := obj.(*offloadingv1alpha1.NamespaceMap)
		var list offloadingv1alpha1.NamespaceOffloadingList
		if err := p.Client.List(ctx, &list); err != nil {
			return nil, false
		}
		var waiting []client.Object
		for i := range list.Items {
			for _, st := range list.Items[i].Status.RemoteNamespaces {
				if st.ClusterID == provider && (st.Phase != offloadingv1alpha1.RemoteNamespaceReady || outdated(st, nm, list.Items[i].Namespace)) {
					waiting = append(waiting, &list.Items[i])
					break
				}
			}
		}
		return waiting, false
	})
}

// outdated says whether st, the status entry of local's namespace in a
// provider, no longer says what the provider's NamespaceMap nm does (its
// phase, message or DNS, as Request reads them): a Ready namespace whose
// provider now says more (its DNS proxy came) is looked at again too.
func outdated(st offloadingv1alpha1.RemoteNamespaceStatus, nm *offloadingv1alpha1.NamespaceMap, local string) bool {
	if nm == nil {
		return false
	}
	got, ok := nm.Status.Namespaces[local]
	if !ok || nm.Status.ObservedGeneration == 0 || got.Namespace != st.Namespace {
		return false // Request would leave st as it is
	}
	return got.Phase != st.Phase || got.Message != st.Message || !equality.Semantic.DeepEqual(validDNS(nm.Status.DNS), st.DNS)
}

// Request adds local -> remote to provider's NamespaceMap, with local's
// demand, and returns what the provider reports for it.
func (p *PeerNamespaces) Request(ctx context.Context, provider, local, remote string, demand corev1.ResourceList) (offloadingv1alpha1.RemoteNamespaceStatus, error) {
	st := offloadingv1alpha1.RemoteNamespaceStatus{ClusterID: provider, Namespace: remote, Phase: offloadingv1alpha1.RemoteNamespacePending,
		Message: "Waiting for the provider"}
	c, err := p.Remotes.For(ctx, provider)
	if err != nil {
		return st, err
	}
	nm := &offloadingv1alpha1.NamespaceMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: discoveryv1alpha1.TenantNamespace(p.LocalClusterID), Name: offloadingv1alpha1.NamespaceMapName,
	}}
	if err := c.Get(ctx, client.ObjectKeyFromObject(nm), nm); apierrors.IsNotFound(err) {
		nm.Spec.Mappings = map[string]offloadingv1alpha1.NamespaceName{local: offloadingv1alpha1.NamespaceName(remote)}
		if len(demand) > 0 {
			nm.Spec.Demands = map[string]corev1.ResourceList{local: demand}
		}
		if err := c.Create(ctx, nm); err != nil && !apierrors.IsAlreadyExists(err) {
			return st, fmt.Errorf("creating the NamespaceMap: %w", err)
		}
		return st, nil
	} else if err != nil {
		return st, fmt.Errorf("reading the NamespaceMap: %w", err)
	}
	if string(nm.Spec.Mappings[local]) != remote {
		return st, patchMapping(ctx, c, nm, local, &remote, demand)
	}
	// What the provider reports of remote: a change of demand alone
	// leaves the namespace as it is, so a report of an earlier
	// generation still holds for it (another namespace for local is
	// another name, and waits).
	if got, ok := nm.Status.Namespaces[local]; ok && nm.Status.ObservedGeneration > 0 && got.Namespace == remote {
		st.Phase, st.Message, st.DNS = got.Phase, got.Message, validDNS(nm.Status.DNS)
	}
	if !equality.Semantic.DeepEqual(nm.Spec.Demands[local], demand) {
		if err := patchMapping(ctx, c, nm, local, &remote, demand); err != nil {
			return st, err
		}
	}
	return st, nil
}

// Release removes local from provider's NamespaceMap; a provider
// that no longer lets this cluster in (unpeered) has released it already.
func (p *PeerNamespaces) Release(ctx context.Context, provider, local string) error {
	c, err := p.Remotes.For(ctx, provider)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	nm := &offloadingv1alpha1.NamespaceMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: discoveryv1alpha1.TenantNamespace(p.LocalClusterID), Name: offloadingv1alpha1.NamespaceMapName,
	}}
	// The pods this cluster still has there go first, while its virtual
	// kubelet may still delete them: those of a provider released while
	// it did not answer (a broker's failover) would otherwise wait on the
	// provider's own namespace deletion, however slow.
	if err := p.refused(ctx, provider, p.deleteLeftPods(ctx, c, nm, local)); err != nil {
		return err
	}
	err = patchMapping(ctx, c, nm, local, nil, nil)
	if apierrors.IsNotFound(err) {
		return nil
	}
	// Refused: the provider no longer lets this cluster in, and let the
	// namespace go with the peering.
	return p.refused(ctx, provider, err)
}

// refused returns nil for err nil, or a refusal (Forbidden) by a provider
// that is ready: it no longer lets this cluster do that. A provider
// that is only starting again refuses everyone until its authorizer's
// caches are synced (its /readyz says so); taking that for its word
// would leave this cluster's pods running there for good, so that is an
// error, to ask again.
func (p *PeerNamespaces) refused(ctx context.Context, provider string, err error) error {
	if err == nil || !apierrors.IsForbidden(err) {
		return err
	}
	cfg, cerr := p.Remotes.Config(ctx, provider)
	if cerr != nil {
		return cerr
	}
	if rerr := identity.Readyz(ctx, cfg); rerr != nil {
		return fmt.Errorf("the provider refuses (%w) and is not ready (%w): asking again", err, rerr)
	}
	return nil
}

// deleteLeftPods deletes the pods this cluster made in the provider
// namespace local maps to, but those already going.
func (p *PeerNamespaces) deleteLeftPods(ctx context.Context, c client.Client, nm *offloadingv1alpha1.NamespaceMap, local string) error {
	var current offloadingv1alpha1.NamespaceMap
	if err := c.Get(ctx, client.ObjectKeyFromObject(nm), &current); err != nil {
		return client.IgnoreNotFound(err)
	}
	remote := current.Spec.Mappings[local]
	if remote == "" {
		return nil
	}
	// Their ShadowPods first, which would make them again (a provider of
	// a version before them has none).
	if err := c.DeleteAllOf(ctx, &offloadingv1alpha1.ShadowPod{}, client.InNamespace(remote),
		client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: p.LocalClusterID}); err != nil &&
		!apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) && !apierrors.IsForbidden(err) {
		return fmt.Errorf("deleting this cluster's ShadowPods left in %s: %w", remote, err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(remote), client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: p.LocalClusterID}); err != nil {
		return fmt.Errorf("listing this cluster's pods left in %s: %w", remote, err)
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !pod.DeletionTimestamp.IsZero() {
			continue
		}
		if err := c.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting pod %s/%s left in the provider: %w", remote, pod.Name, err)
		}
	}
	return nil
}

// patchMapping sets (or, with a nil remote, removes) one key of the
// NamespaceMap, its mapping and its demand (none when empty), with a merge
// patch, which touches no other key.
func patchMapping(ctx context.Context, c client.Client, nm *offloadingv1alpha1.NamespaceMap, local string, remote *string, demand corev1.ResourceList) error {
	var d *corev1.ResourceList
	if remote != nil && len(demand) > 0 {
		d = &demand
	}
	body, err := json.Marshal(map[string]any{"spec": map[string]any{
		"mappings": map[string]*string{local: remote},
		"demands":  map[string]*corev1.ResourceList{local: d},
	}})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, nm, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("updating the NamespaceMap: %w", err)
	}
	return nil
}

// validDNS is what a provider says of its DNS for this cluster, when it
// is what the NamespaceOffloading's schema takes (an IP address, a
// domain name); nil otherwise: a provider's word that the status could
// not hold must not keep the other providers' out of it.
func validDNS(d *offloadingv1alpha1.ConsumerDNS) *offloadingv1alpha1.ConsumerDNS {
	if d == nil {
		return nil
	}
	// What the schema's isIP refuses is refused here too: a zone, an
	// IPv4 address written as IPv6.
	a, err := netip.ParseAddr(d.Nameserver)
	if err != nil || a.Zone() != "" || a.Is4In6() || len(d.Nameserver) > 45 || len(d.Domain) > 253 || len(validation.IsDNS1123Subdomain(d.Domain)) > 0 {
		return nil
	}
	return d.DeepCopy()
}
