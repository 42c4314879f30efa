// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// setBroadcaster switches a provider's offers on or off.
func setBroadcaster(t *testing.T, m *playground.Member, on bool) {
	t.Helper()
	framework.SetClusterConfig(t, m, func(s *configv1alpha1.ClusterConfigSpec) { s.SharingConfig.EnableBroadcaster = ptr.To(on) })
}

// TestProviderCannotTakeAnotherProvidersNodeName: a provider that calls
// itself by another provider's name, in the offer it writes, does not get
// that provider's virtual node name, not even while that node is gone (the
// other provider pausing its offer): pods bound to that node by hostname
// never land on it. Its own node keeps its name; the other provider gets
// its name back when it offers again.
func TestProviderCannotTakeAnotherProvidersNodeName(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := t.Context()
	inA := framework.Client(t, a)
	provider := framework.ClientFor(t, framework.ProviderConfig(t, b, a.ClusterID))
	own := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(b.ClusterID), Name: sharingv1alpha1.AdvertisementName(b.ClusterID)}
	bNode, err := framework.VirtualNode(inA, b.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	cNode, err := framework.VirtualNode(inA, c.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	taken, ok := strings.CutPrefix(cNode.Name, "liqo-")
	if !ok || taken == c.ClusterID {
		t.Fatalf("%s's virtual node is %s, not named after its cluster name", c.Name, cNode.Name)
	}
	callItself := func(ctx context.Context, name string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var adv sharingv1alpha1.Advertisement
			if err := provider.Get(ctx, own, &adv); err != nil {
				return err
			}
			if adv.Spec.ClusterIdentity.ClusterName == name {
				return nil
			}
			adv.Spec.ClusterIdentity.ClusterName = name
			return provider.Update(ctx, &adv)
		})
	}
	t.Cleanup(func() {
		if err := callItself(context.Background(), strings.TrimPrefix(bNode.Name, "liqo-")); err != nil {
			t.Errorf("restoring %s's name: %v", b.Name, err)
		}
	})
	framework.Allowed(t, "calling itself "+taken, callItself(ctx, taken))

	// C pauses its offer: its virtual node goes, and its name is free.
	setBroadcaster(t, c, false)
	t.Cleanup(func() {
		setBroadcaster(t, c, true)
		framework.WaitVirtualNodesReady(t, a, c)
	})
	framework.Eventually(t, 30*time.Second, func() error {
		if n, err := framework.VirtualNode(inA, c.ClusterID); err == nil {
			return fmt.Errorf("the virtual node %s of %s is still there", n.Name, c.Name)
		}
		return nil
	})
	// Two heartbeats of B's node, each after a pass of its reconciler with
	// the other name in the offer (B's own Broadcaster may put its name
	// back at a refresh: it is set again before each).
	for range 2 {
		framework.Allowed(t, "calling itself "+taken, callItself(ctx, taken))
		node := waitHeartbeats(t, a, b.ClusterID, 1)
		if node.Name != bNode.Name {
			t.Fatalf("%s's virtual node is now %s, was %s", b.Name, node.Name, bNode.Name)
		}
	}
	// The name stays reserved for C, on its ForeignCluster, while its node
	// is gone: even a C that calls itself otherwise later gets it back.
	var fcs discoveryv1alpha1.ForeignClusterList
	if err := inA.List(ctx, &fcs, client.MatchingLabels{discoveryv1alpha1.ClusterIDLabel: c.ClusterID}); err != nil || len(fcs.Items) != 1 {
		t.Fatalf("the ForeignCluster of %s in %s: %d found (%v)", c.Name, a.Name, len(fcs.Items), err)
	}
	if got := fcs.Items[0].Annotations[offloadingv1alpha1.VirtualNodeNameAnnotation]; got != cNode.Name {
		t.Fatalf("%s's ForeignCluster remembers node name %q, want %s", c.Name, got, cNode.Name)
	}
	var squatted corev1.Node
	if err := inA.Get(ctx, client.ObjectKey{Name: cNode.Name}, &squatted); err == nil {
		t.Fatalf("node %s, %s's name, exists while %s offers nothing: %s=%s", cNode.Name, c.Name, c.Name,
			offloadingv1alpha1.RemoteClusterLabel, squatted.Labels[offloadingv1alpha1.RemoteClusterLabel])
	}

	// C offers again and gets its name back.
	setBroadcaster(t, c, true)
	framework.Eventually(t, 60*time.Second, func() error {
		n, err := framework.VirtualNode(inA, c.ClusterID)
		if err != nil {
			return err
		}
		if n.Name != cNode.Name {
			t.Fatalf("%s's virtual node came back as %s, not %s", c.Name, n.Name, cNode.Name)
		}
		return readyError(n)
	})
}
