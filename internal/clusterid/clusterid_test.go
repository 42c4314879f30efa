// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package clusterid

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/liqo-go/liqo/api"
)

func node(name, uid string, created time.Time, labels ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name, UID: types.UID(uid), Labels: map[string]string{},
		CreationTimestamp: metav1.NewTime(created),
	}}
	for _, l := range labels {
		n.Labels[l] = ""
	}
	return n
}

func TestEnsure(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	existing := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "liqo", Name: ConfigMapName},
		Data:       map[string]string{ClusterIDKey: "kept-id"},
	}
	emptyCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "liqo", Name: ConfigMapName}}
	tests := []struct {
		name       string
		objects    []client.Object
		wantID     string
		wantSource Source
	}{
		{"no nodes: a UUID", nil, "fresh-uuid", FromUUID},
		{"only workers: a UUID", []client.Object{node("w", "worker-uid", t0)}, "fresh-uuid", FromUUID},
		{"control-plane node: its UID", []client.Object{
			node("w", "worker-uid", t0),
			node("cp", "cp-uid", t0, "node-role.kubernetes.io/control-plane"),
		}, "cp-uid", FromControlPlaneNode},
		{"legacy master label counts", []client.Object{node("m", "master-uid", t0, "node-role.kubernetes.io/master")}, "master-uid", FromControlPlaneNode},
		{"oldest control-plane node wins", []client.Object{
			node("a-new", "new-uid", t0.Add(time.Hour), "node-role.kubernetes.io/control-plane"),
			node("z-old", "old-uid", t0, "node-role.kubernetes.io/control-plane"),
		}, "old-uid", FromControlPlaneNode},
		{"existing ConfigMap wins over nodes", []client.Object{
			existing, node("cp", "cp-uid", t0, "node-role.kubernetes.io/control-plane"),
		}, "kept-id", FromConfigMap},
		{"ConfigMap without ID is filled in", []client.Object{emptyCM}, "fresh-uuid", FromUUID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(tt.objects...).Build()
			e := &Ensurer{Client: c, Namespace: "liqo", NewUUID: func() string { return "fresh-uuid" }}
			id, source, err := e.Ensure(t.Context())
			if err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			if id != tt.wantID || source != tt.wantSource {
				t.Fatalf("Ensure = (%q, %s), want (%q, %s)", id, source, tt.wantID, tt.wantSource)
			}
			var cm corev1.ConfigMap
			if err := c.Get(t.Context(), types.NamespacedName{Namespace: "liqo", Name: ConfigMapName}, &cm); err != nil {
				t.Fatalf("reading ConfigMap: %v", err)
			}
			if cm.Data[ClusterIDKey] != tt.wantID {
				t.Fatalf("ConfigMap holds %q, want %q", cm.Data[ClusterIDKey], tt.wantID)
			}
			// A second run, with a different UUID generator, must not change it.
			e.NewUUID = func() string { return "other-uuid" }
			again, source, err := e.Ensure(t.Context())
			if err != nil || again != tt.wantID || source != FromConfigMap {
				t.Fatalf("second Ensure = (%q, %s, %v), want (%q, ConfigMap, nil)", again, source, err, tt.wantID)
			}
		})
	}
}
