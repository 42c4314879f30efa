// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package tunnelendpoint

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
	"github.com/liqo-go/liqo/internal/network/gateway"
	"github.com/liqo-go/liqo/internal/network/wgkey"
)

// recorder is a data plane that records what it is given and reports
// what the test says: the reconciler's logic against a real API server,
// without namespaces (package gateway's tests run the data plane itself).
type recorder struct {
	mu      sync.Mutex
	applied []gateway.Config
	fail    error
	status  gateway.Status
}

func (d *recorder) Apply(_ context.Context, cfg gateway.Config) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail != nil {
		return d.fail
	}
	d.applied = append(d.applied, cfg)
	return nil
}

func (d *recorder) Status() (gateway.Status, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.status, nil
}

func (d *recorder) last() (gateway.Config, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.applied) == 0 {
		return gateway.Config{}, false
	}
	return d.applied[len(d.applied)-1], true
}

func (d *recorder) set(fail error, st gateway.Status) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fail, d.status = fail, st
}

// startGateway runs the reconciler and the reporter against a real API
// server, with this cluster's ClusterConfig and the gateway's key, over
// a recording data plane.
func startGateway(t *testing.T) (client.Client, wgkey.Key, *recorder) {
	t.Helper()
	cfg, c := envtest.StartInstalled(t, "gateway")
	ctx := t.Context()
	cc := &configv1alpha1.ClusterConfig{ObjectMeta: metav1.ObjectMeta{Name: configv1alpha1.ClusterConfigName},
		Spec: configv1alpha1.ClusterConfigSpec{NetworkConfig: configv1alpha1.NetworkConfig{PodCIDR: "10.100.0.0/14"}}}
	if err := c.Create(ctx, cc); err != nil {
		t.Fatal(err)
	}
	key, err := wgkey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: install.DefaultNamespace, Name: netv1alpha1.GatewayKeySecret},
		Data: map[string][]byte{netv1alpha1.GatewayKeyField: []byte(key.String())}}); err != nil {
		t.Fatal(err)
	}
	dp := &recorder{}
	envtest.StartManager(t, cfg, func(mgr ctrl.Manager) error {
		r := &Reconciler{Client: mgr.GetClient(), Namespace: install.DefaultNamespace, DataPlane: dp, ListenPort: 51820}
		if err := r.SetupWithManager(mgr); err != nil {
			return err
		}
		return mgr.Add(&Reporter{Client: mgr.GetClient(), Reconciler: r, Recorder: mgr.GetEventRecorder("liqo-gateway"), Interval: 100 * time.Millisecond})
	})
	return c, key, dp
}

// TestTunnelEndpointsApplied: the gateway applies the TunnelEndpoints
// whose peer answered, with this cluster's ranges and key; reports the
// tunnel's state in each status, with an event when it comes up or goes
// down; and says why when the data plane refuses its configuration.
func TestTunnelEndpointsApplied(t *testing.T) {
	ctx := t.Context()
	c, key, dp := startGateway(t)

	peerKey, err := wgkey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	tep := &netv1alpha1.TunnelEndpoint{ObjectMeta: metav1.ObjectMeta{Name: "provider-1"}, Spec: netv1alpha1.TunnelEndpointSpec{
		ClusterID: "provider-1", PublicKey: peerKey.Public().String(),
		Endpoint:     &netv1alpha1.GatewayEndpoint{Host: "10.254.2.10", Port: 51820},
		Remote:       netv1alpha1.Ranges{PodCIDR: "10.100.0.0/14", ExternalCIDR: "10.70.0.0/16"},
		RemoteSeenAs: netv1alpha1.Ranges{PodCIDR: "10.0.0.0/14", ExternalCIDR: "10.4.0.0/16"},
	}}
	if err := c.Create(ctx, tep); err != nil {
		t.Fatal(err)
	}
	condition := func(reason string) {
		t.Helper()
		envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(tep), tep); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(tep.Status.Conditions, netv1alpha1.ConditionEstablished)
			if cond == nil || cond.Reason != reason || cond.ObservedGeneration != tep.Generation {
				return fmt.Errorf("Established %+v, want reason %s at generation %d", cond, reason, tep.Generation)
			}
			return nil
		})
	}
	// The peer has not answered: nothing to apply for it yet.
	condition(netv1alpha1.ReasonWaitingForPeer)
	if last, ok := dp.last(); ok && len(last.Peers) != 0 {
		t.Fatalf("a peer that has not answered was applied: %+v", last.Peers)
	}

	patch := client.MergeFrom(tep.DeepCopy())
	tep.Spec.LocalSeenAs = &netv1alpha1.Ranges{PodCIDR: "10.8.0.0/14", ExternalCIDR: "10.12.0.0/16"}
	tep.Spec.Exposed = []string{"10.100.0.7/32", "10.100.0.0/24"}
	tep.Spec.Transit = &netv1alpha1.Transit{Routes: []netv1alpha1.TransitRoute{
		{Address: "10.70.0.5", Target: "10.40.0.9", Provider: "provider-2", Pod: "ns/a"}, {Address: "10.70.0.6", Target: "not-an-address", Provider: "provider-2", Pod: "ns/b"},
	}}
	if err := c.Patch(ctx, tep, patch); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		last, ok := dp.last()
		if !ok || len(last.Peers) != 1 {
			return fmt.Errorf("applied %+v", last)
		}
		want := gateway.Peer{ID: "provider-1", PublicKey: peerKey.Public(), Endpoint: "10.254.2.10:51820",
			PodCIDR: netip.MustParsePrefix("10.0.0.0/14"), ExternalCIDR: netip.MustParsePrefix("10.4.0.0/16"),
			LocalPodCIDR: netip.MustParsePrefix("10.8.0.0/14"), LocalExternalCIDR: netip.MustParsePrefix("10.12.0.0/16"),
			// Addresses only: a range is no pod.
			Exposed: []netip.Prefix{netip.MustParsePrefix("10.100.0.7/32")},
			// Routes that are addresses only; the gateway checks the rest.
			Transit: true, TransitRoutes: []gateway.TransitRoute{{Address: netip.MustParseAddr("10.70.0.5"), Target: netip.MustParseAddr("10.40.0.9"), Via: "provider-2"}}}
		if !reflect.DeepEqual(last.Peers[0], want) || last.PrivateKey != key || last.PodCIDR != netip.MustParsePrefix("10.100.0.0/14") ||
			last.ExternalCIDR != netip.MustParsePrefix(configv1alpha1.DefaultExternalCIDR) || last.ListenPort != 51820 {
			return fmt.Errorf("applied %+v, want the peer %+v", last, want)
		}
		return nil
	})

	// The data plane reports the tunnel up, then down.
	dp.set(nil, gateway.Status{Peers: []gateway.PeerStatus{{ID: "provider-1", Established: true, Latency: 3 * time.Millisecond,
		LastHandshake: time.Now(), Endpoint: "10.254.2.10:51820"}}})
	condition(netv1alpha1.ReasonConnected)
	if tep.Status.Latency == nil || tep.Status.Latency.Duration != 3*time.Millisecond || tep.Status.LastHandshakeTime == nil || tep.Status.PeerAddress != "10.254.2.10:51820" {
		t.Errorf("status %+v", tep.Status)
	}
	dp.set(nil, gateway.Status{Peers: []gateway.PeerStatus{{ID: "provider-1"}}})
	condition(netv1alpha1.ReasonNoAnswer)
	if tep.Status.Latency != nil {
		t.Errorf("a down tunnel keeps a latency: %+v", tep.Status)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		var evs eventsv1.EventList
		if err := c.List(ctx, &evs); err != nil {
			return err
		}
		got := map[string]bool{}
		for _, e := range evs.Items {
			if e.Regarding.Name == tep.Name {
				got[e.Reason] = true
			}
		}
		if !got["TunnelUp"] || !got["TunnelDown"] {
			return fmt.Errorf("events of the tunnel: %v, want TunnelUp and TunnelDown", got)
		}
		return nil
	})

	// A configuration the data plane refuses shows in the status.
	dp.set(errors.New("peers[0].endpoint: refused"), gateway.Status{})
	patch = client.MergeFrom(tep.DeepCopy())
	tep.Spec.Endpoint.Port = 51821
	if err := c.Patch(ctx, tep, patch); err != nil {
		t.Fatal(err)
	}
	condition(netv1alpha1.ReasonGatewayError)
}

// TestOnePeerRefusedAlone: a TunnelEndpoint the gateway cannot read (the
// all-zero key) is left out of the configuration, alone, and says why; a
// peer the data plane refuses says why too, with the node's ranges in
// its way in the status, and a Warning event; the other peer is applied
// and reported as usual. Peers go to the data plane oldest first.
func TestOnePeerRefusedAlone(t *testing.T) {
	ctx := t.Context()
	c, _, dp := startGateway(t)
	good, err := wgkey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	create := func(name, publicKey, pods string) *netv1alpha1.TunnelEndpoint {
		t.Helper()
		tep := &netv1alpha1.TunnelEndpoint{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: netv1alpha1.TunnelEndpointSpec{
			ClusterID: name, PublicKey: publicKey,
			Remote:       netv1alpha1.Ranges{PodCIDR: "10.100.0.0/14", ExternalCIDR: "10.70.0.0/16"},
			RemoteSeenAs: netv1alpha1.Ranges{PodCIDR: pods, ExternalCIDR: "10.70.0.0/16"},
			LocalSeenAs:  &netv1alpha1.Ranges{PodCIDR: "10.8.0.0/14", ExternalCIDR: "10.12.0.0/16"},
		}}
		if err := c.Create(ctx, tep); err != nil {
			t.Fatal(err)
		}
		return tep
	}
	// Creation times have a resolution of a second: the good peer is
	// older than the others by more than that.
	first := create("good", good.Public().String(), "10.0.0.0/14")
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		var now metav1.Time
		if now = metav1.Now(); now.Unix() <= first.CreationTimestamp.Unix() {
			return fmt.Errorf("%s is not yet a second after %s", now, first.CreationTimestamp)
		}
		return nil
	})
	zero := create("zero-key", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "10.20.0.0/14")
	overNode := create("over-node", good.Public().String(), "10.24.0.0/14")

	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		last, ok := dp.last()
		if !ok || len(last.Peers) != 2 || last.Peers[0].ID != "good" || last.Peers[1].ID != "over-node" {
			return fmt.Errorf("applied %+v, want good then over-node, without zero-key", last.Peers)
		}
		return nil
	})
	dp.set(nil, gateway.Status{Peers: []gateway.PeerStatus{
		{ID: "good", Established: true, Latency: time.Millisecond},
		{ID: "over-node", Refused: "podCIDR: 10.24.0.0/14 overlaps what this node uses", RangesInUse: []netip.Prefix{netip.MustParsePrefix("10.25.0.0/16")}},
	}})
	for _, tc := range []struct {
		tep           *netv1alpha1.TunnelEndpoint
		reason, reads string
		rangesInUse   []string
	}{
		{first, netv1alpha1.ReasonConnected, "answers", nil},
		{zero, netv1alpha1.ReasonRefused, "all-zero", nil},
		{overNode, netv1alpha1.ReasonRefused, "overlaps what this node uses", []string{"10.25.0.0/16"}},
	} {
		envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(tc.tep), tc.tep); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(tc.tep.Status.Conditions, netv1alpha1.ConditionEstablished)
			if cond == nil || cond.Reason != tc.reason || !strings.Contains(cond.Message, tc.reads) || !slices.Equal(tc.tep.Status.RangesInUse, tc.rangesInUse) {
				return fmt.Errorf("%s: Established %+v, ranges in use %v; want %s saying %q, %v", tc.tep.Name, cond, tc.tep.Status.RangesInUse, tc.reason, tc.reads, tc.rangesInUse)
			}
			return nil
		})
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		var evs eventsv1.EventList
		if err := c.List(ctx, &evs); err != nil {
			return err
		}
		refused := map[string]bool{}
		for _, e := range evs.Items {
			if e.Reason == "TunnelRefused" && e.Type == corev1.EventTypeWarning {
				refused[e.Regarding.Name] = true
			}
		}
		if !refused["zero-key"] || !refused["over-node"] || refused["good"] {
			return fmt.Errorf("TunnelRefused events for %v, want zero-key and over-node", refused)
		}
		return nil
	})
}
