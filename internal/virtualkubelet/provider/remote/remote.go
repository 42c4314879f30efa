// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package remote is the virtual kubelet's provider that is a remote
// cluster: the one behind a peering, reached with the virtual kubelet's
// identity in it (identity.Remotes).
package remote

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/virtualkubelet/forge"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
	"github.com/liqo-go/liqo/internal/virtualkubelet/token"
)

// Sessions holds the virtual kubelet's connection to each provider: a
// clientset, and for each offloaded namespace informers on the objects
// this cluster created there (selected by the origin-cluster label), whose
// events wake the local reflectors. It is a manager.Runnable: sessions end
// with the manager.
type Sessions struct {
	// Remotes builds the clients.
	Remotes *identity.Remotes
	// Reader reads the local NamespaceOffloadings.
	Reader client.Reader
	// LocalClusterID selects, in each provider, what this cluster made.
	LocalClusterID string

	mu        sync.Mutex
	ctx       context.Context
	sessions  map[string]*session
	stopping  map[string]*time.Timer
	channels  map[provider.Kind]chan event.GenericEvent
	startOnce sync.Once
	started   chan struct{}
}

type session struct {
	provider string
	// cfg is the config the session was opened with: Remotes.Config
	// returns the same one until the kubeconfig changes.
	cfg    *rest.Config
	cs     kubernetes.Interface
	writer client.Client
	// stream carries logs and exec (HTTP/1.1, for protocol upgrades).
	stream http.RoundTripper
	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.Mutex
	namespaces map[string]*nsWatch // by local namespace
}

// nsWatch watches one provider namespace: a provider.Namespace.
type nsWatch struct {
	session  *session
	sessions *Sessions
	// ctx is the watch's; local the namespace here, remote there.
	ctx           context.Context
	local, remote string
	cancel        context.CancelFunc
	factory       informers.SharedInformerFactory
	// selector selects what the watch holds: this cluster's copies.
	selector string

	mu        sync.Mutex
	informers map[provider.Kind]cache.SharedIndexInformer // the kinds watched
}

var (
	_ provider.Providers = &Sessions{}
	_ provider.Streams   = &Sessions{}
	_ provider.Health    = &Sessions{}
	_ provider.Namespace = &nsWatch{}
)

func (s *Sessions) init() {
	s.startOnce.Do(func() {
		s.sessions = map[string]*session{}
		s.stopping = map[string]*time.Timer{}
		s.started = make(chan struct{})
		s.channels = map[provider.Kind]chan event.GenericEvent{}
		for _, k := range provider.Kinds {
			s.channels[k] = make(chan event.GenericEvent, 4096)
		}
	})
}

// Source implements provider.Providers.
func (s *Sessions) Source(kind provider.Kind, h handler.EventHandler) source.Source {
	s.init()
	return source.Channel(s.channels[kind], h)
}

// Start implements manager.Runnable.
func (s *Sessions) Start(ctx context.Context) error {
	s.init()
	s.mu.Lock()
	s.ctx = ctx
	close(s.started)
	s.mu.Unlock()
	<-ctx.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, sess := range s.sessions {
		sess.cancel()
		delete(s.sessions, p)
	}
	return nil
}

// NeedLeaderElection is true: one replica reflects.
func (s *Sessions) NeedLeaderElection() bool { return true }

// get returns the session with provider, opening it (and watching every
// namespace already offloaded there) the first time, or again when the
// virtual kubelet's identity changed.
func (s *Sessions) get(ctx context.Context, id string) (*session, error) {
	s.init()
	select {
	case <-s.started:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	cfg, err := s.Remotes.Config(ctx, id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.stopping[id]; ok {
		t.Stop()
		delete(s.stopping, id)
	}
	if sess, ok := s.sessions[id]; ok {
		if sess.cfg == cfg {
			return sess, nil
		}
		sess.cancel()
		delete(s.sessions, id)
	}
	// Pods and objects travel as protobuf, cheaper than JSON to encode
	// in the provider's API server and to decode here.
	pcfg := rest.CopyConfig(cfg)
	pcfg.ContentType = runtime.ContentTypeProtobuf
	pcfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cs, err := kubernetes.NewForConfig(pcfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", id, err)
	}
	writer, err := s.Remotes.ClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", id, err)
	}
	stream, err := streamingTransport(cfg)
	if err != nil {
		return nil, fmt.Errorf("streaming transport for %s: %w", id, err)
	}
	sctx, cancel := context.WithCancel(s.ctx)
	sess := &session{provider: id, cfg: cfg, cs: cs, writer: writer, stream: stream, ctx: sctx, cancel: cancel,
		namespaces: map[string]*nsWatch{}}
	s.sessions[id] = sess
	ctrl.LoggerFrom(ctx).Info("Provider session opened", "provider", id)
	// Watch at once every namespace already offloaded there, so that what
	// this cluster left there (say, while it was down) is looked at.
	var list offloadingv1alpha1.NamespaceOffloadingList
	if err := s.Reader.List(ctx, &list); err == nil {
		for i := range list.Items {
			if remote, ok := list.Items[i].ReadyRemoteNamespace(id); ok {
				s.startWatch(ctx, sess, list.Items[i].Namespace, remote)
			}
		}
	}
	return sess, nil
}

// StopAfter ends the session with provider after d, unless it is used
// again meanwhile: the pods a drained virtual node leaves are deleted
// through it in the provider first.
func (s *Sessions) StopAfter(provider string, d time.Duration) {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[provider]; !ok {
		return
	}
	if t, ok := s.stopping[provider]; ok {
		t.Stop()
	}
	s.stopping[provider] = time.AfterFunc(d, func() { s.Stop(provider) })
}

// Stop ends the session with provider.
func (s *Sessions) Stop(provider string) {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess, ok := s.sessions[provider]; ok {
		sess.cancel()
		delete(s.sessions, provider)
	}
}

// Release implements provider.Providers.
func (s *Sessions) Release(local string, keep map[string]bool) {
	for _, sess := range s.all() {
		if keep[sess.provider] {
			continue
		}
		sess.mu.Lock()
		if w, ok := sess.namespaces[local]; ok {
			w.cancel()
			delete(sess.namespaces, local)
		}
		sess.mu.Unlock()
	}
}

func (s *Sessions) all() []*session {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		out = append(out, sess)
	}
	return out
}

// Namespace implements provider.Providers.
func (s *Sessions) Namespace(ctx context.Context, id, local, remote string) (provider.Namespace, error) {
	sess, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	w := s.startWatch(ctx, sess, local, remote)
	w.mu.Lock()
	defer w.mu.Unlock()
	for kind, inf := range w.informers {
		if !inf.HasSynced() && !slices.Contains(provider.OnDemand, kind) {
			return nil, provider.ErrNotSynced
		}
	}
	return w, nil
}

// startWatch starts (or returns) the watch of remote for local. The watch
// lives as long as the session, or until the namespace moves, not as long
// as ctx: from ctx it keeps only the values (the logger).
func (s *Sessions) startWatch(ctx context.Context, sess *session, local, remote string) *nsWatch {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if w, ok := sess.namespaces[local]; ok {
		if w.remote == remote {
			return w
		}
		w.cancel()
	}
	ctx, cancelWatch := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(sess.ctx, cancelWatch) //nolint:contextcheck // the session's end stops the watch, on purpose
	cancel := func() { stop(); cancelWatch() }
	selector := offloadingv1alpha1.OriginClusterLabel + "=" + s.LocalClusterID
	factory := informers.NewSharedInformerFactoryWithOptions(sess.cs, 0, informers.WithNamespace(remote),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	w := &nsWatch{session: sess, sessions: s, ctx: ctx, local: local, remote: remote, cancel: cancel, factory: factory, selector: selector,
		informers: map[provider.Kind]cache.SharedIndexInformer{}}
	for _, kind := range provider.Kinds {
		if !slices.Contains(provider.OnDemand, kind) {
			w.watchLocked(kind) //nolint:contextcheck // w.ctx is this ctx: the watch's
		}
	}
	factory.Start(ctx.Done())
	sess.namespaces[local] = w
	return w
}

// informerFor is the factory's informer of kind. Of EndpointSlices it
// watches only those the reflectors write (selector, the factory's, and
// managed by them): the provider's EndpointSlice controller gives the
// slices it makes for a Service's copy the copy's labels, which select
// them too, and they are none of the reflectors' business.
func informerFor(f informers.SharedInformerFactory, kind provider.Kind, namespace, selector string) cache.SharedIndexInformer {
	switch kind {
	case provider.Pods:
		return f.Core().V1().Pods().Informer()
	case provider.ConfigMaps:
		return f.Core().V1().ConfigMaps().Informer()
	case provider.Secrets:
		return f.Core().V1().Secrets().Informer()
	case provider.Services:
		return f.Core().V1().Services().Informer()
	case provider.EndpointSlices:
		return f.InformerFor(&discoveryv1.EndpointSlice{}, func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return discoveryinformers.NewFilteredEndpointSliceInformer(cs, namespace, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
				func(o *metav1.ListOptions) {
					o.LabelSelector = selector + "," + discoveryv1.LabelManagedBy + "=" + provider.EndpointSliceManager
				})
		})
	case provider.PodDisruptionBudgets:
		return f.Policy().V1().PodDisruptionBudgets().Informer()
	case provider.PersistentVolumeClaims:
		return f.Core().V1().PersistentVolumeClaims().Informer()
	}
	return nil
}

// watchLocked adds the informer of kind, whose changes wake the local
// reflectors; the caller starts the factory. w.mu is held, or w is not
// shared yet.
func (w *nsWatch) watchLocked(kind provider.Kind) {
	inf := informerFor(w.factory, kind, w.remote, w.selector)
	if inf == nil {
		return
	}
	if err := inf.SetTransform(w.sessions.trim(w.ctx, kind, w.local)); err != nil {
		ctrl.LoggerFrom(w.ctx).Error(err, "Provider objects cached whole", "kind", kind)
	}
	ch, ctx, local := w.sessions.channels[kind], w.ctx, w.local
	notify := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return
		}
		// The local object of the same name, whatever its kind.
		ev := event.GenericEvent{Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: local, Name: m.GetName()}}}
		select {
		case ch <- ev:
		case <-ctx.Done():
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	})
	w.informers[kind] = inf
}

// Watch implements provider.Namespace.
func (w *nsWatch) Watch(kind provider.Kind) bool {
	w.mu.Lock()
	inf, ok := w.informers[kind]
	if !ok {
		w.watchLocked(kind)
		inf = w.informers[kind]
		w.factory.Start(w.ctx.Done())
	}
	w.mu.Unlock()
	return inf != nil && inf.HasSynced()
}

// informer is the informer of kind, nil when kind is not watched.
func (w *nsWatch) informer(kind provider.Kind) cache.SharedIndexInformer {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.informers[kind]
}

// trim is the transform of the informers on a provider namespace: an
// object of the provider that stands for nothing of this cluster's (no
// local object of its kind and name in local; for a token Secret, no
// local pod it is for) is kept as its name and origin alone. A provider
// may label any number of large objects for this cluster; only what
// this cluster made there, which its own objects bound, is kept whole.
// Managed fields are never kept. ctx is the watch's.
func (s *Sessions) trim(ctx context.Context, kind provider.Kind, local string) cache.TransformFunc {
	return func(obj any) (any, error) {
		o, ok := obj.(client.Object)
		if !ok {
			return obj, nil
		}
		o.SetManagedFields(nil)
		if s.Reader == nil {
			return o, nil
		}
		name, standsFor := o.GetName(), kind
		// A token Secret stands for its pod, under the one name the
		// virtual kubelet gives it.
		if pod, ok := o.GetAnnotations()[forge.TokenForPodAnnotation]; ok && kind == provider.Secrets && o.GetName() == token.SecretName(pod) {
			name, standsFor = pod, provider.Pods
		}
		probe := newObject(standsFor)
		if probe == nil {
			return o, nil
		}
		err := s.Reader.Get(ctx, client.ObjectKey{Namespace: local, Name: name}, probe)
		if err == nil || !apierrors.IsNotFound(err) {
			return o, nil
		}
		stub := newObject(kind)
		keep := map[string]string{}
		for _, k := range []string{offloadingv1alpha1.OriginUIDAnnotation, offloadingv1alpha1.OriginNamespaceAnnotation, forge.TokenForPodAnnotation} {
			if v, ok := o.GetAnnotations()[k]; ok && len(v) <= 253 {
				keep[k] = v
			}
		}
		stub.SetName(o.GetName())
		stub.SetNamespace(o.GetNamespace())
		stub.SetUID(o.GetUID())
		stub.SetResourceVersion(o.GetResourceVersion())
		stub.SetCreationTimestamp(o.GetCreationTimestamp())
		stub.SetDeletionTimestamp(o.GetDeletionTimestamp())
		stub.SetLabels(map[string]string{offloadingv1alpha1.OriginClusterLabel: o.GetLabels()[offloadingv1alpha1.OriginClusterLabel]})
		stub.SetAnnotations(keep)
		// The ShadowPod that keeps an orphan goes with it.
		if owner := forge.ShadowOwner(o); owner != nil {
			stub.SetOwnerReferences([]metav1.OwnerReference{*owner})
		}
		// Whether a claim is bound there, which tells a claim that may
		// hold data from one that cannot (claims.deleteOrphans).
		if c, ok := o.(*corev1.PersistentVolumeClaim); ok {
			sc := stub.(*corev1.PersistentVolumeClaim)
			sc.Spec.VolumeName, sc.Status.Phase = c.Spec.VolumeName, c.Status.Phase
		}
		return stub, nil
	}
}

// newObject is an empty object of kind, as the informers hold them.
func newObject(kind provider.Kind) client.Object {
	switch kind {
	case provider.Pods:
		return &corev1.Pod{}
	case provider.ConfigMaps:
		return &corev1.ConfigMap{}
	case provider.Secrets:
		return &corev1.Secret{}
	case provider.Services:
		return &corev1.Service{}
	case provider.EndpointSlices:
		return &discoveryv1.EndpointSlice{}
	case provider.PodDisruptionBudgets:
		return &policyv1.PodDisruptionBudget{}
	case provider.PersistentVolumeClaims:
		return &corev1.PersistentVolumeClaim{}
	}
	return nil
}

// Open implements provider.Providers.
func (s *Sessions) Open(local string) []provider.Namespace {
	var out []provider.Namespace
	for _, sess := range s.all() {
		sess.mu.Lock()
		if w, ok := sess.namespaces[local]; ok {
			out = append(out, w)
		}
		sess.mu.Unlock()
	}
	return out
}

// Ping implements provider.Health: the provider's API server is ready,
// asked with the virtual kubelet's identity.
func (s *Sessions) Ping(ctx context.Context, id string) error {
	cfg, err := s.Remotes.Config(ctx, id)
	if err != nil {
		return err
	}
	return identity.Readyz(ctx, cfg)
}

// Stream implements provider.Streams.
func (s *Sessions) Stream(ctx context.Context, id string) (*url.URL, http.RoundTripper, error) {
	sess, err := s.get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	u, err := url.Parse(sess.cfg.Host)
	if err != nil {
		return nil, nil, fmt.Errorf("provider %s's API server %q: %w", id, sess.cfg.Host, err)
	}
	return u, sess.stream, nil
}

// streamingTransport is an HTTP/1.1 transport with the virtual kubelet's
// identity in a provider: log streams and the SPDY or WebSocket upgrades
// of exec go through it (HTTP/2 cannot carry those upgrades; client-go
// leaves HTTP/2 out when the TLS protocols do not offer it).
func streamingTransport(cfg *rest.Config) (http.RoundTripper, error) {
	c := rest.CopyConfig(cfg)
	c.NextProtos = []string{"http/1.1"}
	return rest.TransportFor(c)
}

// Provider implements provider.Namespace.
func (w *nsWatch) Provider() string { return w.session.provider }

// Name implements provider.Namespace.
func (w *nsWatch) Name() string { return w.remote }

// Get implements provider.Namespace.
func (w *nsWatch) Get(kind provider.Kind, name string) client.Object {
	inf := w.informer(kind)
	if inf == nil {
		return nil
	}
	obj, ok, err := inf.GetStore().GetByKey(w.remote + "/" + name)
	if err != nil || !ok {
		return nil
	}
	o, _ := obj.(client.Object)
	return o
}

// Create implements provider.Namespace. Pods and the Secrets the pod
// reflector writes travel as protobuf. A pod is made with the ShadowPod
// that keeps it while this cluster cannot (createPod).
func (w *nsWatch) Create(ctx context.Context, obj client.Object) error {
	switch o := obj.(type) {
	case *corev1.Pod:
		return w.createPod(ctx, o)
	case *corev1.Secret:
		_, err := w.session.cs.CoreV1().Secrets(w.remote).Create(ctx, o, metav1.CreateOptions{})
		return err
	}
	return w.session.writer.Create(ctx, obj)
}

// createPod makes pod in the provider, and first its ShadowPod: the
// provider's controller manager makes the pod again from it when it is
// deleted or evicted while this cluster cannot be reached. The pod is
// made here all the same, at once, owned by the ShadowPod, so that the
// provider's refusal (its pod policies, Pod Security, its quota) comes
// back as it is; a ShadowPod whose pod was refused goes.
func (w *nsWatch) createPod(ctx context.Context, pod *corev1.Pod) error {
	sp, err := w.ensureShadowPod(ctx, pod)
	switch {
	case shadowPodsUnsupported(err):
		// A provider of a version before ShadowPods: the pod is made
		// alone, as it was then.
		sp = nil
	case err != nil:
		return err
	}
	owned := *pod
	if sp != nil {
		owned.OwnerReferences = append(slices.Clone(pod.OwnerReferences), *metav1.NewControllerRef(sp, offloadingv1alpha1.GroupVersion.WithKind("ShadowPod")))
		owned.OwnerReferences[len(owned.OwnerReferences)-1].BlockOwnerDeletion = nil
	}
	_, err = w.session.cs.CoreV1().Pods(w.remote).Create(ctx, &owned, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) && sp != nil {
		if derr := w.deleteShadowPod(ctx, sp.Name, sp.UID, metav1.DeletePropagationBackground); derr != nil {
			return errors.Join(err, derr)
		}
	}
	return err
}

// shadowPodsUnsupported says whether err is a provider's answer that it
// has no ShadowPods (its version is older: no such resource) or gives
// this cluster no right on them (its peering role is older), rather than
// a refusal of this one.
func shadowPodsUnsupported(err error) bool {
	if err == nil {
		return false
	}
	return meta.IsNoMatchError(err) || apierrors.IsNotFound(err) ||
		(apierrors.IsForbidden(err) && strings.Contains(err.Error(), "cannot create resource"))
}

// ensureShadowPod creates pod's ShadowPod, or returns the one there for
// the same pod (its origin UID); one left by an older pod of the name is
// deleted, and the creation is tried again once it is gone.
func (w *nsWatch) ensureShadowPod(ctx context.Context, pod *corev1.Pod) (*offloadingv1alpha1.ShadowPod, error) {
	sp, err := forge.ShadowPod(pod)
	if err != nil {
		return nil, err
	}
	sp.Namespace = w.remote
	err = w.session.writer.Create(ctx, sp)
	if !apierrors.IsAlreadyExists(err) {
		return sp, err
	}
	var there offloadingv1alpha1.ShadowPod
	if err := w.session.writer.Get(ctx, client.ObjectKeyFromObject(sp), &there); err != nil {
		// Gone meanwhile: tried again (not taken for a provider without
		// ShadowPods).
		return nil, fmt.Errorf("reading ShadowPod %s/%s: %s", w.remote, sp.Name, err.Error())
	}
	uid := pod.Annotations[offloadingv1alpha1.OriginUIDAnnotation]
	if there.DeletionTimestamp.IsZero() && there.Spec.Template.Annotations[offloadingv1alpha1.OriginUIDAnnotation] == uid {
		return &there, nil
	}
	if err := w.deleteShadowPod(ctx, there.Name, there.UID, metav1.DeletePropagationBackground); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("the ShadowPod %s/%s of an older pod of the name is going: the pod is made once it is gone", w.remote, sp.Name)
}

// deleteShadowPod deletes the ShadowPod name with uid; with propagation
// Background its pod goes with it (the provider's garbage collector),
// with Orphan it stays, for a deletion with its own grace period. One
// already gone is not an error.
func (w *nsWatch) deleteShadowPod(ctx context.Context, name string, uid types.UID, propagation metav1.DeletionPropagation) error {
	sp := &offloadingv1alpha1.ShadowPod{ObjectMeta: metav1.ObjectMeta{Namespace: w.remote, Name: name}}
	err := w.session.writer.Delete(ctx, sp, client.Preconditions{UID: ptr.To(uid)}, client.PropagationPolicy(propagation))
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// Update implements provider.Namespace. A pod's ShadowPod takes what the
// pod now is (but its node: a template names none), so that a pod made
// again is the pod as it is now.
func (w *nsWatch) Update(ctx context.Context, obj client.Object) error {
	switch o := obj.(type) {
	case *corev1.Pod:
		// The template first: a pod in step with a stale template would
		// not be looked at again.
		if err := w.updateShadowPod(ctx, o); err != nil {
			return err
		}
		_, err := w.session.cs.CoreV1().Pods(w.remote).Update(ctx, o, metav1.UpdateOptions{})
		return err
	case *corev1.Secret:
		_, err := w.session.cs.CoreV1().Secrets(w.remote).Update(ctx, o, metav1.UpdateOptions{})
		return err
	}
	return w.session.writer.Update(ctx, obj)
}

// UpdateSubresource implements provider.Namespace.
func (w *nsWatch) UpdateSubresource(ctx context.Context, obj client.Object, subresource string) error {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("no subresource %q of %T to update", subresource, obj)
	}
	var err error
	switch subresource {
	case provider.SubresourceEphemeralContainers:
		_, err = w.session.cs.CoreV1().Pods(w.remote).UpdateEphemeralContainers(ctx, pod.Name, pod, metav1.UpdateOptions{})
	case provider.SubresourceResize:
		_, err = w.session.cs.CoreV1().Pods(w.remote).UpdateResize(ctx, pod.Name, pod, metav1.UpdateOptions{})
	default:
		return fmt.Errorf("no subresource %q of %T to update", subresource, obj)
	}
	return err
}

// updateShadowPod brings the template of pod's ShadowPod, if it has one,
// to what the reflectors keep in step on a provider pod (its labels, the
// annotations, the containers' images, the active deadline), from pod:
// the rest of a provider pod (what its admission set, its node, its
// ephemeral containers) is no template's.
func (w *nsWatch) updateShadowPod(ctx context.Context, pod *corev1.Pod) error {
	owner := forge.ShadowOwner(pod)
	if owner == nil {
		return nil // made before ShadowPods were
	}
	var sp offloadingv1alpha1.ShadowPod
	err := w.session.writer.Get(ctx, client.ObjectKey{Namespace: w.remote, Name: owner.Name}, &sp)
	switch {
	case apierrors.IsNotFound(err) || shadowPodsUnsupported(err):
		return nil
	case err != nil:
		return err
	case sp.UID != owner.UID || !sp.DeletionTimestamp.IsZero():
		return nil // another ShadowPod of the name, or going
	}
	spec, err := sp.Spec.Template.PodSpec()
	if err != nil {
		spec = &corev1.PodSpec{} // made whole again below from the pod
	}
	images := func(cs []corev1.Container) map[string]string {
		out := map[string]string{}
		for _, c := range cs {
			out[c.Name] = c.Image
		}
		return out
	}
	want, wantInit := images(pod.Spec.Containers), images(pod.Spec.InitContainers)
	if len(spec.Containers) == 0 {
		spec = pod.Spec.DeepCopy()
		spec.NodeName, spec.EphemeralContainers, spec.Priority, spec.PreemptionPolicy = "", nil, nil, nil
	}
	for i := range spec.Containers {
		if img, ok := want[spec.Containers[i].Name]; ok {
			spec.Containers[i].Image = img
		}
	}
	for i := range spec.InitContainers {
		if img, ok := wantInit[spec.InitContainers[i].Name]; ok {
			spec.InitContainers[i].Image = img
		}
	}
	spec.ActiveDeadlineSeconds = pod.Spec.ActiveDeadlineSeconds
	template, err := offloadingv1alpha1.NewShadowPodTemplate(maps.Clone(pod.Labels), maps.Clone(pod.Annotations), spec)
	if err != nil {
		return err
	}
	sp.Spec.Template = template
	// With its resourceVersion: a conflict is tried again.
	return w.session.writer.Update(ctx, &sp)
}

// Delete implements provider.Namespace. A pod's ShadowPod goes first, so
// that the pod is not made again.
func (w *nsWatch) Delete(ctx context.Context, kind provider.Kind, name string, uid types.UID, grace *int64) error {
	opts := metav1.DeleteOptions{GracePeriodSeconds: grace, Preconditions: &metav1.Preconditions{UID: ptr.To(uid)}}
	core := w.session.cs.CoreV1()
	var err error
	switch kind {
	case provider.Pods:
		if pod, ok := w.Get(provider.Pods, name).(*corev1.Pod); ok && pod.UID == uid {
			if owner := forge.ShadowOwner(pod); owner != nil {
				if err := w.deleteShadowPod(ctx, owner.Name, owner.UID, metav1.DeletePropagationOrphan); err != nil {
					return err
				}
			}
		}
		err = core.Pods(w.remote).Delete(ctx, name, opts)
	case provider.ConfigMaps:
		err = core.ConfigMaps(w.remote).Delete(ctx, name, opts)
	case provider.Secrets:
		err = core.Secrets(w.remote).Delete(ctx, name, opts)
	case provider.Services:
		err = core.Services(w.remote).Delete(ctx, name, opts)
	case provider.EndpointSlices:
		err = w.session.cs.DiscoveryV1().EndpointSlices(w.remote).Delete(ctx, name, opts)
	case provider.PodDisruptionBudgets:
		err = w.session.cs.PolicyV1().PodDisruptionBudgets(w.remote).Delete(ctx, name, opts)
	case provider.PersistentVolumeClaims:
		err = core.PersistentVolumeClaims(w.remote).Delete(ctx, name, opts)
	default:
		return fmt.Errorf("unknown kind %q", kind)
	}
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
