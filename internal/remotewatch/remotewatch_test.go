// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package remotewatch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func cm(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// waitUntil polls cond for at most a second: the watch runs in its own
// goroutine. Not a timing assertion: a second is far beyond what it needs.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not the case after a second", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestOneWatchPerKeyWakesUntilDone: a second Start for a running key opens
// nothing; each event wakes what Wake names; the event that ends the wait
// ends the watch, and a Start after that opens a new one.
func TestOneWatchPerKeyWakesUntilDone(t *testing.T) {
	s := New(time.Minute)
	var opened atomic.Int32
	fake := watch.NewFake()
	open := func(context.Context) (watch.Interface, error) {
		opened.Add(1)
		return fake, nil
	}
	wake := func(_ context.Context, obj runtime.Object) ([]client.Object, bool) {
		c := obj.(*corev1.ConfigMap)
		return []client.Object{cm("woken-by-" + c.Name)}, c.Name == "last"
	}
	s.Start(context.Background(), "p", open, wake)
	s.Start(context.Background(), "p", open, wake)
	if !s.Watching("p") {
		t.Fatal("not watching after Start")
	}
	fake.Add(cm("first"))
	if got := (<-s.Events).Object.GetName(); got != "woken-by-first" {
		t.Fatalf("woke %s, want woken-by-first", got)
	}
	fake.Modify(cm("last"))
	if got := (<-s.Events).Object.GetName(); got != "woken-by-last" {
		t.Fatalf("woke %s, want woken-by-last", got)
	}
	waitUntil(t, "the watch ends once the wait is over", func() bool { return !s.Watching("p") })
	if n := opened.Load(); n != 1 {
		t.Fatalf("%d watches opened for one key, want 1", n)
	}
	s.Start(context.Background(), "p", func(context.Context) (watch.Interface, error) {
		opened.Add(1)
		return watch.NewFake(), nil
	}, wake)
	waitUntil(t, "a new watch opens after the last one ended", func() bool { return opened.Load() == 2 })
	s.Stop("p")
	if s.Watching("p") {
		t.Fatal("still watching after Stop")
	}
}

// TestStartRenewsAnOldWatch: a Start while a watch runs with less than
// half of Limit left replaces it, so that the caller has a watch for a
// while yet; a younger one is kept.
func TestStartRenewsAnOldWatch(t *testing.T) {
	s := New(time.Hour)
	var opened atomic.Int32
	first, second := watch.NewFake(), watch.NewFake()
	open := func(context.Context) (watch.Interface, error) {
		if opened.Add(1) == 1 {
			return first, nil
		}
		return second, nil
	}
	wake := func(context.Context, runtime.Object) ([]client.Object, bool) { return nil, false }
	s.Start(context.Background(), "p", open, wake)
	waitUntil(t, "the first watch opens", func() bool { return opened.Load() == 1 })
	s.Start(context.Background(), "p", open, wake)
	s.mu.Lock()
	s.running["p"].started = time.Now().Add(-40 * time.Minute) // more than half of its hour gone
	s.mu.Unlock()
	s.Start(context.Background(), "p", open, wake)
	waitUntil(t, "a second watch replaces the old one", func() bool { return opened.Load() == 2 && first.IsStopped() })
	if !s.Watching("p") || second.IsStopped() {
		t.Fatal("the new watch does not run")
	}
	s.Stop("p")
}

// TestWatchEndsAtTheLimit: a watch whose peer never answers ends at Limit.
func TestWatchEndsAtTheLimit(t *testing.T) {
	s := New(20 * time.Millisecond)
	fake := watch.NewFake()
	s.Start(context.Background(), "p", func(context.Context) (watch.Interface, error) { return fake, nil },
		func(context.Context, runtime.Object) ([]client.Object, bool) { return nil, false })
	waitUntil(t, "the watch ends at its limit", func() bool { return !s.Watching("p") })
	if !fake.IsStopped() {
		t.Fatal("the peer's watch was not stopped")
	}
}

// TestNilSetWatchesNothing: a reconciler not set up with a manager has no
// Set; its calls do nothing.
func TestNilSetWatchesNothing(t *testing.T) {
	var s *Set
	s.Start(context.Background(), "p", func(context.Context) (watch.Interface, error) {
		t.Fatal("a nil Set opened a watch")
		return nil, nil
	}, nil)
	s.Stop("p")
	if s.Watching("p") {
		t.Fatal("a nil Set watches")
	}
}

// TestByNameAsksForTheOneObject: the watch asks the peer for the named
// object only, at the kind's path (cluster-scoped or in the namespace),
// without API discovery first; a peer's refusal is returned.
func TestByNameAsksForTheOneObject(t *testing.T) {
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Path+"?"+r.URL.RawQuery)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`))
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		list            client.ObjectList
		namespace, want string
	}{
		{&corev1.NamespaceList{}, "", "/api/v1/namespaces?fieldSelector=metadata.name%3Dtenant&watch=true"},
		{&corev1.ConfigMapList{}, "ns", "/api/v1/namespaces/ns/configmaps?fieldSelector=metadata.name%3Dtenant&watch=true"},
	} {
		asked = nil
		w, err := ByName(t.Context(), cfg, scheme, tc.list, tc.namespace, "tenant")
		if err == nil {
			w.Stop()
			t.Fatalf("%T: a refused watch gave no error", tc.list)
		}
		if len(asked) != 1 || asked[0] != tc.want {
			t.Errorf("%T: asked %q, want only %q", tc.list, asked, tc.want)
		}
	}
}
