// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package bench

import (
	"context"
	"fmt"
	"net"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/discovery/dnssd"
	"github.com/liqo-go/liqo/internal/discovery/dnssd/dnstest"
	"github.com/liqo-go/liqo/internal/discovery/mdns"
	"github.com/liqo-go/liqo/internal/playground"
)

const benchZone = "bench.test."

// discoveryBench is one real cluster running Liqo, with mDNS on loopback
// and a DNS server for WAN discovery.
type discoveryBench struct {
	member *playground.Member
	client client.Client
	dns    *dnstest.Server
	port   int
}

func startDiscoveryBench(b *testing.B) *discoveryBench {
	b.Helper()
	dns, err := dnstest.Start(benchZone)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(dns.Close)
	p := startPlayground(b, playground.Options{
		Clusters: 1, NodesPerCluster: 1,
		ControllerManagerArgs: []string{"--dns-server=" + dns.Addr},
		ClusterConfig: func(_ string, spec *configv1alpha1.ClusterConfigSpec) {
			spec.DiscoveryConfig.QueryIntervalSeconds = 1
			spec.DiscoveryConfig.HealthCheckIntervalSeconds = 1
		},
	}, 3*time.Minute)
	c, err := client.New(p.Members[0].RESTConfig, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	return &discoveryBench{member: p.Members[0], client: c, dns: dns, port: p.MDNSPort}
}

func fakeInstance(id, domain string) *dnssd.Instance {
	return &dnssd.Instance{
		Name: id, Service: dnssd.DefaultService, Domain: domain, Host: id, Port: 1,
		IPs:          []net.IP{net.ParseIP("127.0.0.1")},
		Announcement: dnssd.Announcement{ClusterID: id, ClusterName: id, AuthURL: "https://127.0.0.1:1", Namespace: "liqo"},
	}
}

// timeForeignClusters runs trigger and returns how long after it started
// each of the ForeignClusters of ids appeared, polling every 5 ms.
func (d *discoveryBench) timeForeignClusters(b *testing.B, ids []string, trigger func()) []time.Duration {
	b.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	start := time.Now()
	trigger()
	var took []time.Duration
	for len(want) > 0 {
		var list discoveryv1alpha1.ForeignClusterList
		if err := d.client.List(context.Background(), &list); err != nil {
			b.Fatal(err)
		}
		now := time.Since(start)
		for _, fc := range list.Items {
			if want[fc.Spec.ClusterIdentity.ClusterID] {
				delete(want, fc.Spec.ClusterIdentity.ClusterID)
				took = append(took, now)
			}
		}
		if now > 30*time.Second {
			b.Fatalf("%d ForeignClusters never appeared: %v", len(want), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return took
}

func (d *discoveryBench) forgetAll(b *testing.B) {
	b.Helper()
	if err := d.client.DeleteAllOf(context.Background(), &discoveryv1alpha1.ForeignCluster{}); err != nil {
		b.Fatal(err)
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(p*float64(len(s)-1))]
}

// BenchmarkDiscovery measures the time from a cluster's announcement to its
// ForeignCluster existing on a peer (seen through a watch): over mDNS on
// loopback and over DNS-SD from a DNS server, for one announcer and for 20
// at once (cheap fake announcers stand in for clusters). The baseline is
// the same ForeignClusters created directly through the API server.
// Goals: p50 under 1 s for one, under 3 s for all of 20.
func BenchmarkDiscovery(b *testing.B) {
	d := startDiscoveryBench(b)
	for _, n := range []int{1, 20} {
		b.Run(fmt.Sprintf("baseline/n=%d", n), func(b *testing.B) {
			var all []time.Duration
			for i := 0; b.Loop(); i++ {
				ids := make([]string, n)
				for j := range ids {
					ids[j] = fmt.Sprintf("base-%d-%d-%d", n, i, j)
				}
				took := d.timeForeignClusters(b, ids, func() {
					for _, id := range ids {
						fc := &discoveryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: id},
							Spec: discoveryv1alpha1.ForeignClusterSpec{ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: id}}}
						if err := d.client.Create(context.Background(), fc); err != nil {
							b.Fatal(err)
						}
					}
				})
				all = append(all, took[len(took)-1])
				d.forgetAll(b)
			}
			b.ReportMetric(percentile(all, 0.5).Seconds(), "p50-all-s")
		})
		b.Run(fmt.Sprintf("mdns/n=%d", n), func(b *testing.B) {
			var all, each []time.Duration
			for i := 0; b.Loop(); i++ {
				servers := make([]*mdns.Server, n)
				ids := make([]string, n)
				ctx, cancel := context.WithCancel(context.Background())
				for j := range servers {
					conn, err := mdns.Listen(ctx, "lo", d.port)
					if err != nil {
						b.Fatal(err)
					}
					servers[j] = mdns.NewServer(conn, mdns.Options{Service: dnssd.DefaultService, Handler: mdns.NopHandler{}})
					go func() { _ = servers[j].Serve(ctx) }()
					ids[j] = fmt.Sprintf("mdns-%d-%d-%d", n, i, j)
				}
				took := d.timeForeignClusters(b, ids, func() {
					for j, s := range servers {
						go func() { _ = s.Publish(ctx, fakeInstance(ids[j], "local.")) }()
					}
				})
				each = append(each, took...)
				all = append(all, took[len(took)-1])
				for _, s := range servers {
					_ = s.Withdraw()
				}
				cancel()
				d.forgetAll(b)
			}
			b.ReportMetric(percentile(each, 0.5).Seconds(), "p50-each-s")
			b.ReportMetric(percentile(all, 0.5).Seconds(), "p50-all-s")
		})
		b.Run(fmt.Sprintf("dnssd/n=%d", n), func(b *testing.B) {
			sd := &discoveryv1alpha1.SearchDomain{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", n)},
				Spec: discoveryv1alpha1.SearchDomainSpec{Domain: benchZone}}
			if err := d.client.Create(context.Background(), sd); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = d.client.Delete(context.Background(), sd) }()
			var all, each []time.Duration
			for i := 0; b.Loop(); i++ {
				insts := make([]*dnssd.Instance, n)
				ids := make([]string, n)
				for j := range insts {
					ids[j] = fmt.Sprintf("dns-%d-%d-%d", n, i, j)
					insts[j] = fakeInstance(ids[j], benchZone)
				}
				took := d.timeForeignClusters(b, ids, func() {
					for _, inst := range insts {
						d.dns.Register(inst, 30)
					}
				})
				each = append(each, took...)
				all = append(all, took[len(took)-1])
				for _, inst := range insts {
					d.dns.Deregister(inst)
				}
				d.forgetAll(b)
			}
			b.ReportMetric(percentile(each, 0.5).Seconds(), "p50-each-s")
			b.ReportMetric(percentile(all, 0.5).Seconds(), "p50-all-s")
		})
	}
}
