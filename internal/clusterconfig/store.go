// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package clusterconfig

import (
	"sync"

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
