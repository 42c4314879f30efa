// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package memory is a provider.Providers that keeps everything in memory,
// for the reflectors' tests: it follows the contract (API errors, UID
// preconditions, graceful pod deletion, change events) and lets a test act
// as the provider's cluster would: run a pod, change or delete a copy
// behind the reflector's back, lose everything in a restart, refuse
// writes.
package memory

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
)

// Op is one write a reflector made.
type Op struct {
	Verb      string // create, update or delete
	Provider  string
	Kind      provider.Kind
	Namespace string
	Name      string
	// Grace is the grace period of a delete, nil for the default.
	Grace *int64
}

// Providers holds every provider's namespaces in memory. The zero value is
// not ready: use New.
type Providers struct {
	mu       sync.Mutex
	objects  map[key]client.Object
	views    map[viewKey]*view // by provider and local namespace
	channels map[provider.Kind]chan event.GenericEvent
	ops      []Op
	rv       int
	// refuse makes writes to a provider fail.
	refuse map[string]error
	// down makes Ping fail for a provider.
	down map[string]error
	// usage is what Measure set, by provider and namespace.
	usage map[viewKey]map[string]provider.PodUsage
}

type key struct {
	provider  string
	kind      provider.Kind
	namespace string
	name      string
}

type viewKey struct{ provider, local string }

var (
	_ provider.Providers = &Providers{}
	_ provider.Health    = &Providers{}
	_ provider.Usage     = &Providers{}
)

// New returns empty providers.
func New() *Providers {
	p := &Providers{
		objects:  map[key]client.Object{},
		views:    map[viewKey]*view{},
		channels: map[provider.Kind]chan event.GenericEvent{},
		refuse:   map[string]error{},
		down:     map[string]error{},
		usage:    map[viewKey]map[string]provider.PodUsage{},
	}
	for _, k := range provider.Kinds {
		p.channels[k] = make(chan event.GenericEvent, 4096)
	}
	return p
}

// Namespace implements provider.Providers.
func (p *Providers) Namespace(_ context.Context, id, local, remote string) (provider.Namespace, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	vk := viewKey{id, local}
	if v, ok := p.views[vk]; ok && v.remote == remote {
		return v, nil
	}
	v := &view{p: p, provider: id, local: local, remote: remote}
	p.views[vk] = v
	// A new view lists what is there: every copy is looked at again.
	for k := range p.objects {
		if k.provider == id && k.namespace == remote {
			p.notifyLocked(k)
		}
	}
	return v, nil
}

// Open implements provider.Providers.
func (p *Providers) Open(local string) []provider.Namespace {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []provider.Namespace
	for vk, v := range p.views {
		if vk.local == local {
			out = append(out, v)
		}
	}
	return out
}

// Release implements provider.Providers.
func (p *Providers) Release(local string, keep map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for vk := range p.views {
		if vk.local == local && !keep[vk.provider] {
			delete(p.views, vk)
		}
	}
}

// Source implements provider.Providers.
func (p *Providers) Source(kind provider.Kind, h handler.EventHandler) source.Source {
	return source.Channel(p.channels[kind], h)
}

// notifyLocked wakes the reflector of k's local object, in every view of
// k's namespace.
func (p *Providers) notifyLocked(k key) {
	for _, v := range p.views {
		if v.provider != k.provider || v.remote != k.namespace {
			continue
		}
		ev := event.GenericEvent{Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: v.local, Name: k.name}}}
		select {
		case p.channels[k.kind] <- ev:
		default:
			panic("memory provider: event channel full; a test wrote more than 4096 changes nobody read")
		}
	}
}

func kindOf(obj client.Object) (provider.Kind, error) {
	switch obj.(type) {
	case *corev1.Pod:
		return provider.Pods, nil
	case *corev1.ConfigMap:
		return provider.ConfigMaps, nil
	case *corev1.Secret:
		return provider.Secrets, nil
	case *corev1.Service:
		return provider.Services, nil
	case *discoveryv1.EndpointSlice:
		return provider.EndpointSlices, nil
	case *policyv1.PodDisruptionBudget:
		return provider.PodDisruptionBudgets, nil
	case *corev1.PersistentVolumeClaim:
		return provider.PersistentVolumeClaims, nil
	}
	return "", fmt.Errorf("memory provider: %T is not a kind a provider holds", obj)
}

func resource(kind provider.Kind) schema.GroupResource {
	return schema.GroupResource{Resource: string(kind)}
}

// view is one provider namespace as the reflectors see it.
type view struct {
	p                       *Providers
	provider, local, remote string
}

func (v *view) Provider() string { return v.provider }
func (v *view) Name() string     { return v.remote }

// Watch implements provider.Namespace: memory is always listed.
func (v *view) Watch(provider.Kind) bool { return true }

// Get implements provider.Namespace: of EndpointSlices, only those the
// reflectors write (provider.EndpointSliceManager), as a remote view
// watches.
func (v *view) Get(kind provider.Kind, name string) client.Object {
	v.p.mu.Lock()
	defer v.p.mu.Unlock()
	o := v.p.objects[key{v.provider, kind, v.remote, name}]
	if es, ok := o.(*discoveryv1.EndpointSlice); ok && es.Labels[discoveryv1.LabelManagedBy] != provider.EndpointSliceManager {
		return nil
	}
	return o
}

func (v *view) Create(_ context.Context, obj client.Object) error {
	kind, err := kindOf(obj)
	if err != nil {
		return err
	}
	v.p.mu.Lock()
	defer v.p.mu.Unlock()
	v.p.ops = append(v.p.ops, Op{Verb: "create", Provider: v.provider, Kind: kind, Namespace: v.remote, Name: obj.GetName()})
	if err := v.p.refuse[v.provider]; err != nil {
		return err
	}
	if obj.GetNamespace() != v.remote {
		return apierrors.NewBadRequest(fmt.Sprintf("namespace %q does not match the view's %q", obj.GetNamespace(), v.remote))
	}
	k := key{v.provider, kind, v.remote, obj.GetName()}
	if _, ok := v.p.objects[k]; ok {
		return apierrors.NewAlreadyExists(resource(kind), obj.GetName())
	}
	if svc, ok := obj.(*corev1.Service); ok && v.p.allocatedLocked(v.provider, svc.Spec.ClusterIP) {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, svc.Name, field.ErrorList{
			field.Invalid(field.NewPath("spec", "clusterIPs").Index(0), svc.Spec.ClusterIP, "failed to allocate IP "+svc.Spec.ClusterIP+": provided IP is already allocated"),
		})
	}
	stored := obj.DeepCopyObject().(client.Object)
	stored.SetUID(uuid.NewUUID())
	stored.SetCreationTimestamp(metav1.Now())
	v.p.storeLocked(k, stored)
	// As an API server's answer does.
	obj.SetUID(stored.GetUID())
	obj.SetCreationTimestamp(stored.GetCreationTimestamp())
	return nil
}

// allocatedLocked says whether a Service of provider id holds ip, as an
// API server refuses a second Service the same cluster IP.
func (p *Providers) allocatedLocked(id, ip string) bool {
	if ip == "" || ip == corev1.ClusterIPNone {
		return false
	}
	for k, o := range p.objects {
		if svc, ok := o.(*corev1.Service); ok && k.provider == id && svc.Spec.ClusterIP == ip {
			return true
		}
	}
	return false
}

func (v *view) Update(_ context.Context, obj client.Object) error {
	kind, err := kindOf(obj)
	if err != nil {
		return err
	}
	v.p.mu.Lock()
	defer v.p.mu.Unlock()
	k, cur, err := v.replacedLocked("update", kind, obj)
	if err != nil {
		return err
	}
	stored := obj.DeepCopyObject().(client.Object)
	stored.SetUID(cur.GetUID())
	stored.SetCreationTimestamp(cur.GetCreationTimestamp())
	stored.SetDeletionTimestamp(cur.GetDeletionTimestamp())
	if pod, ok := stored.(*corev1.Pod); ok { // status is a subresource
		pod.Status = cur.(*corev1.Pod).Status
		// As the API server: ephemeral containers change through their
		// subresource only.
		if !equality.Semantic.DeepEqual(pod.Spec.EphemeralContainers, cur.(*corev1.Pod).Spec.EphemeralContainers) {
			return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Pod").GroupKind(), obj.GetName(), field.ErrorList{
				field.Forbidden(field.NewPath("spec", "ephemeralContainers"), "pod updates may not change ephemeral containers")})
		}
		// Nor resources: through the resize subresource only.
		if !sameResources(pod.Spec.Containers, cur.(*corev1.Pod).Spec.Containers) || !sameResources(pod.Spec.InitContainers, cur.(*corev1.Pod).Spec.InitContainers) {
			return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Pod").GroupKind(), obj.GetName(), field.ErrorList{
				field.Forbidden(field.NewPath("spec", "containers"), "pod updates may not change resources (use the resize subresource)")})
		}
	}
	v.p.storeLocked(k, stored)
	return nil
}

// replacedLocked records an operation verb on obj, and returns the copy it
// replaces: the provider's refusal, NotFound, or a Conflict when obj does
// not carry that copy's resourceVersion, as the API server answers.
func (v *view) replacedLocked(verb string, kind provider.Kind, obj client.Object) (key, client.Object, error) {
	v.p.ops = append(v.p.ops, Op{Verb: verb, Provider: v.provider, Kind: kind, Namespace: v.remote, Name: obj.GetName()})
	if err := v.p.refuse[v.provider]; err != nil {
		return key{}, nil, err
	}
	k := key{v.provider, kind, v.remote, obj.GetName()}
	cur, ok := v.p.objects[k]
	if !ok {
		return k, nil, apierrors.NewNotFound(resource(kind), obj.GetName())
	}
	if obj.GetResourceVersion() != cur.GetResourceVersion() {
		return k, nil, apierrors.NewConflict(resource(kind), obj.GetName(), fmt.Errorf("resourceVersion %q, the object has %q", obj.GetResourceVersion(), cur.GetResourceVersion()))
	}
	return k, cur, nil
}

// UpdateSubresource implements provider.Namespace: a pod's ephemeral
// containers, or its containers' resources (resize), the subresources a
// provider pod is written through. Each changes only what it writes, as
// the API server's.
func (v *view) UpdateSubresource(_ context.Context, obj client.Object, subresource string) error {
	pod, ok := obj.(*corev1.Pod)
	if !ok || (subresource != provider.SubresourceEphemeralContainers && subresource != provider.SubresourceResize) {
		return fmt.Errorf("no subresource %q of %T to update", subresource, obj)
	}
	v.p.mu.Lock()
	defer v.p.mu.Unlock()
	k, cur, err := v.replacedLocked("update/"+subresource, provider.Pods, obj)
	if err != nil {
		return err
	}
	stored := cur.DeepCopyObject().(*corev1.Pod)
	switch subresource {
	case provider.SubresourceEphemeralContainers:
		stored.Spec.EphemeralContainers = pod.Spec.EphemeralContainers
	case provider.SubresourceResize:
		if len(pod.Spec.Containers) != len(stored.Spec.Containers) || len(pod.Spec.InitContainers) != len(stored.Spec.InitContainers) {
			return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Pod").GroupKind(), obj.GetName(), field.ErrorList{
				field.Forbidden(field.NewPath("spec"), "a resize may not add or remove containers")})
		}
		for i := range stored.Spec.Containers {
			stored.Spec.Containers[i].Resources = pod.Spec.Containers[i].Resources
		}
		for i := range stored.Spec.InitContainers {
			stored.Spec.InitContainers[i].Resources = pod.Spec.InitContainers[i].Resources
		}
		stored.Generation++
	}
	v.p.storeLocked(k, stored)
	return nil
}

func (v *view) Delete(_ context.Context, kind provider.Kind, name string, uid types.UID, grace *int64) error {
	v.p.mu.Lock()
	defer v.p.mu.Unlock()
	v.p.ops = append(v.p.ops, Op{Verb: "delete", Provider: v.provider, Kind: kind, Namespace: v.remote, Name: name, Grace: grace})
	if err := v.p.refuse[v.provider]; err != nil {
		return err
	}
	k := key{v.provider, kind, v.remote, name}
	cur, ok := v.p.objects[k]
	if !ok || cur.GetUID() != uid {
		return nil
	}
	// A pod with a grace period stops first, as a kubelet stops it: it
	// stays, being deleted, until the test finishes it (Finish).
	if pod, ok := cur.(*corev1.Pod); ok && (grace == nil || *grace > 0) {
		if pod.DeletionTimestamp != nil {
			return nil
		}
		pod = pod.DeepCopy()
		pod.DeletionTimestamp = new(metav1.Now())
		seconds := int64(corev1.DefaultTerminationGracePeriodSeconds)
		if grace != nil {
			seconds = *grace
		} else if pod.Spec.TerminationGracePeriodSeconds != nil {
			seconds = *pod.Spec.TerminationGracePeriodSeconds
		}
		pod.DeletionGracePeriodSeconds = &seconds
		v.p.storeLocked(k, pod)
		return nil
	}
	delete(v.p.objects, k)
	v.p.notifyLocked(k)
	return nil
}

func (p *Providers) storeLocked(k key, obj client.Object) {
	p.rv++
	obj.SetResourceVersion(strconv.Itoa(p.rv))
	p.objects[k] = obj
	p.notifyLocked(k)
}

// The provider's side: what a test does as the provider cluster would.

// Object returns a copy of the object of kind named name in provider's
// namespace ns, or nil.
func (p *Providers) Object(id string, kind provider.Kind, ns, name string) client.Object {
	p.mu.Lock()
	defer p.mu.Unlock()
	if obj, ok := p.objects[key{id, kind, ns, name}]; ok {
		return obj.DeepCopyObject().(client.Object)
	}
	return nil
}

// Names returns the names of the objects of kind in provider's namespace ns.
func (p *Providers) Names(id string, kind provider.Kind, ns string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for k := range p.objects {
		if k.provider == id && k.kind == kind && k.namespace == ns {
			out = append(out, k.name)
		}
	}
	return out
}

// Change applies mutate to the stored object, as someone in the provider
// cluster would (the provider's kubelet writing a pod's status, a user
// editing a copy), and announces it.
func (p *Providers) Change(id string, kind provider.Kind, ns, name string, mutate func(client.Object)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := key{id, kind, ns, name}
	cur, ok := p.objects[k]
	if !ok {
		return apierrors.NewNotFound(resource(kind), name)
	}
	obj := cur.DeepCopyObject().(client.Object)
	mutate(obj)
	p.storeLocked(k, obj)
	return nil
}

// Remove deletes an object at once, as someone in the provider cluster
// would (or a pod's graceful deletion being over), and announces it.
func (p *Providers) Remove(id string, kind provider.Kind, ns, name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := key{id, kind, ns, name}
	if _, ok := p.objects[k]; ok {
		delete(p.objects, k)
		p.notifyLocked(k)
	}
}

// Put stores obj in provider as if someone had created it there (not the
// reflectors): an orphan left from an earlier run, say.
func (p *Providers) Put(id string, obj client.Object) error {
	kind, err := kindOf(obj)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	stored := obj.DeepCopyObject().(client.Object)
	if stored.GetUID() == "" {
		stored.SetUID(uuid.NewUUID())
	}
	p.storeLocked(key{id, kind, obj.GetNamespace(), obj.GetName()}, stored)
	return nil
}

// Restart is the provider cluster restarting with its storage lost:
// every object of provider is gone and every view of it closes; the
// reflectors find out when they open them again.
func (p *Providers) Restart(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.objects {
		if k.provider == id {
			delete(p.objects, k)
			p.notifyLocked(k)
		}
	}
	for vk := range p.views {
		if vk.provider == id {
			delete(p.views, vk)
		}
	}
}

// Refuse makes every write to provider fail with err (nil: accept again).
func (p *Providers) Refuse(id string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		delete(p.refuse, id)
		return
	}
	p.refuse[id] = err
}

// Ops returns the writes tried so far through the views, refused ones
// included.
func (p *Providers) Ops() []Op {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Op(nil), p.ops...)
}

// Ping implements provider.Health.
func (p *Providers) Ping(_ context.Context, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down[id]
}

// Down makes Ping fail for provider with err (nil: it answers again).
func (p *Providers) Down(id string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		delete(p.down, id)
		return
	}
	p.down[id] = err
}

// sameResources says whether a and b are the same containers with the
// same resources.
func sameResources(a, b []corev1.Container) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.Container) bool {
		return x.Name == y.Name && equality.Semantic.DeepEqual(x.Resources, y.Resources)
	})
}

// Measure sets what the pod named pod of the provider namespace ns of
// provider id uses; a provider namespace with nothing measured answers
// PodUsage with provider.ErrNoUsage.
func (p *Providers) Measure(id, ns, pod string, u provider.PodUsage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := viewKey{id, ns}
	if p.usage[k] == nil {
		p.usage[k] = map[string]provider.PodUsage{}
	}
	p.usage[k][pod] = u
}

// PodUsage implements provider.Usage: what Measure set.
func (p *Providers) PodUsage(_ context.Context, id, remote string) (map[string]provider.PodUsage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pods, ok := p.usage[viewKey{id, remote}]
	if !ok {
		return nil, provider.ErrNoUsage
	}
	out := make(map[string]provider.PodUsage, len(pods))
	for name, u := range pods {
		out[name] = u
	}
	return out, nil
}
