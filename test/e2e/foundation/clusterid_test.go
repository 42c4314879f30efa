// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package foundation_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	"github.com/liqo-go/liqo/internal/clusterid"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

func readClusterID(t *testing.T, c client.Client) (id, source string) {
	t.Helper()
	var cm corev1.ConfigMap
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: install.DefaultNamespace, Name: clusterid.ConfigMapName}, &cm); err != nil {
		t.Fatalf("reading the ClusterID ConfigMap: %v", err)
	}
	return cm.Data[clusterid.ClusterIDKey], cm.Data[clusterid.SourceKey]
}

func publishedClusterID(t *testing.T, c client.Client) string {
	t.Helper()
	var cfg configv1alpha1.ClusterConfig
	if err := c.Get(t.Context(), client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cfg); err != nil {
		t.Fatalf("reading ClusterConfig: %v", err)
	}
	return cfg.Status.ClusterID
}

// TestClusterIDFromControlPlaneNode: a cluster with a control-plane node
// takes that node's UID as its ClusterID.
func TestClusterIDFromControlPlaneNode(t *testing.T) {
	cp, _ := members()
	framework.LogOnFailure(t, cp)
	c := framework.Client(t, cp)
	var node corev1.Node
	if err := c.Get(t.Context(), client.ObjectKey{Name: cp.ControlPlaneNodeName()}, &node); err != nil {
		t.Fatalf("reading the control-plane node: %v", err)
	}
	id, source := readClusterID(t, c)
	if id != string(node.UID) || source != string(clusterid.FromControlPlaneNode) {
		t.Fatalf("ClusterID = %q from %q, want the control-plane node's UID %q from %s", id, source, node.UID, clusterid.FromControlPlaneNode)
	}
	if got := publishedClusterID(t, c); got != id {
		t.Fatalf("ClusterConfig status.clusterID = %q, want %q", got, id)
	}
}

// TestClusterIDFromUUID: a cluster without a control-plane node gets a new
// UUID, which is none of its nodes' UIDs.
func TestClusterIDFromUUID(t *testing.T) {
	_, workers := members()
	framework.LogOnFailure(t, workers)
	c := framework.Client(t, workers)
	id, source := readClusterID(t, c)
	if _, err := uuid.Parse(id); err != nil || source != string(clusterid.FromUUID) {
		t.Fatalf("ClusterID = %q from %q, want a UUID from %s (parse error: %v)", id, source, clusterid.FromUUID, err)
	}
	var nodes corev1.NodeList
	if err := c.List(t.Context(), &nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if string(n.UID) == id {
			t.Fatalf("ClusterID %q is node %s's UID, but that node is not a control-plane node", id, n.Name)
		}
	}
	if got := publishedClusterID(t, c); got != id {
		t.Fatalf("ClusterConfig status.clusterID = %q, want %q", got, id)
	}
}

// TestClusterIDSurvivesRestart restarts each controller manager after
// changing what a fresh choice would pick (a control-plane node appears
// where there was none), and checks the ClusterID stays what it was.
func TestClusterIDSurvivesRestart(t *testing.T) {
	for _, m := range suite.Members {
		t.Run(m.Name, func(t *testing.T) {
			framework.LogOnFailure(t, m)
			c := framework.Client(t, m)
			before, _ := readClusterID(t, c)

			if err := m.StopControllerManager(); err != nil {
				t.Fatalf("stopping the controller manager: %v", err)
			}
			// A new control-plane node would change a freshly chosen ID.
			newNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name:   m.Name + "-new-control-plane",
				Labels: map[string]string{localcluster.ControlPlaneLabel: ""},
			}}
			if err := c.Create(t.Context(), newNode); err != nil {
				t.Fatalf("creating a control-plane node: %v", err)
			}
			framework.DeleteOnCleanup(t, c, newNode)
			// Clear the published status, so that seeing it again proves
			// the new process published it.
			var cfg configv1alpha1.ClusterConfig
			if err := c.Get(t.Context(), client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cfg); err != nil {
				t.Fatal(err)
			}
			cfg.Status.ClusterID = ""
			if err := c.Status().Update(t.Context(), &cfg); err != nil {
				t.Fatalf("clearing ClusterConfig status: %v", err)
			}

			if err := m.StartControllerManager(t.Context()); err != nil {
				t.Fatalf("restarting the controller manager: %v", err)
			}
			after, source := readClusterID(t, c)
			if after != before {
				t.Fatalf("ClusterID changed across a restart: %q -> %q", before, after)
			}
			framework.Eventually(t, 30*time.Second, func() error {
				if got := publishedClusterID(t, c); got != before {
					return fmt.Errorf("status.clusterID = %q, want %q (source %s)", got, before, source)
				}
				return nil
			})
		})
	}
}
