// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package localcluster

import (
	"testing"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStartStop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real cluster")
	}
	c, err := Start(t.Context(), Options{Name: "smoke", Nodes: 2, ControlPlaneNode: true, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	dir := c.Dir
	t.Logf("started in %s", c.StartDuration)
	cs, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 3 {
		t.Fatalf("got %d nodes, want 3", len(nodes.Items))
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	left, err := ProcessesReferencing(dir)
	if err != nil || len(left) != 0 {
		t.Fatalf("processes left: %v (%v)", left, err)
	}
}
