// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package remotewatch runs short, bounded watches of objects in a peer's
// API server whose changes a local reconciler waits for (a provider
// accepting a PeeringRequest, creating an offloaded namespace), so that
// the reconciler is woken when they change instead of polling for them.
// Nothing a peer sends is trusted: an event only wakes the reconciler,
// which reads the object again.
package remotewatch

import (
	"context"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// Set runs at most one watch per key, each for at most Limit; its events
// go to Events, a source for the reconciler (source.Channel). A nil Set
// watches nothing (a reconciler not set up with a manager).
type Set struct {
	// Events receives the objects to reconcile.
	Events chan event.GenericEvent
	// Limit bounds each watch; the reconciler's slower polling covers
	// what comes after.
	Limit time.Duration

	mu      sync.Mutex
	running map[string]*entry
}

type entry struct {
	cancel  context.CancelFunc
	started time.Time
}

// New returns a Set whose watches last at most limit.
func New(limit time.Duration) *Set {
	return &Set{Events: make(chan event.GenericEvent, 64), Limit: limit, running: map[string]*entry{}}
}

// Watching reports whether a watch runs for key.
func (s *Set) Watching(key string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.running[key]
	return ok
}

// Open starts a watch.
type Open func(ctx context.Context) (watch.Interface, error)

// Wake says, for one event of a watch, which objects to reconcile and
// whether the wait is over (the watch then ends).
type Wake func(ctx context.Context, obj runtime.Object) (reconcile []client.Object, done bool)

// Start runs open's watch for key, unless one runs already that has
// more than half of Limit left: a caller that starts one has a watch for
// at least half of Limit (an older one is replaced).
func (s *Set) Start(ctx context.Context, key string, open Open, wake Wake) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.running[key]; ok {
		if time.Since(e.started) < s.Limit/2 {
			return
		}
		e.cancel()
		delete(s.running, key)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.Limit)
	e := &entry{cancel: cancel, started: time.Now()}
	s.running[key] = e
	log := ctrl.LoggerFrom(ctx).V(1)
	go func() {
		defer s.end(key, e)
		if err := s.run(wctx, open, wake); err != nil && wctx.Err() == nil {
			log.Info("Watching the peer failed; polling instead", "watch", key, "error", err.Error())
		}
	}()
}

// Stop ends the watch for key, if any.
func (s *Set) Stop(key string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.running[key]; ok {
		e.cancel()
		delete(s.running, key)
	}
}

func (s *Set) end(key string, e *entry) {
	e.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[key] == e {
		delete(s.running, key)
	}
}

func (s *Set) run(ctx context.Context, open Open, wake Wake) error {
	w, err := open(ctx)
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil // the reconciler polls from here on
			}
			objs, done := wake(ctx, ev.Object)
			for _, o := range objs {
				select {
				case s.Events <- event.GenericEvent{Object: o}:
				case <-ctx.Done():
					return nil
				}
			}
			if done {
				return nil
			}
		}
	}
}

// ByName opens a watch of the one object name of list's kind, in
// namespace ("" for a cluster-scoped kind), in the API server cfg
// reaches. Its client knows only that kind: no API discovery in the peer,
// and nothing but the object by name is asked for (a peer's grant may
// allow no more).
func ByName(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, list client.ObjectList, namespace, name string) (watch.Interface, error) {
	gvk, err := apiutil.GVKForObject(list, scheme)
	if err != nil {
		return nil, err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	scope := meta.RESTScopeNamespace
	if namespace == "" {
		scope = meta.RESTScopeRoot
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(gvk, scope)
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme, Mapper: mapper})
	if err != nil {
		return nil, err
	}
	opts := []client.ListOption{client.MatchingFields{"metadata.name": name}}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	return wc.Watch(ctx, list, opts...)
}
