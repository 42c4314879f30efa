// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package provider is the contract between the virtual kubelet's reflectors
// and the place a virtual node's pods run. The reflectors (pods, their
// service account tokens, ConfigMaps, Secrets, Services) decide what the
// provider should hold; a Providers implementation holds it. The remote
// cluster behind a peering (package remote) is one implementation; the
// broker's aggregator, which spreads one virtual node over several
// clusters, will be another; package memory is a third, for tests.
//
// # Concurrency
//
// Every method may be called from many goroutines at once: the reflectors
// run up to their Workers reconciles in parallel, never two at once for
// the same local object, so calls about one (kind, namespace, name) do not
// overlap while calls about different ones do.
//
// # Reads and writes
//
// Reads (Namespace.Get) come from a cache that a watch fills; they may lag
// the provider. Every change to the cache is announced on Source, and the
// reflector comes back to the object then: it never polls. Writes go to the
// provider at once and return Kubernetes API errors (apierrors.IsNotFound,
// IsAlreadyExists, IsConflict, IsInvalid, IsForbidden work on them): a
// Create of an object the cache does not show yet fails with AlreadyExists,
// an Update with a stale resourceVersion with Conflict.
//
// # Deletion
//
// Delete names the copy it means by UID, so a copy created again under the
// same name in the meantime is never deleted by mistake; a copy already
// gone or replaced is not an error. A pod is deleted with the grace period
// the local pod was deleted with: the provider stops it as a kubelet would,
// and the copy leaves the cache only once it is gone, which is when the
// reflector confirms the local pod's deletion.
//
// # Lifetime
//
// A namespace view is opened by the first Namespace call and lasts until
// Release, or until the provider goes (its identity changed, its peering
// ended): the next Namespace call opens it again, and its first listing
// wakes the reflectors for every object it holds, so what changed while no
// one watched (a provider restarted, objects deleted by someone else) is
// looked at again.
package provider

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

// Kind is a kind of object the reflectors keep in a provider.
type Kind string

// The kinds a provider holds.
const (
	Pods       Kind = "pods"
	ConfigMaps Kind = "configmaps"
	Secrets    Kind = "secrets"
	Services   Kind = "services"
	// EndpointSlices are the consumer's own endpoints of a Service,
	// shown to the provider's pods at the addresses the provider reaches
	// them at.
	EndpointSlices Kind = "endpointslices"
	// PodDisruptionBudgets go only to a provider that orchestrates the
	// namespace's pods in turn (a broker), whose moves of them they
	// bound; a view watches them from the first Watch of the kind.
	PodDisruptionBudgets Kind = "poddisruptionbudgets"
	// PersistentVolumeClaims are the provider's claims of the volumes of
	// the consumer's claims of class liqo; a view watches them from the
	// first Watch of the kind.
	PersistentVolumeClaims Kind = "persistentvolumeclaims"
)

// EndpointSliceManager is the endpointslice.kubernetes.io/managed-by value
// of the EndpointSlices the reflectors write in providers: the provider's
// own EndpointSlice controller leaves them alone, and they are the only
// EndpointSlices a provider's view holds (the provider's controller makes
// others for a Service's copy, with the copy's labels, the consumer's
// origin among them).
const EndpointSliceManager = offloadingv1alpha1.EndpointSliceManagedBy

// Kinds are all the kinds a provider holds, in no particular order.
var Kinds = []Kind{Pods, ConfigMaps, Secrets, Services, EndpointSlices, PodDisruptionBudgets, PersistentVolumeClaims}

// OnDemand are the kinds a namespace view watches only once Watch asks
// for them: most providers never hold them (and need not let this
// cluster read them).
var OnDemand = []Kind{PodDisruptionBudgets, PersistentVolumeClaims}

// Offer is what backs a virtual node: what one provider offers this
// cluster. A peer's accepted Advertisement is one (its provider ID the
// peer's ClusterID); the broker's aggregator, which spreads one virtual
// node over several clusters, will make others.
type Offer struct {
	// Provider is the provider ID: the virtual node's
	// offloading.liqo.io/remote-cluster label, by which the reflectors
	// call Providers, Health and Streams.
	Provider string
	// Name is the provider's own name, which the virtual node is named
	// after (liqo-<Name>) when no other provider claims it.
	Name string
	// Resources are the virtual node's capacity and allocatable.
	Resources corev1.ResourceList
	// Labels are the node labels the offer shows, already reduced to
	// those a virtual node may carry.
	Labels map[string]string
	// LargestPods bound what one pod may request to run there (the
	// Advertisement's largestPods): a pod none holds is not bound to the
	// virtual node. Empty: no bound beyond Resources.
	LargestPods []corev1.ResourceList
	// Pool, when the offer is one pool of several of the provider's
	// (an Advertisement's pools), is the pool's key: its virtual node is
	// named after the provider's and the key, labelled with it
	// (offloading.liqo.io/pool), and its pods go to the provider with
	// its labels as their node selector.
	Pool string
}

// ErrNotSynced is returned by Namespace while the view's cache fills; the
// caller asks again shortly.
var ErrNotSynced = errors.New("the provider namespace's watch has not synced yet")

// Providers are the places the virtual nodes' pods run, by provider ID
// (a virtual node's offloading.liqo.io/remote-cluster label).
type Providers interface {
	// Namespace returns the view of the provider namespace remote of
	// provider, where the local namespace local's pods and objects go,
	// opening it on first use. It returns ErrNotSynced until the view has
	// listed what is there, and an error when the provider cannot be
	// reached (no credentials yet, peering gone).
	Namespace(ctx context.Context, provider, local, remote string) (Namespace, error)
	// Open returns the views of local open in every provider: where
	// copies a local object no longer wants are looked for.
	Open(local string) []Namespace
	// Release closes the views of local in every provider except those
	// in keep: the namespace is no longer offloaded there.
	Release(local string, keep map[string]bool)
	// Source returns the changes to the provider copies of kind, each as
	// the local object of the same namespace and name (only those are
	// set), for a controller's WatchesRawSource.
	Source(kind Kind, h handler.EventHandler) source.Source
}

// The pods' subresources a provider pod is written through.
const (
	// SubresourceEphemeralContainers adds ephemeral containers (kubectl
	// debug).
	SubresourceEphemeralContainers = "ephemeralcontainers"
	// SubresourceResize changes the resources of containers (in-place
	// resize), which an update of the pod may not.
	SubresourceResize = "resize"
)

// Namespace is one namespace of one provider, as the reflectors see it.
type Namespace interface {
	// Provider is the provider's ID.
	Provider() string
	// Name is the namespace's name in the provider.
	Name() string
	// Watch starts watching kind in the namespace, if the view does not
	// yet (a kind of OnDemand), and says whether the view has listed
	// what is there of it: until it has, Get of kind says nothing.
	Watch(kind Kind) bool
	// Get returns the provider copy of kind named name from the cache,
	// or nil. The object is shared with the cache: do not modify it.
	Get(kind Kind, name string) client.Object
	// Create creates obj, whose namespace is Name().
	Create(ctx context.Context, obj client.Object) error
	// Update replaces obj, carrying the resourceVersion of the copy it
	// replaces.
	Update(ctx context.Context, obj client.Object) error
	// UpdateSubresource replaces, of obj, what its subresource writes
	// (of a pod, SubresourceEphemeralContainers its ephemeral containers
	// and SubresourceResize its containers' resources, which Update may
	// not change), carrying the resourceVersion of the copy it replaces.
	UpdateSubresource(ctx context.Context, obj client.Object, subresource string) error
	// Delete deletes the copy of kind named name with uid, gracefully for
	// grace seconds (nil: the object's own default). A copy already gone,
	// or one of that name with another uid, is left alone and nil is
	// returned.
	Delete(ctx context.Context, kind Kind, name string, uid types.UID, grace *int64) error
}

// Health says whether a provider can be reached: a virtual node is Ready
// while it can.
type Health interface {
	// Ping returns nil when provider answers and is ready.
	Ping(ctx context.Context, provider string) error
}

// Addresses is how the network fabric shows addresses across the
// boundary with a provider: a pod the provider runs at the address this
// cluster reaches it at, and a local address as the provider reaches it.
// A peer's come from the TunnelEndpoint the two agreed on
// (translation.Peers); a provider that is not one peer (the broker's
// aggregator, whose pods run in several clusters) shows its own.
type Addresses interface {
	// FromProvider shows addr, a pod's in provider, as this cluster
	// reaches it; false when it cannot.
	FromProvider(ctx context.Context, provider string, addr netip.Addr) (netip.Addr, bool)
	// ToProvider shows addr, a local one, as provider reaches it; false
	// when it cannot.
	ToProvider(ctx context.Context, provider string, addr netip.Addr) (netip.Addr, bool)
	// Agreed says whether the fabric agreed with provider on how it shows
	// addresses: until then none is shown.
	Agreed(ctx context.Context, provider string) bool
}

// Streams is what the kubelet API needs from a provider to forward logs,
// exec, attach and port-forward to the pods it runs: the provider's API
// server and a transport that can upgrade connections (HTTP/1.1).
type Streams interface {
	Stream(ctx context.Context, provider string) (*url.URL, http.RoundTripper, error)
}

// Usage is what the kubelet API's resource endpoints (/metrics/resource,
// /stats/summary: metrics-server, kubectl top) need from a provider: what
// the pods it runs for this cluster use, as it measures them.
type Usage interface {
	// PodUsage returns what the pods of the provider namespace remote of
	// provider use, by the provider's pod name. A provider that measures
	// nothing (no metrics API) returns ErrNoUsage.
	PodUsage(ctx context.Context, provider, remote string) (map[string]PodUsage, error)
}

// ErrNoUsage is returned by PodUsage for a provider that measures no
// usage.
var ErrNoUsage = errors.New("this provider measures no usage of its pods")

// PodUsage is one pod's usage, as a metrics API reports it: the average
// over Window, ending at Timestamp.
type PodUsage struct {
	Timestamp time.Time
	Window    time.Duration
	// Containers are the pod's containers' usage, by name: cpu (cores)
	// and memory (working set, bytes).
	Containers map[string]corev1.ResourceList
}
