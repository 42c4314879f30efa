// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package pods

import (
	"context"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

// TestDirectAddress follows one pod's address through a broker: the
// broker says where the pod runs (the provider, and the pod's address
// there); the consumer shows that address as it reaches it through its own
// tunnel with the provider, and otherwise the broker's, as before. What
// the broker says cannot point the consumer outside what the provider
// agreed with it.
func TestDirectAddress(t *testing.T) {
	const consumer, broker, provider = "consumer", "broker", "provider"
	// What each cluster's fabric agreed: the broker reaches the
	// provider's 10.2/16 at 10.62/16; the consumer reaches the broker's
	// view of it (10.62/16) at 10.71/16, and the provider's 10.2/16 at
	// 10.72/16 when it has its own tunnel there.
	remap := func(from, to string) func(netip.Addr) (netip.Addr, bool) {
		f, tt := netip.MustParsePrefix(from), netip.MustParsePrefix(to)
		return func(a netip.Addr) (netip.Addr, bool) {
			if !f.Contains(a) {
				return netip.Addr{}, false
			}
			b, tb := a.As4(), tt.Addr().As4()
			return netip.AddrFrom4([4]byte{tb[0], tb[1], b[2], b[3]}), true
		}
	}
	inBroker := &Reflector{LocalClusterID: broker, Translate: func(_ context.Context, p string, a netip.Addr) (netip.Addr, bool) {
		if p == provider {
			return remap("10.2.0.0/16", "10.62.0.0/16")(a)
		}
		return netip.Addr{}, false
	}}
	direct := true
	inConsumer := &Reflector{LocalClusterID: consumer, Translate: func(_ context.Context, p string, a netip.Addr) (netip.Addr, bool) {
		switch {
		case p == broker:
			return remap("10.62.0.0/16", "10.71.0.0/16")(a)
		case p == provider && direct:
			return remap("10.2.0.0/16", "10.72.0.0/16")(a)
		}
		return netip.Addr{}, false
	}}
	ctx := t.Context()
	cond := func(st *corev1.PodStatus, typ corev1.PodConditionType) *corev1.PodCondition {
		for i := range st.Conditions {
			if st.Conditions[i].Type == typ {
				return &st.Conditions[i]
			}
		}
		return nil
	}

	// In the broker: the provider's pod at 10.2.3.4.
	st := corev1.PodStatus{PodIP: "10.2.3.4", PodIPs: []corev1.PodIP{{IP: "10.2.3.4"}}}
	setProviderAddress(&st, provider)
	inBroker.translate(ctx, provider, &st, false)
	if st.PodIP != "10.62.3.4" {
		t.Fatalf("the broker shows %s, want 10.62.3.4", st.PodIP)
	}
	pa := cond(&st, offloadingv1alpha1.ConditionProviderAddress)
	if pa == nil || pa.Reason != provider || pa.Message != "10.2.3.4" {
		t.Fatalf("the broker's pod says it runs at %+v, want %s at 10.2.3.4", pa, provider)
	}
	if c := cond(&st, offloadingv1alpha1.ConditionPodAddress); c == nil || c.Reason != offloadingv1alpha1.ReasonAddressTranslated {
		t.Fatalf("the broker's own address condition: %+v", c)
	}

	// In the consumer, which copies the broker pod's status.
	reflect := func(from corev1.PodStatus) corev1.PodStatus {
		out := *from.DeepCopy()
		inConsumer.translate(ctx, broker, &out, false)
		return out
	}
	got := reflect(st)
	if got.PodIP != "10.72.3.4" || len(got.PodIPs) != 1 || got.PodIPs[0].IP != "10.72.3.4" {
		t.Fatalf("the consumer shows %s %v, want the provider's pod through its own tunnel, 10.72.3.4", got.PodIP, got.PodIPs)
	}
	if c := cond(&got, offloadingv1alpha1.ConditionPodAddress); c == nil || c.Reason != offloadingv1alpha1.ReasonAddressDirect {
		t.Fatalf("the consumer's address condition: %+v, want %s", c, offloadingv1alpha1.ReasonAddressDirect)
	}

	// Without its own tunnel to the provider: the broker's address.
	direct = false
	if got := reflect(st); got.PodIP != "10.71.3.4" || cond(&got, offloadingv1alpha1.ConditionPodAddress).Reason != offloadingv1alpha1.ReasonAddressTranslated {
		t.Fatalf("without a tunnel to the provider, the consumer shows %s (%+v), want the broker's 10.71.3.4", got.PodIP, cond(&got, offloadingv1alpha1.ConditionPodAddress))
	}
	direct = true

	// A broker lying about where the pod runs: an address outside what
	// the provider agreed, the consumer itself, the broker itself, a
	// malformed list. Each falls back to the broker's own address.
	for _, lie := range []corev1.PodCondition{
		{Reason: provider, Message: "192.168.1.1"},
		{Reason: provider, Message: "10.2.3.4,8.8.8.8"},
		{Reason: consumer, Message: "10.2.3.4"},
		{Reason: broker, Message: "10.62.3.4"},
		{Reason: "Not_An_ID", Message: "10.2.3.4"},
		{Reason: provider, Message: "10.2.3.4,"},
		{Reason: provider, Message: "10.2.3.4,10.2.3.5,10.2.3.6"},
	} {
		lying := *st.DeepCopy()
		c := cond(&lying, offloadingv1alpha1.ConditionProviderAddress)
		c.Reason, c.Message = lie.Reason, lie.Message
		if got := reflect(lying); got.PodIP != "10.71.3.4" {
			t.Errorf("a broker saying the pod runs in %q at %q: the consumer shows %s, want the broker's 10.71.3.4", lie.Reason, lie.Message, got.PodIP)
		}
	}

	// A pod with no address yet says nothing of where it runs.
	empty := corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: offloadingv1alpha1.ConditionProviderAddress, Reason: "stale", Message: "10.2.0.1"}}}
	setProviderAddress(&empty, provider)
	if c := cond(&empty, offloadingv1alpha1.ConditionProviderAddress); c != nil {
		t.Errorf("a pod without an address still says it runs at %+v", c)
	}
}
