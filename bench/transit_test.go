// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package bench

import (
	"net/netip"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/liqo-go/liqo/internal/netlab"
	"github.com/liqo-go/liqo/internal/network/gateway"
	"github.com/liqo-go/liqo/internal/network/gateway/gatewaytest"
	"github.com/liqo-go/liqo/internal/network/wgkey"
	"github.com/liqo-go/liqo/internal/testenv"
)

// The clusters of the transit benchmark: a consumer, an aggregator and a
// provider, each a gateway (the three on links of their own, two by two)
// and the consumer and provider a pod each. The ranges differ, so every
// view is the identity; the rules run all the same.
var (
	transitPods = map[string]netip.Prefix{
		"consumer": netip.MustParsePrefix("10.100.0.0/16"), "aggregator": netip.MustParsePrefix("10.102.0.0/16"), "provider": netip.MustParsePrefix("10.101.0.0/16"),
	}
	transitExternal = map[string]netip.Prefix{
		"consumer": netip.MustParsePrefix("10.70.0.0/16"), "aggregator": netip.MustParsePrefix("10.72.0.0/16"), "provider": netip.MustParsePrefix("10.71.0.0/16"),
	}
	// transitAddress is the provider's pod at the aggregator, in its
	// external range, as the consumer reaches it.
	transitAddress = netip.MustParseAddr("10.72.0.5")
)

// BenchmarkTransit measures TCP from a consumer's pod to a provider's
// through an aggregator's gateway (transit: the consumer's tunnel to the
// aggregator, the aggregator's to the provider), against the same two
// pods through a direct tunnel between the consumer and the provider,
// on the same gateways in the same run: iperf3 throughput with one and
// four streams, the medians of three rounds (LIQO_BENCH_NET_ROUNDS)
// taken in turns, and the ratio (the goal: 0.8 or more). The aggregator's gateway
// decrypts and encrypts every packet once more, on the same two cores.
func BenchmarkTransit(b *testing.B) {
	if err := netlab.Supported(); err != nil {
		testenv.Unsupported(b, "no transit benchmark: "+err.Error())
	}
	if _, err := exec.LookPath("iperf3"); err != nil {
		testenv.Unsupported(b, "no transit benchmark: iperf3 is missing (make system-deps)")
	}
	ns := map[string]*netlab.Namespace{}
	for _, role := range []string{"consumer", "aggregator", "provider"} {
		ns[role] = netlab.ForTest(b, "bench-transit-"+role)
		must(b, ns[role].Sysctl("ipv4/ip_forward", "1"))
	}
	podC, podP := netlab.ForTest(b, "bench-transit-pod-c"), netlab.ForTest(b, "bench-transit-pod-p")
	podCAddr, podPAddr := netip.MustParseAddr("10.100.0.10"), netip.MustParseAddr("10.101.0.10")
	must(b, netlab.Veth(podC, "eth0", netip.PrefixFrom(podCAddr, 16), ns["consumer"], "pods", netip.MustParsePrefix("10.100.0.1/16")))
	must(b, netlab.Veth(podP, "eth0", netip.PrefixFrom(podPAddr, 16), ns["provider"], "pods", netip.MustParsePrefix("10.101.0.1/16")))
	must(b, podC.IP("route", "add", "default", "via", "10.100.0.1"))
	must(b, podP.IP("route", "add", "default", "via", "10.101.0.1"))
	// The links, two by two: where each reaches the others.
	endpoint := map[[2]string]netip.Addr{}
	for i, l := range [][2]string{{"consumer", "aggregator"}, {"aggregator", "provider"}, {"consumer", "provider"}} {
		a, z := netip.AddrFrom4([4]byte{192, 168, byte(61 + i), 1}), netip.AddrFrom4([4]byte{192, 168, byte(61 + i), 2})
		must(b, netlab.Veth(ns[l[0]], "wan"+string(rune('0'+i)), netip.PrefixFrom(a, 24), ns[l[1]], "wan"+string(rune('0'+i)), netip.PrefixFrom(z, 24)))
		endpoint[[2]string{l[0], l[1]}], endpoint[[2]string{l[1], l[0]}] = z, a
	}
	keys := map[string]wgkey.Key{}
	for role := range ns {
		keys[role] = newKey(b)
	}
	peer := func(from, to string, dial bool) gateway.Peer {
		p := gateway.Peer{ID: to, PublicKey: keys[to].Public(),
			PodCIDR: transitPods[to], ExternalCIDR: transitExternal[to], LocalPodCIDR: transitPods[from], LocalExternalCIDR: transitExternal[from]}
		if dial {
			p.Endpoint = netip.AddrPortFrom(endpoint[[2]string{from, to}], 51820).String()
		}
		return p
	}
	procs := map[string]*gatewaytest.Process{}
	for role := range ns {
		procs[role] = gatewaytest.Start(b, ns[role])
	}
	apply := func(role string, peers ...gateway.Peer) {
		must(b, procs[role].Apply(gateway.Config{PrivateKey: keys[role], ListenPort: 51820,
			PodCIDR: transitPods[role], ExternalCIDR: transitExternal[role], Peers: peers}))
	}
	// The provider runs its pod for the aggregator and for the consumer
	// (the direct tunnel); the aggregator leads the consumer to it.
	toAggregator, toConsumer := peer("provider", "aggregator", false), peer("provider", "consumer", false)
	toAggregator.Exposed = []netip.Prefix{netip.PrefixFrom(podPAddr, 32)}
	toConsumer.Exposed = []netip.Prefix{netip.PrefixFrom(podPAddr, 32)}
	apply("provider", toAggregator, toConsumer)
	consumer := peer("aggregator", "consumer", false)
	consumer.Transit = true
	consumer.TransitRoutes = []gateway.TransitRoute{{Address: transitAddress, Target: podPAddr, Via: "provider"}}
	apply("aggregator", consumer, peer("aggregator", "provider", true))
	apply("consumer", peer("consumer", "aggregator", true), peer("consumer", "provider", true))
	for _, l := range [][2]string{{"aggregator", "provider"}, {"consumer", "aggregator"}, {"consumer", "provider"}} {
		waitPeer(b, procs[l[0]], l[1], 10*time.Second)
	}
	defer func() {
		for _, p := range procs {
			must(b, p.Stop())
		}
	}()

	rounds := netRounds(b, 3)
	for b.Loop() {
		var through, direct [2][]float64
		// The whole machine's CPU seconds per GB moved, each path.
		cpu, moved := map[netip.Addr]time.Duration{}, map[netip.Addr]float64{}
		for round := range rounds {
			run := func(dial netip.Addr, into *[2][]float64) {
				for i, streams := range []int{1, 4} {
					before := machineCPU()
					gbps, bytes, err := iperf(b, podC, podP, podPAddr, dial, streams)
					if err != nil {
						b.Fatalf("to %s, %d streams: %v", dial, streams, err)
					}
					cpu[dial] += machineCPU() - before
					moved[dial] += bytes
					into[i] = append(into[i], gbps)
				}
			}
			// Each goes first every other round.
			if round%2 == 0 {
				run(transitAddress, &through)
				run(podPAddr, &direct)
			} else {
				run(podPAddr, &direct)
				run(transitAddress, &through)
			}
			b.Logf("round %d: through the aggregator %.2f and %.2f Gbit/s, direct %.2f and %.2f Gbit/s (1 and 4 streams)",
				round+1, through[0][round], through[1][round], direct[0][round], direct[1][round])
		}
		t1, t4, d1, d4 := mid(through[0]), mid(through[1]), mid(direct[0]), mid(direct[1])
		b.ReportMetric(t1, "Gbit/s-transit-1")
		b.ReportMetric(d1, "Gbit/s-direct-1")
		b.ReportMetric(t1/d1, "ratio-1")
		b.ReportMetric(t4/d4, "ratio-4")
		perGB := func(a netip.Addr) float64 { return cpu[a].Seconds() / (moved[a] / 1e9) }
		b.ReportMetric(perGB(transitAddress), "cpu-s/GB-transit")
		b.ReportMetric(perGB(podPAddr), "cpu-s/GB-direct")
		b.Logf("medians of %d rounds: through the aggregator %.2f and %.2f Gbit/s, through a direct tunnel %.2f and %.2f Gbit/s (1 and 4 streams); ratio %.2f and %.2f (goal 0.8 or more)",
			rounds, t1, t4, d1, d4, t1/d1, t4/d4)
		b.Logf("the machine's CPU per GB moved: %.2f s through the aggregator, %.2f s direct (the aggregator's gateway decrypts and encrypts each packet once more, on the same cores)",
			perGB(transitAddress), perGB(podPAddr))
	}
}

// mid is the median of vs (an odd number of them).
func mid(vs []float64) float64 {
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// waitPeer waits until p reports its tunnel to peer id up.
func waitPeer(b *testing.B, p *gatewaytest.Process, id string, within time.Duration) {
	b.Helper()
	deadline := time.Now().Add(within)
	for {
		st, err := p.Status()
		if err == nil {
			for _, ps := range st.Peers {
				if ps.ID == id && ps.Established {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("the tunnel to %s is not up after %s: %+v, %v", id, within, st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
