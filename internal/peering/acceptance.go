// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
)

// acceptanceWatchLimit bounds how long one watch of a provider's
// PeeringRequest runs; the reconciler's slower polling covers what comes
// after.
const acceptanceWatchLimit = 2 * time.Minute

// acceptanceWatches watch, in each provider a PeeringRequest waits in, that
// one PeeringRequest (the consumer's identity may list and watch it by
// name, nothing else) and wake the Outgoing reconciler of its
// ForeignCluster on every change: the provider's acceptance, a refusal,
// a deletion. Nothing a provider sends is trusted: an event only makes the
// reconciler read the PeeringRequest again. One watch per ForeignCluster
// at most, each for at most acceptanceWatchLimit.
type acceptanceWatches struct {
	mu      sync.Mutex
	running map[string]*acceptanceWatch
	events  chan event.GenericEvent
}

type acceptanceWatch struct{ cancel context.CancelFunc }

func newAcceptanceWatches() *acceptanceWatches {
	return &acceptanceWatches{running: map[string]*acceptanceWatch{}, events: make(chan event.GenericEvent, 64)}
}

// watching reports whether the PeeringRequest of ForeignCluster fcName is
// being watched.
func (a *acceptanceWatches) watching(fcName string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.running[fcName]
	return ok
}

// start watches PeeringRequest name in the provider cfg reaches, for
// ForeignCluster fcName, unless that is watched already.
func (a *acceptanceWatches) start(ctx context.Context, fcName, name string, cfg *rest.Config, scheme *runtime.Scheme) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.running[fcName]; ok {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), acceptanceWatchLimit)
	w := &acceptanceWatch{cancel: cancel}
	a.running[fcName] = w
	log := ctrl.LoggerFrom(ctx).V(1)
	go func() {
		defer a.end(fcName, w)
		if err := a.watch(wctx, fcName, name, cfg, scheme); err != nil && wctx.Err() == nil {
			log.Info("Watching the PeeringRequest in the provider failed; polling instead", "error", err.Error())
		}
	}()
}

// stop ends the watch for fcName, if any.
func (a *acceptanceWatches) stop(fcName string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w, ok := a.running[fcName]; ok {
		w.cancel()
		delete(a.running, fcName)
	}
}

func (a *acceptanceWatches) end(fcName string, w *acceptanceWatch) {
	w.cancel()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running[fcName] == w {
		delete(a.running, fcName)
	}
}

func (a *acceptanceWatches) watch(ctx context.Context, fcName, name string, cfg *rest.Config, scheme *runtime.Scheme) error {
	// A fixed mapping: no API discovery in the provider for one resource.
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(discoveryv1alpha1.GroupVersion.WithKind("PeeringRequest"), meta.RESTScopeRoot)
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme, Mapper: mapper})
	if err != nil {
		return err
	}
	w, err := wc.Watch(ctx, &discoveryv1alpha1.PeeringRequestList{}, client.MatchingFields{"metadata.name": name})
	if err != nil {
		return err
	}
	defer w.Stop()
	wake := event.GenericEvent{Object: &discoveryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: fcName}}}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil // the reconciler polls from here on
			}
			select {
			case a.events <- wake:
			case <-ctx.Done():
				return nil
			}
			if pr, isPR := ev.Object.(*discoveryv1alpha1.PeeringRequest); isPR &&
				meta.IsStatusConditionTrue(pr.Status.Conditions, discoveryv1alpha1.PeeringRequestAccepted) {
				return nil // accepted: nothing left to wait for
			}
		}
	}
}
