// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package objects is the virtual kubelet's object reflection: the
// ConfigMaps, Secrets and Services of an offloaded namespace are copied to
// every provider it offloads to, and follow their originals.
package objects

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/network/transit"
	"github.com/liqo-go/liqo/internal/virtualkubelet/forge"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
)

// +kubebuilder:rbac:groups="",resources=configmaps;secrets;services,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch

// objectKind says how one kind of object is reflected.
type objectKind struct {
	name provider.Kind
	// newObject returns an empty object of the kind.
	newObject func() client.Object
	// newList returns an empty list of the kind.
	newList func() client.ObjectList
	// forge returns the provider copy of local for to, or nil when local
	// is not reflected there.
	forge func(local client.Object, to destination) client.Object
	// same says whether the provider copy already matches the forged one.
	same func(remote, desired client.Object) bool
}

// destination is where a copy goes: a provider's namespace, and what the
// forging of an EndpointSlice needs to know of that provider.
type destination struct {
	// namespace is the provider namespace; consumerID this cluster's.
	namespace, consumerID string
	// toProvider shows a local address as the provider reaches it; false
	// when it cannot (no agreement on the network with the provider).
	toProvider func(netip.Addr) (netip.Addr, bool)
	// virtual says whether the node named is a virtual node: its pods run
	// in providers, and their endpoints are the providers' own.
	virtual func(node string) bool
	// offloaded shows the address this cluster shows for one of the
	// namespace's pods that the provider runs as the provider has it;
	// false for any other address (of EndpointSlices made by hand).
	offloaded func(netip.Addr) (netip.Addr, bool)
	// transit leads the provider, through this cluster (an aggregator),
	// to the endpoints of a consumer's copy of a slice at the consumer:
	// the address of this cluster's external range for each (Transit).
	transit map[netip.Addr]netip.Addr
	// orchestrator says whether the provider moves the namespace's pods
	// on in turn (a broker): PodDisruptionBudgets go there alone.
	orchestrator bool
	// here and healthyElsewhere count the local pods a budget selects:
	// those on the provider's virtual nodes, and the healthy ones (ready,
	// not being deleted) elsewhere (countPods, for a budget only).
	here, healthyElsewhere int32
}

// ObjectKinds are the kinds reflected into each provider namespace:
// ConfigMaps, the Secrets the namespace's pods use (all of them with
// spec.secretReflection All), Services (with their selector, so that the
// provider's endpoints controller fills them with the provider pods), and
// the EndpointSlices of the consumer's own endpoints of those Services, at
// the addresses the provider reaches them at through the network fabric.
var objectKinds = []objectKind{
	{
		name:      provider.ConfigMaps,
		newObject: func() client.Object { return &corev1.ConfigMap{} },
		newList:   func() client.ObjectList { return &corev1.ConfigMapList{} },
		forge: func(o client.Object, to destination) client.Object {
			ns, id := to.namespace, to.consumerID
			cm := o.(*corev1.ConfigMap)
			// Every namespace has its own CA bundle from its own cluster.
			if cm.Name == forge.RootCAConfigMap {
				return nil
			}
			return &corev1.ConfigMap{ObjectMeta: forge.Meta(&cm.ObjectMeta, ns, id), Data: cm.Data, BinaryData: cm.BinaryData, Immutable: cm.Immutable}
		},
		same: func(r, d client.Object) bool {
			a, b := r.(*corev1.ConfigMap), d.(*corev1.ConfigMap)
			return sameMeta(a, b) && equality.Semantic.DeepEqual(a.Data, b.Data) && equality.Semantic.DeepEqual(a.BinaryData, b.BinaryData)
		},
	},
	{
		name:      provider.Secrets,
		newObject: func() client.Object { return &corev1.Secret{} },
		newList:   func() client.ObjectList { return &corev1.SecretList{} },
		forge: func(o client.Object, to destination) client.Object {
			ns, id := to.namespace, to.consumerID
			s := o.(*corev1.Secret)
			// The consumer's service account tokens never leave it.
			if s.Type == corev1.SecretTypeServiceAccountToken {
				return nil
			}
			return &corev1.Secret{ObjectMeta: forge.Meta(&s.ObjectMeta, ns, id), Data: s.Data, Type: s.Type, Immutable: s.Immutable}
		},
		same: func(r, d client.Object) bool {
			a, b := r.(*corev1.Secret), d.(*corev1.Secret)
			return sameMeta(a, b) && equality.Semantic.DeepEqual(a.Data, b.Data)
		},
	},
	{
		name:      provider.Services,
		newObject: func() client.Object { return &corev1.Service{} },
		newList:   func() client.ObjectList { return &corev1.ServiceList{} },
		forge: func(o client.Object, to destination) client.Object {
			ns, id := to.namespace, to.consumerID
			svc := o.(*corev1.Service)
			if svc.Spec.Type == corev1.ServiceTypeExternalName {
				return &corev1.Service{ObjectMeta: forge.Meta(&svc.ObjectMeta, ns, id), Spec: corev1.ServiceSpec{
					Type: corev1.ServiceTypeExternalName, ExternalName: svc.Spec.ExternalName, Ports: svc.Spec.Ports,
				}}
			}
			// Addresses and node ports are the provider's to allocate.
			ports := make([]corev1.ServicePort, len(svc.Spec.Ports))
			for i, p := range svc.Spec.Ports {
				p.NodePort = 0
				ports[i] = p
			}
			return &corev1.Service{ObjectMeta: forge.Meta(&svc.ObjectMeta, ns, id), Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeClusterIP, Selector: svc.Spec.Selector, Ports: ports, ClusterIP: askedClusterIP(svc),
				PublishNotReadyAddresses: svc.Spec.PublishNotReadyAddresses, SessionAffinity: svc.Spec.SessionAffinity,
				SessionAffinityConfig: svc.Spec.SessionAffinityConfig.DeepCopy(),
			}}
		},
		same: func(r, d client.Object) bool {
			a, b := r.(*corev1.Service), d.(*corev1.Service)
			if !sameMeta(a, b) || a.Spec.Type != b.Spec.Type || headless(a) != headless(b) || !equality.Semantic.DeepEqual(a.Spec.Selector, b.Spec.Selector) ||
				len(a.Spec.Ports) != len(b.Spec.Ports) || a.Spec.ExternalName != b.Spec.ExternalName ||
				a.Spec.PublishNotReadyAddresses != b.Spec.PublishNotReadyAddresses || !sameAffinity(a, b) {
				return false
			}
			for i := range a.Spec.Ports {
				pa, pb := a.Spec.Ports[i], b.Spec.Ports[i]
				if pa.Name != pb.Name || pa.Port != pb.Port || pa.TargetPort != pb.TargetPort || pa.Protocol != pb.Protocol {
					return false
				}
			}
			return true
		},
	},
	{
		name:      provider.PodDisruptionBudgets,
		newObject: func() client.Object { return &policyv1.PodDisruptionBudget{} },
		newList:   func() client.ObjectList { return &policyv1.PodDisruptionBudgetList{} },
		forge:     forgeBudget,
		same: func(r, d client.Object) bool {
			a, b := r.(*policyv1.PodDisruptionBudget), d.(*policyv1.PodDisruptionBudget)
			return sameMeta(a, b) && equality.Semantic.DeepEqual(a.Spec, b.Spec)
		},
	},
	{
		name:      provider.EndpointSlices,
		newObject: func() client.Object { return &discoveryv1.EndpointSlice{} },
		newList:   func() client.ObjectList { return &discoveryv1.EndpointSliceList{} },
		forge:     forgeEndpointSlice,
		same: func(r, d client.Object) bool {
			a, b := r.(*discoveryv1.EndpointSlice), d.(*discoveryv1.EndpointSlice)
			return sameMeta(a, b) && a.AddressType == b.AddressType && equality.Semantic.DeepEqual(a.Ports, b.Ports) &&
				equality.Semantic.DeepEqual(a.Endpoints, b.Endpoints)
		},
	},
}

// askedClusterIP is the cluster IP a Service's copy asks the provider
// for: the one it has here, so that offloaded pods reach the Service at
// the address the consumer shows them (in its environment variables, in
// what the consumer's clients hand them). The provider grants it only when
// it is free, in its range and outside the band its allocator keeps for
// addresses chosen by hand (the liqo-offloaded-service-ips policy); sync
// lets the provider choose otherwise. IPv4 only: the policy guards only
// IPv4's band. A headless Service stays headless (None is no address).
func askedClusterIP(svc *corev1.Service) string {
	if headless(svc) {
		return corev1.ClusterIPNone // headless there too: the provider's DNS names its pods
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil || !ip.Is4() {
		return ""
	}
	return ip.String()
}

// EndpointSliceManager is the endpointslice.kubernetes.io/managed-by value
// of the EndpointSlices the virtual kubelet writes in providers.
const EndpointSliceManager = provider.EndpointSliceManager

// endpointSliceController is the managed-by value of the slices the
// EndpointSlice controller makes for the Services with a selector.
const endpointSliceController = "endpointslice-controller.k8s.io"

// forgeEndpointSlice copies a slice of a Service: its endpoints at the
// addresses the provider reaches them at, so that the provider's pods
// reach them through the reflected Service. Of a slice the
// consumer's EndpointSlice controller made, the endpoints that run in
// the consumer (not on a virtual node: the provider's own controller
// lists the pods it runs), and, on an aggregator, those at the other
// providers through this cluster (to.transit). Of a slice made by hand (for a Service
// without a selector, by a user or another controller), every address
// the provider can reach: the consumer's own, and those of the pods of
// the namespace the provider runs, at the provider's own addresses.
// Nothing is copied while the network has no agreement with the
// provider, nor an endpoint whose address cannot be shown to it.
func forgeEndpointSlice(o client.Object, to destination) client.Object {
	es := o.(*discoveryv1.EndpointSlice)
	// A slice the virtual kubelet manages here is a consumer's copy (a
	// broker's): like one made by hand, it names the pods this cluster
	// runs for that consumer at their addresses here.
	byHand := es.Labels[discoveryv1.LabelManagedBy] != endpointSliceController
	if es.Labels[discoveryv1.LabelServiceName] == "" || es.AddressType != discoveryv1.AddressTypeIPv4 || to.toProvider == nil {
		return nil
	}
	var endpoints []discoveryv1.Endpoint
	for _, ep := range es.Endpoints {
		// A pod on a virtual node runs at a provider: listed there by the
		// provider's own controller, or at another provider, reached
		// through this cluster (an aggregator's transit) or not at all.
		elsewhere := !byHand && ep.NodeName != nil && to.virtual != nil && to.virtual(*ep.NodeName)
		if elsewhere && len(to.transit) == 0 {
			continue
		}
		var addrs []string
		for _, a := range ep.Addresses {
			ip, err := netip.ParseAddr(a)
			if err != nil {
				continue
			}
			if _, ok := to.transit[ip]; elsewhere && !ok {
				continue
			}
			if byHand && to.offloaded != nil {
				if theirs, ok := to.offloaded(ip); ok {
					addrs = append(addrs, theirs.String())
					continue
				}
			}
			if through, ok := to.transit[ip]; ok {
				ip = through
			}
			if seen, ok := to.toProvider(ip); ok {
				addrs = append(addrs, seen.String())
			}
		}
		if len(addrs) == 0 {
			continue
		}
		endpoints = append(endpoints, discoveryv1.Endpoint{Addresses: addrs, Conditions: ep.Conditions, Hostname: ep.Hostname})
	}
	if len(endpoints) == 0 {
		return nil
	}
	om := forge.Meta(&es.ObjectMeta, to.namespace, to.consumerID)
	om.Labels[discoveryv1.LabelManagedBy] = EndpointSliceManager
	return &discoveryv1.EndpointSlice{ObjectMeta: om, AddressType: es.AddressType, Ports: es.Ports, Endpoints: endpoints}
}

// forgeBudget copies a PodDisruptionBudget to a provider that moves the
// namespace's pods on (a broker, which evicts them from a provider the
// consumer disabled), as the number of the pods there that must stay
// healthy: what the budget wants healthy, less the healthy pods
// elsewhere (on this cluster's own nodes, or at other providers), as this
// cluster's disruption controller computed it (percentages and
// maxUnavailable resolved against the workload's scale, which the
// provider cannot see). Until that controller has computed the budget,
// or while it cannot, every pod there stays. Another provider is given
// no budget: it does not move pods, and a budget there could hold up the
// provider's own node drains.
func forgeBudget(o client.Object, to destination) client.Object {
	pdb := o.(*policyv1.PodDisruptionBudget)
	if !to.orchestrator || pdb.Spec.Selector == nil {
		return nil
	}
	keep, elsewhere := to.here, to.healthyElsewhere
	failed := meta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	if pdb.Status.ObservedGeneration >= pdb.Generation && (failed == nil || failed.Reason != policyv1.SyncFailedReason) {
		keep = max(pdb.Status.DesiredHealthy-elsewhere, 0)
	}
	return &policyv1.PodDisruptionBudget{ObjectMeta: forge.Meta(&pdb.ObjectMeta, to.namespace, to.consumerID), Spec: policyv1.PodDisruptionBudgetSpec{
		Selector: pdb.Spec.Selector.DeepCopy(), MinAvailable: ptr.To(intstr.FromInt32(keep)), UnhealthyPodEvictionPolicy: pdb.Spec.UnhealthyPodEvictionPolicy,
	}}
}

func sameMeta(a, b client.Object) bool {
	return equality.Semantic.DeepEqual(a.GetLabels(), b.GetLabels()) && equality.Semantic.DeepEqual(a.GetAnnotations(), b.GetAnnotations())
}

// Reflector keeps, for one kind, a copy of each object of an
// offloaded namespace in every provider the namespace offloads to, follows
// its updates, and deletes copies whose object is gone.
type Reflector struct {
	// Client reads the local objects and NamespaceOffloadings (cached).
	Client client.Client
	// Providers hold the copies.
	Providers provider.Providers
	// LocalClusterID labels the copies.
	LocalClusterID string
	// ToProvider shows a local address as a provider reaches it through
	// the network fabric; nil reflects no EndpointSlice.
	ToProvider func(ctx context.Context, providerID string, addr netip.Addr) (netip.Addr, bool)
	// Orchestrator says whether a provider moves the pods this cluster
	// offloads to it on in turn (a broker): PodDisruptionBudgets are
	// reflected there alone. Nil: nowhere.
	Orchestrator func(ctx context.Context, providerID string) bool
	// Consumers, if set, holds the metadata alone of the objects this
	// cluster's consumers stored here (labelled with their origin), which
	// the Client's cache leaves out; Live reads them whole. A broker
	// offloads a consumer's namespace in turn: those objects are
	// reflected like its own, read live when they change, never cached
	// whole (a consumer cannot make this cluster's memory grow with
	// them). A consumer's EndpointSlices are its copies of its own
	// (managed by the virtual kubelet): of those, the addresses of the
	// pods this cluster runs for it at providers are passed on, at each
	// provider's address (forgeEndpointSlice).
	Consumers cache.Cache
	Live      client.Reader
	// Transit, on an aggregator, leads the providers running an
	// aggregated consumer's pods to the endpoints of its Services at the
	// consumer, through this cluster's gateway (transit.Allocator); nil:
	// a consumer's own endpoints are not passed on.
	Transit Transit

	kind objectKind
}

// Transit assigns the addresses through which a provider reaches the
// endpoints of an aggregated consumer's slice (transit.Allocator).
type Transit interface {
	// Endpoints returns, of targets (endpoints of slice, namespace/name,
	// each at the peer named: its consumer, another provider), those peer
	// may reach, each with the address of this cluster's external range
	// it reaches it through; the slice's other routes for peer go (all of
	// them without targets).
	Endpoints(ctx context.Context, peer, slice string, targets map[netip.Addr]string) (map[netip.Addr]netip.Addr, error)
	// Behind says where those of addrs that are consumer's transit
	// addresses lead: its pods at their providers.
	Behind(ctx context.Context, consumer string, addrs []netip.Addr) (map[netip.Addr]transit.Hop, error)
}

// NewReflectors returns one reflector per reflected kind; toProvider is
// the Reflector's ToProvider (nil: no EndpointSlice is reflected).
func NewReflectors(c client.Client, providers provider.Providers, localClusterID string,
	toProvider func(ctx context.Context, providerID string, addr netip.Addr) (netip.Addr, bool),
) []*Reflector {
	out := make([]*Reflector, 0, len(objectKinds))
	for _, k := range objectKinds {
		if k.name == provider.EndpointSlices && toProvider == nil {
			continue
		}
		out = append(out, &Reflector{Client: c, Providers: providers, LocalClusterID: localClusterID, ToProvider: toProvider, kind: k})
	}
	return out
}

// ConsumersCache returns a cache of the metadata of the objects consumers
// stored in this cluster (Reflector.Consumers); add it to the manager.
func ConsumersCache(cfg *rest.Config, scheme *runtime.Scheme, mapper meta.RESTMapper) (cache.Cache, error) {
	origin, err := labels.NewRequirement(offloadingv1alpha1.OriginClusterLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	return cache.New(cfg, cache.Options{
		Scheme: scheme, Mapper: mapper,
		DefaultLabelSelector: labels.NewSelector().Add(*origin),
		DefaultTransform:     cache.TransformStripManagedFields(),
	})
}

// AdvertisedOrchestrator is a Reflector's Orchestrator: a provider whose
// offer says it orchestrates (a broker, for a consumer it keeps a
// Selection for). A provider that says so falsely learns the budgets of
// the pods it already runs, and nothing else: none is written unless it
// lets this cluster write them.
func AdvertisedOrchestrator(c client.Reader) func(ctx context.Context, providerID string) bool {
	return func(ctx context.Context, providerID string) bool {
		var adv sharingv1alpha1.Advertisement
		key := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(providerID), Name: sharingv1alpha1.AdvertisementName(providerID)}
		return c.Get(ctx, key, &adv) == nil && adv.Spec.Properties[brokerv1alpha1.OrchestratorProperty] == "true"
	}
}

// consumers says whether the reflector follows the objects consumers
// stored here.
func (r *Reflector) consumers() bool {
	return r.Consumers != nil && r.Live != nil && r.kind.name != provider.PodDisruptionBudgets
}

// consumerMeta is an empty metadata-only object of the reflector's kind.
func (r *Reflector) consumerMeta() (*metav1.PartialObjectMetadata, error) {
	gvk, err := apiutil.GVKForObject(r.kind.newObject(), r.Client.Scheme())
	if err != nil {
		return nil, err
	}
	pom := &metav1.PartialObjectMetadata{}
	pom.SetGroupVersionKind(gvk)
	return pom, nil
}

// consumerObject reads key whole, live, when it is a consumer's object;
// nil when it is not, or is gone.
func (r *Reflector) consumerObject(ctx context.Context, key client.ObjectKey) (client.Object, error) {
	pom, err := r.consumerMeta()
	if err != nil {
		return nil, err
	}
	if err := r.Consumers.Get(ctx, key, pom); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	obj := r.kind.newObject()
	if err := r.Live.Get(ctx, key, obj); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return obj, nil
}

// destination says where the copies for one provider namespace go.
func (r *Reflector) destination(ctx context.Context, providerID, namespace string) destination {
	d := destination{namespace: namespace, consumerID: r.LocalClusterID}
	if r.ToProvider != nil {
		d.toProvider = func(a netip.Addr) (netip.Addr, bool) { return r.ToProvider(ctx, providerID, a) }
		d.virtual = func(name string) bool {
			var n corev1.Node
			return r.Client.Get(ctx, client.ObjectKey{Name: name}, &n) == nil && offloadingv1alpha1.IsVirtualNode(n.Labels)
		}
	}
	d.orchestrator = r.kind.name == provider.PodDisruptionBudgets && r.Orchestrator != nil && r.Orchestrator(ctx, providerID)
	return d
}

// nodeProviders are the providers behind nodes, by node name, as far as
// looked up: "" for a node that is not virtual, or is gone.
type nodeProviders map[string]string

// of is the provider behind the node named (none for ""), read once.
func (np nodeProviders) of(ctx context.Context, c client.Reader, name string) (string, error) {
	p, ok := np[name]
	if ok || name == "" {
		return p, nil
	}
	var n corev1.Node
	switch err := c.Get(ctx, client.ObjectKey{Name: name}, &n); {
	case err == nil && offloadingv1alpha1.IsVirtualNode(n.Labels):
		p = n.Labels[offloadingv1alpha1.RemoteClusterLabel]
	case client.IgnoreNotFound(err) != nil:
		return "", err
	}
	np[name] = p
	return p, nil
}

// offloadedPod is a pod of a namespace bound to a provider's virtual node.
type offloadedPod struct{ name, provider string }

// offloadedPods are the pods of namespace that run in providers, by the
// addresses this cluster shows for them.
func (r *Reflector) offloadedPods(ctx context.Context, namespace string) (map[netip.Addr]offloadedPod, error) {
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	out := map[netip.Addr]offloadedPod{}
	providers := nodeProviders{}
	for i := range list.Items {
		pod := &list.Items[i]
		// A pod that ended holds no address: the provider may have given
		// it to another pod.
		if len(pod.Status.PodIPs) == 0 || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		p, err := providers.of(ctx, r.Client, pod.Spec.NodeName)
		if err != nil {
			return nil, err
		}
		if p == "" {
			continue
		}
		for _, ip := range pod.Status.PodIPs {
			if addr, err := netip.ParseAddr(ip.IP); err == nil {
				out[addr] = offloadedPod{name: pod.Name, provider: p}
			}
		}
	}
	return out, nil
}

// theirAddress is a destination's offloaded for the provider of pns:
// the address its copy of the pod has there.
func theirAddress(pods map[netip.Addr]offloadedPod, pns provider.Namespace) func(netip.Addr) (netip.Addr, bool) {
	return func(addr netip.Addr) (netip.Addr, bool) {
		p, ok := pods[addr]
		if !ok || p.provider != pns.Provider() {
			return netip.Addr{}, false
		}
		remote, ok := pns.Get(provider.Pods, p.name).(*corev1.Pod)
		if !ok {
			return netip.Addr{}, false
		}
		ip, err := netip.ParseAddr(remote.Status.PodIP)
		return ip, err == nil && ip.Is4()
	}
}

// countPods counts, for a budget going to providerID, the pods of
// namespace its selector selects: those on providerID's virtual nodes,
// and the healthy ones elsewhere. It fails rather than count short: a
// budget copied from a short count would keep fewer pods.
func (r *Reflector) countPods(ctx context.Context, pdb *policyv1.PodDisruptionBudget, providerID string) (here, healthyElsewhere int32, err error) {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return 0, 0, fmt.Errorf("the selector of PodDisruptionBudget %s/%s: %w", pdb.Namespace, pdb.Name, err)
	}
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, client.InNamespace(pdb.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return 0, 0, err
	}
	providers := nodeProviders{}
	for i := range list.Items {
		pod := &list.Items[i]
		p, err := providers.of(ctx, r.Client, pod.Spec.NodeName)
		if err != nil {
			return 0, 0, err
		}
		switch {
		case p == providerID:
			here++
		case pod.DeletionTimestamp.IsZero() && forge.PodReady(pod):
			healthyElsewhere++
		}
	}
	return here, healthyElsewhere, nil
}

// Reconcile implements reconcile.Reconciler.
func (r *Reflector) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Name == "" {
		return ctrl.Result{}, r.watchOnDemand(ctx, req.Namespace)
	}
	local := r.kind.newObject()
	err := r.Client.Get(ctx, req.NamespacedName, local)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	exists := err == nil && local.GetDeletionTimestamp().IsZero()
	var no offloadingv1alpha1.NamespaceOffloading
	noErr := r.Client.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no)
	if client.IgnoreNotFound(noErr) != nil {
		return ctrl.Result{}, noErr
	}
	// A Secret leaves the consumer only for a pod that uses it, unless the
	// namespace shares all of them: its copy goes with the last such pod.
	used := true
	if r.kind.name == provider.Secrets && no.Spec.SecretReflection != offloadingv1alpha1.ReflectAllSecrets {
		var users corev1.PodList
		if err := r.Client.List(ctx, &users, client.InNamespace(req.Namespace), client.MatchingFields{secretRefsField: req.Name}); err != nil {
			return ctrl.Result{}, err
		}
		used = len(users.Items) > 0
	}
	// Not in the cache: a consumer's object, reflected only where this
	// cluster offloads the consumer's namespace in turn, and read whole
	// only then (a Secret no pod uses is not read at all).
	if !exists && used && noErr == nil && r.consumers() {
		obj, err := r.consumerObject(ctx, req.NamespacedName)
		if err != nil {
			return ctrl.Result{}, err
		}
		if obj != nil {
			local, exists = obj, obj.GetDeletionTimestamp().IsZero()
		}
	}
	exists = exists && used
	// A slice made by hand may list the namespace's pods the providers
	// run, at the addresses this cluster shows for them.
	var offloaded map[netip.Addr]offloadedPod
	if es, ok := local.(*discoveryv1.EndpointSlice); ok && exists && es.Labels[discoveryv1.LabelManagedBy] != endpointSliceController {
		if offloaded, err = r.offloadedPods(ctx, req.Namespace); err != nil {
			return ctrl.Result{}, err
		}
	}
	// A slice of a namespace aggregated here: of the consumer's copy of
	// its own, the providers reach its endpoints at the consumer; of the
	// one this cluster's EndpointSlice controller made of the pods it
	// offloaded (at their transit addresses), each provider reaches those
	// at the other providers; both through this cluster. via is the
	// target behind each address of the slice, and the peer it is in.
	var via map[netip.Addr]transit.Hop
	slice := req.String()
	if r.kind.name == provider.EndpointSlices && r.Transit != nil && noErr == nil && no.Labels[brokerv1alpha1.AggregatedLabel] == "true" {
		consumer, err := r.origin(ctx, req.Namespace)
		if err != nil {
			return ctrl.Result{}, err
		}
		if es, ok := local.(*discoveryv1.EndpointSlice); ok && exists && consumer != "" {
			if es.Labels[discoveryv1.LabelManagedBy] != endpointSliceController {
				via = map[netip.Addr]transit.Hop{}
				for _, a := range endpointAddresses(es) {
					via[a] = transit.Hop{Target: a, Provider: consumer}
				}
			} else if via, err = r.Transit.Behind(ctx, consumer, endpointAddresses(es)); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	var errs []error
	failed := func(providerID string, err error) {
		provider.ReflectionFailed(providerID, r.kind.name, err)
		errs = append(errs, err)
	}
	// retry: a view has not listed the provider's objects yet; watching:
	// the providers whose view has not yet listed an on-demand kind (which
	// a provider may not let this cluster do: asked again with backoff).
	retry := false
	var watching []string
	reached := map[string]bool{}
	for _, st := range no.Status.RemoteNamespaces {
		if st.Phase != offloadingv1alpha1.RemoteNamespaceReady {
			continue
		}
		pns, err := r.Providers.Namespace(ctx, st.ClusterID, req.Namespace, st.Namespace)
		if errors.Is(err, provider.ErrNotSynced) {
			reached[st.ClusterID] = true
			retry = true
			continue
		} else if err != nil {
			failed(st.ClusterID, err)
			continue
		}
		reached[st.ClusterID] = true
		to := r.destination(ctx, st.ClusterID, st.Namespace)
		if offloaded != nil {
			to.offloaded = theirAddress(offloaded, pns)
		}
		if to.orchestrator && !pns.Watch(r.kind.name) {
			watching = append(watching, st.ClusterID)
			continue
		}
		if pdb, ok := local.(*policyv1.PodDisruptionBudget); ok && exists && to.orchestrator && pdb.Spec.Selector != nil {
			if to.here, to.healthyElsewhere, err = r.countPods(ctx, pdb, st.ClusterID); err != nil {
				failed(st.ClusterID, err)
				continue
			}
		}
		if r.kind.name == provider.EndpointSlices && r.Transit != nil {
			// Released too when the slice goes, or is not aggregated. A
			// provider's own pods are listed there by its own controller.
			targets := map[netip.Addr]string{}
			for _, h := range via {
				if h.Provider != st.ClusterID {
					targets[h.Target] = h.Provider
				}
			}
			through, err := r.Transit.Endpoints(ctx, st.ClusterID, slice, targets)
			switch {
			case errors.Is(err, transit.ErrNoNetwork):
				// Shown when the network is agreed (the TunnelEndpoints
				// are watched).
			case err != nil:
				failed(st.ClusterID, fmt.Errorf("the transit addresses of %s for %s: %w", slice, st.ClusterID, err))
				continue
			}
			to.transit = map[netip.Addr]netip.Addr{}
			for a, h := range via {
				if x, ok := through[h.Target]; ok && h.Provider != st.ClusterID {
					to.transit[a] = x
				}
			}
		}
		var desired client.Object
		if exists {
			desired = r.kind.forge(local, to)
		}
		if err := r.sync(ctx, pns, req.Name, desired); err != nil {
			failed(st.ClusterID, err)
		}
	}
	// Copies in providers the namespace no longer offloads to go.
	for _, pns := range r.Providers.Open(req.Namespace) {
		if reached[pns.Provider()] {
			continue
		}
		if r.kind.name == provider.EndpointSlices && r.Transit != nil {
			if _, err := r.Transit.Endpoints(ctx, pns.Provider(), slice, nil); err != nil {
				failed(pns.Provider(), err)
			}
		}
		if err := r.sync(ctx, pns, req.Name, nil); err != nil {
			failed(pns.Provider(), err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, err
	}
	if retry {
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	if len(watching) > 0 {
		return ctrl.Result{}, fmt.Errorf("waiting for %s to list %s", strings.Join(watching, ", "), r.kind.name)
	}
	return ctrl.Result{}, nil
}

// slicesIn are the EndpointSlices of namespace (those made by hand alone,
// if byHand), the consumers' copies (a broker's) among them.
func (r *Reflector) slicesIn(ctx context.Context, namespace string, byHand bool) []reconcile.Request {
	var list discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if !byHand || list.Items[i].Labels[discoveryv1.LabelManagedBy] != endpointSliceController {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	// The consumers' copies are known by their metadata alone.
	if r.consumers() {
		theirs := &metav1.PartialObjectMetadataList{}
		theirs.SetGroupVersionKind(discoveryv1.SchemeGroupVersion.WithKind("EndpointSliceList"))
		if err := r.Consumers.List(ctx, theirs, client.InNamespace(namespace)); err == nil {
			for i := range theirs.Items {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&theirs.Items[i])})
			}
		}
	}
	return reqs
}

// origin is the consumer namespace came from, as this cluster labelled
// it ("" for its own).
func (r *Reflector) origin(ctx context.Context, namespace string) (string, error) {
	var ns corev1.Namespace
	if err := r.Client.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	return ns.Labels[offloadingv1alpha1.OriginClusterLabel], nil
}

// endpointAddresses are the IPv4 addresses of es's endpoints.
func endpointAddresses(es *discoveryv1.EndpointSlice) []netip.Addr {
	var out []netip.Addr
	for _, ep := range es.Endpoints {
		for _, a := range ep.Addresses {
			if ip, err := netip.ParseAddr(a); err == nil && ip.Is4() {
				out = append(out, ip)
			}
		}
	}
	return out
}

// watchOnDemand has the views of namespace watch the reflector's kind,
// when it is one watched on demand, in every provider the kind goes to:
// their listing wakes the reflector for each copy there, so that a copy
// whose object went while this cluster was not looking (the virtual
// kubelet down) is found and deleted, even when no object of the kind is
// left in namespace to start the watch.
func (r *Reflector) watchOnDemand(ctx context.Context, namespace string) error {
	if !slices.Contains(provider.OnDemand, r.kind.name) {
		return nil
	}
	var no offloadingv1alpha1.NamespaceOffloading
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no); err != nil {
		return client.IgnoreNotFound(err)
	}
	var waiting []string
	for _, st := range no.Status.RemoteNamespaces {
		if st.Phase != offloadingv1alpha1.RemoteNamespaceReady || !r.destination(ctx, st.ClusterID, st.Namespace).orchestrator {
			continue
		}
		pns, err := r.Providers.Namespace(ctx, st.ClusterID, namespace, st.Namespace)
		if err != nil || !pns.Watch(r.kind.name) {
			waiting = append(waiting, st.ClusterID)
		}
	}
	if len(waiting) > 0 {
		return fmt.Errorf("waiting for %s to list %s", strings.Join(waiting, ", "), r.kind.name)
	}
	return nil
}

// sync makes the provider copy of name match desired; a nil desired
// deletes it.
func (r *Reflector) sync(ctx context.Context, pns provider.Namespace, name string, desired client.Object) error {
	remote := pns.Get(r.kind.name, name)
	if remote != nil && remote.GetAnnotations()[forge.TokenForPodAnnotation] != "" {
		return nil // a pod's token: the pod reflector's
	}
	// The provider's EndpointSlice controller gives the slices it makes
	// for a Service's copy the copy's labels, this cluster's origin label
	// among them: those slices are the provider's, never touched here.
	if es, ok := remote.(*discoveryv1.EndpointSlice); ok && es.Labels[discoveryv1.LabelManagedBy] != EndpointSliceManager {
		return nil
	}
	switch {
	case desired == nil && remote == nil:
		return nil
	case desired == nil:
		if err := pns.Delete(ctx, r.kind.name, name, remote.GetUID(), nil); err != nil {
			return fmt.Errorf("deleting %s %s/%s in %s: %w", r.kind.name, pns.Name(), name, pns.Provider(), err)
		}
		return nil
	case remote == nil:
		err := pns.Create(ctx, desired)
		if svc, ok := desired.(*corev1.Service); ok && letProviderChoose(ctx, svc, err, pns.Provider()) {
			err = pns.Create(ctx, desired)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s/%s in %s: %w", r.kind.name, desired.GetNamespace(), name, pns.Provider(), err)
		}
		return nil
	}
	if r.kind.same(remote, desired) {
		return nil
	}
	desired.SetResourceVersion(remote.GetResourceVersion())
	svc, isService := desired.(*corev1.Service)
	if isService {
		rs := remote.(*corev1.Service)
		if headless(rs) != headless(svc) { // immutable: replace
			return pns.Delete(ctx, r.kind.name, name, remote.GetUID(), nil)
		}
		// What the provider allocated stays; a copy that had no address
		// (an ExternalName turned ClusterIP) asks for this cluster's, as
		// a new copy does.
		if rs.Spec.ClusterIP != "" || svc.Spec.ClusterIP == "" {
			svc.Spec.ClusterIP, svc.Spec.ClusterIPs, svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = rs.Spec.ClusterIP, rs.Spec.ClusterIPs, rs.Spec.IPFamilies, rs.Spec.IPFamilyPolicy
		}
		svc.Spec.InternalTrafficPolicy = rs.Spec.InternalTrafficPolicy
	}
	err := pns.Update(ctx, desired)
	if isService && remote.(*corev1.Service).Spec.ClusterIP == "" && letProviderChoose(ctx, svc, err, pns.Provider()) {
		err = pns.Update(ctx, desired)
	}
	if err != nil {
		if apierrors.IsInvalid(err) { // immutable: replace
			return pns.Delete(ctx, r.kind.name, name, remote.GetUID(), nil)
		}
		return fmt.Errorf("updating %s %s/%s in %s: %w", r.kind.name, desired.GetNamespace(), name, pns.Provider(), err)
	}
	return nil
}

// sameAffinity says whether a and b keep a client on one endpoint alike
// (the API server gives ClientIP affinity its default timeout).
func sameAffinity(a, b *corev1.Service) bool {
	aff := func(s *corev1.Service) corev1.ServiceAffinity {
		if s.Spec.SessionAffinity == "" {
			return corev1.ServiceAffinityNone
		}
		return s.Spec.SessionAffinity
	}
	if aff(a) != aff(b) {
		return false
	}
	timeout := func(s *corev1.Service) int32 {
		if c := s.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			return *c.ClientIP.TimeoutSeconds
		}
		return corev1.DefaultClientIPServiceAffinitySeconds
	}
	return aff(a) == corev1.ServiceAffinityNone || timeout(a) == timeout(b)
}

// headless says whether svc is a headless Service.
func headless(svc *corev1.Service) bool { return svc.Spec.ClusterIP == corev1.ClusterIPNone }

// letProviderChoose clears the cluster IP a Service's copy asked for
// (askedClusterIP) when the provider refused the write that asked for
// that address (its allocator's spec.clusterIPs, or a policy's
// spec.clusterIP: taken there, or not one it grants). It says whether to
// write again. Any other refusal (a quota, another field) stands.
func letProviderChoose(ctx context.Context, svc *corev1.Service, err error, provider string) bool {
	if svc.Spec.ClusterIP == "" || headless(svc) || (!apierrors.IsInvalid(err) && !apierrors.IsForbidden(err)) || !strings.Contains(err.Error(), "spec.clusterIP") {
		return false
	}
	log.FromContext(ctx).V(1).Info("Provider refused the Service's cluster IP, letting it choose",
		"service", svc.Name, "clusterIP", svc.Spec.ClusterIP, "provider", provider, "reason", err.Error())
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
	return true
}

// SetupWithManager registers the reflector.
func (r *Reflector) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil || r.Providers == nil || r.LocalClusterID == "" {
		return fmt.Errorf("Reflector needs Client, Providers and LocalClusterID")
	}
	// A namespace offloaded to one more provider: all its objects go there.
	offloaded := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		list := r.kind.newList()
		if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		if slices.Contains(provider.OnDemand, r.kind.name) {
			// The namespace as a whole: its providers' copies are listed.
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace()}})
		}
		_ = meta.EachListItem(list, func(obj runtime.Object) error {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj.(client.Object))})
			return nil
		})
		if r.consumers() {
			if pom, err := r.consumerMeta(); err == nil {
				theirs := &metav1.PartialObjectMetadataList{}
				theirs.SetGroupVersionKind(pom.GroupVersionKind().GroupVersion().WithKind(pom.Kind + "List"))
				if err := r.Consumers.List(ctx, theirs, client.InNamespace(o.GetNamespace())); err == nil {
					for i := range theirs.Items {
						reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&theirs.Items[i])})
					}
				}
			}
		}
		return reqs
	})
	b := ctrl.NewControllerManagedBy(mgr).
		For(r.kind.newObject()).
		Watches(&offloadingv1alpha1.NamespaceOffloading{}, offloaded).
		WatchesRawSource(r.Providers.Source(r.kind.name, &handler.EnqueueRequestForObject{}))
	if r.consumers() {
		pom, err := r.consumerMeta()
		if err != nil {
			return err
		}
		b = b.WatchesRawSource(source.Kind(r.Consumers, pom, &handler.TypedEnqueueRequestForObject[*metav1.PartialObjectMetadata]{}))
	}
	if r.kind.name == provider.EndpointSlices {
		// The network agreed with a provider, or changed: the slices of
		// the namespaces offloaded there are shown again; with a consumer
		// (an aggregator's), the slices of its namespaces, whose
		// endpoints the providers reach through this cluster.
		remapped := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			var nos offloadingv1alpha1.NamespaceOffloadingList
			if err := r.Client.List(ctx, &nos); err != nil {
				return nil
			}
			var reqs []reconcile.Request
			for _, no := range nos.Items {
				if _, ok := no.ReadyRemoteNamespace(o.GetName()); !ok {
					if r.Transit == nil || no.Labels[brokerv1alpha1.AggregatedLabel] != "true" {
						continue
					}
					if from, err := r.origin(ctx, no.Namespace); err != nil || from != o.GetName() {
						continue
					}
				}
				reqs = append(reqs, r.slicesIn(ctx, no.Namespace, false)...)
			}
			return reqs
		})
		b = b.Watches(&netv1alpha1.TunnelEndpoint{}, remapped, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
		// A pod that gets, changes or loses its address or node, or
		// ends: the slices made by hand in its namespace may list it.
		byHand := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.slicesIn(ctx, o.GetNamespace(), true)
		})
		b = b.Watches(&corev1.Pod{}, byHand, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			before, after := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
			return before.Spec.NodeName != after.Spec.NodeName || before.Status.Phase != after.Status.Phase ||
				!equality.Semantic.DeepEqual(before.Status.PodIPs, after.Status.PodIPs)
		}}))
	}
	if r.kind.name == provider.PodDisruptionBudgets && r.Orchestrator != nil {
		// A provider that starts or stops moving pods on: every budget
		// is looked at again (they are few).
		all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			var list policyv1.PodDisruptionBudgetList
			if err := r.Client.List(ctx, &list); err != nil {
				return nil
			}
			reqs := make([]reconcile.Request, 0, len(list.Items))
			for i := range list.Items {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
			// And every offloaded namespace as a whole (watchOnDemand).
			var nos offloadingv1alpha1.NamespaceOffloadingList
			if err := r.Client.List(ctx, &nos); err == nil {
				for i := range nos.Items {
					reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: nos.Items[i].Namespace}})
				}
			}
			return reqs
		})
		b = b.Watches(&sharingv1alpha1.Advertisement{}, all, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return e.ObjectOld.(*sharingv1alpha1.Advertisement).Spec.Properties[brokerv1alpha1.OrchestratorProperty] !=
					e.ObjectNew.(*sharingv1alpha1.Advertisement).Spec.Properties[brokerv1alpha1.OrchestratorProperty]
			},
		}))
	}
	if r.kind.name == provider.Secrets {
		// A pod that comes or goes decides whether the Secrets it uses
		// are shared; its spec cannot change what it uses.
		users := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			names := PodSecretNames(o.(*corev1.Pod))
			reqs := make([]reconcile.Request, 0, len(names))
			for _, name := range names {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}})
			}
			return reqs
		})
		b = b.Watches(&corev1.Pod{}, users, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}))
	}
	return b.Named("virtualkubelet-" + string(r.kind.name)).Complete(r)
}

// secretRefsField indexes pods by the Secrets they use.
const secretRefsField = "liqo.secretRefs" //nolint:gosec // an index's name, not a credential

// IndexPodsBySecret adds the index of pods by the Secrets they use, which
// the Secret reflector lists with; call it once, before setting it up.
func IndexPodsBySecret(ctx context.Context, mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, secretRefsField, func(o client.Object) []string {
		return PodSecretNames(o.(*corev1.Pod))
	})
}

// PodSecretNames returns the Secrets pod uses: in volumes (projected ones
// included), in its containers' environment, and to pull its images.
func PodSecretNames(pod *corev1.Pod) []string {
	seen := map[string]bool{}
	add := func(name string) {
		if name != "" {
			seen[name] = true
		}
	}
	for _, r := range pod.Spec.ImagePullSecrets {
		add(r.Name)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			add(v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					add(src.Secret.Name)
				}
			}
		}
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, e := range c.EnvFrom {
				if e.SecretRef != nil {
					add(e.SecretRef.Name)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					add(e.ValueFrom.SecretKeyRef.Name)
				}
			}
		}
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
