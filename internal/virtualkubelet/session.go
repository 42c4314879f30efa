// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package virtualkubelet

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/identity"
)

// The kinds a session watches in each provider namespace.
const (
	kindPod       = "pods"
	kindConfigMap = "configmaps"
	kindSecret    = "secrets"
	kindService   = "services"
)

var watchedKinds = []string{kindPod, kindConfigMap, kindSecret, kindService}

// errNotSynced is returned while a provider namespace's informers fill.
var errNotSynced = errors.New("the provider namespace's watch has not synced yet")

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
	channels  map[string]chan event.GenericEvent
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

// nsWatch watches one provider namespace.
type nsWatch struct {
	remote    string
	informers map[string]cache.SharedIndexInformer
	cancel    context.CancelFunc
}

func (s *Sessions) init() {
	s.startOnce.Do(func() {
		s.sessions = map[string]*session{}
		s.stopping = map[string]*time.Timer{}
		s.started = make(chan struct{})
		s.channels = map[string]chan event.GenericEvent{}
		for _, k := range watchedKinds {
			s.channels[k] = make(chan event.GenericEvent, 4096)
		}
	})
}

// Source returns the source of events for the local objects of kind whose
// provider copy changed.
func (s *Sessions) Source(kind string, h handler.EventHandler) source.Source {
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
func (s *Sessions) get(ctx context.Context, provider string) (*session, error) {
	s.init()
	select {
	case <-s.started:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	cfg, err := s.Remotes.Config(ctx, provider)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.stopping[provider]; ok {
		t.Stop()
		delete(s.stopping, provider)
	}
	if sess, ok := s.sessions[provider]; ok {
		if sess.cfg == cfg {
			return sess, nil
		}
		sess.cancel()
		delete(s.sessions, provider)
	}
	// Pods and objects travel as protobuf, cheaper than JSON to encode
	// in the provider's API server and to decode here.
	pcfg := rest.CopyConfig(cfg)
	pcfg.ContentType = runtime.ContentTypeProtobuf
	pcfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cs, err := kubernetes.NewForConfig(pcfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", provider, err)
	}
	writer, err := s.Remotes.ClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", provider, err)
	}
	stream, err := streamingTransport(cfg)
	if err != nil {
		return nil, fmt.Errorf("streaming transport for %s: %w", provider, err)
	}
	sctx, cancel := context.WithCancel(s.ctx)
	sess := &session{provider: provider, cfg: cfg, cs: cs, writer: writer, stream: stream, ctx: sctx, cancel: cancel,
		namespaces: map[string]*nsWatch{}}
	s.sessions[provider] = sess
	ctrl.LoggerFrom(ctx).Info("Provider session opened", "provider", provider)
	// Watch at once every namespace already offloaded there, so that what
	// this cluster left there (say, while it was down) is looked at.
	var list offloadingv1alpha1.NamespaceOffloadingList
	if err := s.Reader.List(ctx, &list); err == nil {
		for i := range list.Items {
			if remote, ok := ReadyRemoteNamespace(&list.Items[i], provider); ok {
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

// StopNamespace stops watching local's namespace in every provider except
// those in keep.
func (s *Sessions) StopNamespace(local string, keep map[string]bool) {
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

// watch returns the watch of the provider namespace remote for the local
// namespace local, starting it if needed; errNotSynced until its informers
// have listed.
func (s *Sessions) watch(ctx context.Context, sess *session, local, remote string) (*nsWatch, error) {
	w := s.startWatch(ctx, sess, local, remote)
	for _, inf := range w.informers {
		if !inf.HasSynced() {
			return nil, errNotSynced
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
	factory := informers.NewSharedInformerFactoryWithOptions(sess.cs, 0, informers.WithNamespace(remote),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = offloadingv1alpha1.OriginClusterLabel + "=" + s.LocalClusterID
		}))
	w := &nsWatch{remote: remote, cancel: cancel, informers: map[string]cache.SharedIndexInformer{
		kindPod:       factory.Core().V1().Pods().Informer(),
		kindConfigMap: factory.Core().V1().ConfigMaps().Informer(),
		kindSecret:    factory.Core().V1().Secrets().Informer(),
		kindService:   factory.Core().V1().Services().Informer(),
	}}
	for kind, inf := range w.informers {
		ch := s.channels[kind]
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
	}
	factory.Start(ctx.Done())
	sess.namespaces[local] = w
	return w
}

// get returns the provider copy of the object name of kind, if any.
func (w *nsWatch) get(kind, name string) (runtime.Object, bool) {
	obj, ok, err := w.informers[kind].GetStore().GetByKey(w.remote + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	return obj.(runtime.Object), true
}

// watches returns the watches of local's namespace in every open session.
func (s *Sessions) watches(local string) []*nsWatchIn {
	var out []*nsWatchIn
	for _, sess := range s.all() {
		sess.mu.Lock()
		if w, ok := sess.namespaces[local]; ok {
			out = append(out, &nsWatchIn{nsWatch: w, session: sess})
		}
		sess.mu.Unlock()
	}
	return out
}

type nsWatchIn struct {
	*nsWatch
	session *session
}

// ReadyRemoteNamespace returns the namespace no offloads to in provider,
// once the provider reported it Ready.
func ReadyRemoteNamespace(no *offloadingv1alpha1.NamespaceOffloading, provider string) (string, bool) {
	for _, st := range no.Status.RemoteNamespaces {
		if st.ClusterID == provider && st.Phase == offloadingv1alpha1.RemoteNamespaceReady {
			return st.Namespace, true
		}
	}
	return "", false
}
