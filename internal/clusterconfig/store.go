// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package clusterconfig

import (
	"context"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
)

// Store holds the configuration in force, for components that act on its
// switches at run time. It is safe for concurrent use.
type Store struct {
	mu      sync.RWMutex
	current *configv1alpha1.ClusterConfig
	subs    []chan struct{}
}

// Get returns a copy of the configuration in force, or nil before the first
// reconcile.
func (s *Store) Get() *configv1alpha1.ClusterConfig {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.current == nil {
		return nil
	}
	return s.current.DeepCopy()
}

// Subscribe returns a channel that receives a value, without blocking the
// store, whenever the configuration changes. Subscribers re-read with Get.
func (s *Store) Subscribe() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{}, 1)
	s.subs = append(s.subs, ch)
	return ch
}

func (s *Store) set(cfg *configv1alpha1.ClusterConfig) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current = cfg.DeepCopy()
	for _, ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default: // a change is already pending for this subscriber
		}
	}
}

// ChangeSource turns the values of changes (a Subscribe channel; nil for
// none) into events for h, a source for a controller that must act again
// on every object when the configuration changes: h maps the event (its
// object is obj, carrying nothing) to the requests.
func ChangeSource(mgr manager.Manager, changes <-chan struct{}, obj client.Object, h handler.EventHandler) source.Source {
	events := make(chan event.GenericEvent)
	if changes != nil {
		_ = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-changes:
					select {
					case events <- event.GenericEvent{Object: obj}:
					case <-ctx.Done():
						return nil
					}
				}
			}
		}))
	}
	return source.Channel(events, h)
}
