// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestProviderCannotHandUsABadDNS: a provider says, in the status of a
// consumer's NamespaceMap, where the consumer's pods there ask for names
// (its DNS proxy). b, turned hostile (its controller manager stopped,
// its own administrator writing that status), states a domain that is
// no DNS name, which its schema lets through: a's NamespaceOffloading
// takes b's word on its namespace (the message b wrote comes through)
// but not that DNS, and c's entry is as it was. The same status with a
// DNS that is one is taken as stated.
func TestProviderCannotHandUsABadDNS(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := t.Context()
	const ns = "dns-status"
	offload(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{}, 2)
	framework.StopControllerManager(t, b)
	inA, inB := framework.Client(t, a), framework.Client(t, b)
	nm := &offloadingv1alpha1.NamespaceMap{}
	nm.Namespace, nm.Name = discoveryv1alpha1.TenantNamespace(a.ClusterID), offloadingv1alpha1.NamespaceMapName

	state := func(message string, dns offloadingv1alpha1.ConsumerDNS) *offloadingv1alpha1.RemoteNamespaceStatus {
		t.Helper()
		body, err := json.Marshal(map[string]any{"status": map[string]any{
			"dns":        dns,
			"namespaces": map[string]any{ns: map[string]any{"message": message}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if err := inB.Status().Patch(ctx, nm.DeepCopy(), client.RawPatch(types.MergePatchType, body)); err != nil {
			t.Fatalf("b writing its NamespaceMap's status: %v", err)
		}
		// a has read it once b's message is in its status.
		var got offloadingv1alpha1.RemoteNamespaceStatus
		framework.Eventually(t, time.Minute, func() error {
			no, err := offloadingOf(ctx, inA, ns)
			if err != nil {
				return err
			}
			for _, e := range no.Status.RemoteNamespaces {
				if e.ClusterID == b.ClusterID && e.Message == message {
					got = e
					return nil
				}
			}
			return fmt.Errorf("a's NamespaceOffloading %s does not show b's message %q yet: %+v", ns, message, no.Status.RemoteNamespaces)
		})
		return &got
	}

	before, err := offloadingOf(ctx, inA, ns)
	if err != nil {
		t.Fatal(err)
	}
	entryOfC := func(no *offloadingv1alpha1.NamespaceOffloading) offloadingv1alpha1.RemoteNamespaceStatus {
		for _, e := range no.Status.RemoteNamespaces {
			if e.ClusterID == c.ClusterID {
				return e
			}
		}
		t.Fatalf("no entry of c in %+v", no.Status.RemoteNamespaces)
		return offloadingv1alpha1.RemoteNamespaceStatus{}
	}
	cBefore := entryOfC(before)

	bad := offloadingv1alpha1.ConsumerDNS{Nameserver: "10.96.0.53", Domain: "cluster.local; options ndots:0"}
	if got := state("hostile", bad); got.DNS != nil {
		t.Errorf("a took b's DNS %+v, which names no DNS domain", *got.DNS)
	}
	after, err := offloadingOf(ctx, inA, ns)
	if err != nil {
		t.Fatal(err)
	}
	if cAfter := entryOfC(after); !equality.Semantic.DeepEqual(cAfter, cBefore) {
		t.Errorf("c's entry changed with b's word: %+v, was %+v", cAfter, cBefore)
	}

	good := offloadingv1alpha1.ConsumerDNS{Nameserver: "10.96.0.53", Domain: "cluster.local"}
	if got := state("honest", good); got.DNS == nil || *got.DNS != good {
		t.Errorf("a's entry of b has DNS %+v, want %+v as b stated", got.DNS, good)
	}
}

func offloadingOf(ctx context.Context, c client.Client, ns string) (*offloadingv1alpha1.NamespaceOffloading, error) {
	var no offloadingv1alpha1.NamespaceOffloading
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName}, &no)
	return &no, err
}
