// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package dnsproxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/discovery/dnssd/dnstest"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
	"github.com/liqo-go/liqo/internal/testenv"
)

// The provider's cluster DNS, as BIND serves it: consumer A's namespace
// "shop" is the provider's "shop-a1", consumer B's "shop" is "shop-b2",
// and the provider has a "shop" of its own.
var zone = []string{
	"web.shop-a1.svc.cluster.local. IN A 10.96.0.20",
	"_http._tcp.web.shop-a1.svc.cluster.local. IN SRV 0 100 80 web-0.web.shop-a1.svc.cluster.local.",
	"web-0.web.shop-a1.svc.cluster.local. IN A 10.100.0.5",
	"10-100-0-5.shop-a1.pod.cluster.local. IN A 10.100.0.5",
	"alias.shop-a1.svc.cluster.local. IN CNAME web.shop-a1.svc.cluster.local.",
	"web.shop-b2.svc.cluster.local. IN A 10.96.0.30",
	"web.shop.svc.cluster.local. IN A 10.96.0.99",
	"kubernetes.default.svc.cluster.local. IN A 10.96.0.1",
}

// many is a headless Service of 60 pods: its answer is over 512 bytes.
func many() []string {
	var out []string
	for i := range 60 {
		out = append(out, fmt.Sprintf("big.shop-a1.svc.cluster.local. IN A 10.100.1.%d", i+1))
	}
	return out
}

// start serves h on loopback ports until the test ends.
func start(t *testing.T, h *Handler) string {
	t.Helper()
	pc, l, err := dnstest.ListenBoth()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx, pc, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return pc.LocalAddr().String()
}

func ask(t *testing.T, network, server, name string, qtype uint16) *dns.Msg {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	r, _, err := c.Exchange(q, server)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", name, dns.TypeToString[qtype], network, err)
	}
	if r.Question[0].Name != name {
		t.Errorf("%s: the answer's question is %s", name, r.Question[0].Name)
	}
	return r
}

func records(r *dns.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		f := strings.Fields(rr.String())
		out = append(out, f[0]+" "+strings.Join(f[3:], " ")) // without TTL and class
	}
	slices.Sort(out)
	return out
}

// TestHandlerAnswersWithTheConsumersNames: against BIND serving the
// provider's names, each consumer's proxy answers the names its pods use
// (its namespace's, not the provider's own namespace of that name nor
// the other consumer's), restores them in owner names and in what SRV
// and CNAME records point to, over UDP and TCP; a name outside the
// consumer's namespaces is asked as it is.
func TestHandlerAnswersWithTheConsumersNames(t *testing.T) {
	if testing.Short() {
		t.Skip("starts BIND")
	}
	named, err := dnstest.StartBind("cluster.local.", 30)
	if err != nil {
		testenv.Unsupported(t, err.Error())
	}
	t.Cleanup(named.Close)
	if err := named.Serve(nil, append(zone, many()...)...); err != nil {
		t.Fatal(err)
	}
	a := start(t, &Handler{Upstream: named.Addr, Names: func() Names { return Names{"shop": "shop-a1", "default": "default-a1"} }})
	b := start(t, &Handler{Upstream: named.Addr, Names: func() Names { return Names{"shop": "shop-b2"} }})

	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range []struct {
			server, name string
			qtype        uint16
			want         []string
		}{
			{a, "web.shop.svc.cluster.local.", dns.TypeA, []string{"web.shop.svc.cluster.local. A 10.96.0.20"}},
			{b, "web.shop.svc.cluster.local.", dns.TypeA, []string{"web.shop.svc.cluster.local. A 10.96.0.30"}},
			// The client's spelling comes back as it asked.
			{a, "Web.SHOP.svc.Cluster.Local.", dns.TypeA, []string{"Web.SHOP.svc.Cluster.Local. A 10.96.0.20"}},
			{a, "_http._tcp.web.shop.svc.cluster.local.", dns.TypeSRV, []string{"_http._tcp.web.shop.svc.cluster.local. SRV 0 100 80 web-0.web.shop.svc.cluster.local."}},
			{a, "web-0.web.shop.svc.cluster.local.", dns.TypeA, []string{"web-0.web.shop.svc.cluster.local. A 10.100.0.5"}},
			{a, "10-100-0-5.shop.pod.cluster.local.", dns.TypeA, []string{"10-100-0-5.shop.pod.cluster.local. A 10.100.0.5"}},
			{a, "alias.shop.svc.cluster.local.", dns.TypeA, []string{
				"alias.shop.svc.cluster.local. CNAME web.shop.svc.cluster.local.",
				"web.shop.svc.cluster.local. A 10.96.0.20",
			}},
			// A's "default" is its own: the provider's is not reached by it.
			{a, "kubernetes.default.svc.cluster.local.", dns.TypeA, nil},
			{b, "kubernetes.default.svc.cluster.local.", dns.TypeA, []string{"kubernetes.default.svc.cluster.local. A 10.96.0.1"}},
			// The provider's own names of A's namespaces stay reachable.
			{a, "web.shop-a1.svc.cluster.local.", dns.TypeA, []string{"web.shop-a1.svc.cluster.local. A 10.96.0.20"}},
		} {
			if got := records(ask(t, network, tc.server, tc.name, tc.qtype)); !slices.Equal(got, tc.want) {
				t.Errorf("%s %s over %s: %q, want %q", tc.name, dns.TypeToString[tc.qtype], network, got, tc.want)
			}
		}
	}
	// An answer over 512 bytes: truncated over UDP (the client asks
	// again over TCP), whole over TCP.
	if r := ask(t, "udp", a, "big.shop.svc.cluster.local.", dns.TypeA); !r.Truncated || compressedLen(r) > dns.MinMsgSize {
		t.Errorf("a long answer over UDP: truncated %v, %d bytes", r.Truncated, compressedLen(r))
	}
	if r := ask(t, "tcp", a, "big.shop.svc.cluster.local.", dns.TypeA); r.Truncated || len(r.Answer) != 60 {
		t.Errorf("a long answer over TCP: truncated %v, %d records", r.Truncated, len(r.Answer))
	}
	// A client that takes 1232 bytes over UDP (EDNS0, as glibc and
	// CoreDNS ask) gets the whole answer there.
	q := new(dns.Msg)
	q.SetQuestion("big.shop.svc.cluster.local.", dns.TypeA)
	q.SetEdns0(1232, false)
	r, _, err := (&dns.Client{Net: "udp", Timeout: 5 * time.Second}).Exchange(q, a)
	if err != nil {
		t.Fatal(err)
	}
	if r.Truncated || len(r.Answer) != 60 || compressedLen(r) > 1232 {
		t.Errorf("a long answer over UDP, 1232 bytes taken: truncated %v, %d records, %d bytes", r.Truncated, len(r.Answer), compressedLen(r))
	}
}

// TestHandlerBoundsWhatItForwards: with MaxInFlight queries forwarded and
// not yet answered, the next is answered REFUSED and counted, not
// forwarded; once the upstream answers, queries are forwarded again.
func TestHandlerBoundsWhatItForwards(t *testing.T) {
	var lc net.ListenConfig
	upstream, err := lc.ListenPacket(t.Context(), "udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// An upstream that holds each query until told to answer it.
	received, release := make(chan struct{}, 4), make(chan struct{})
	srv := &dns.Server{PacketConn: upstream, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		received <- struct{}{}
		<-release
		m := new(dns.Msg)
		m.SetReply(req)
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	h := &Handler{Upstream: upstream.LocalAddr().String(), Timeout: 30 * time.Second, MaxInFlight: 1}
	addr := start(t, h)
	query := func() (int, error) {
		q := new(dns.Msg)
		q.SetQuestion("web.shop.svc.cluster.local.", dns.TypeA)
		r, _, err := (&dns.Client{Net: "udp", Timeout: 30 * time.Second}).Exchange(q, addr)
		if err != nil {
			return 0, err
		}
		return r.Rcode, nil
	}
	first := make(chan int, 1)
	go func() {
		rcode, err := query()
		if err != nil {
			rcode = -1
		}
		first <- rcode
	}()
	<-received // the first is forwarded, held upstream
	if rcode, err := query(); err != nil || rcode != dns.RcodeRefused {
		t.Errorf("a second query while one is in flight, one allowed: %s, %v; want REFUSED", dns.RcodeToString[rcode], err)
	}
	if h.Refused() != 1 {
		t.Errorf("Refused() = %d, want 1", h.Refused())
	}
	close(release)
	if rcode := <-first; rcode != dns.RcodeSuccess {
		t.Errorf("the first query: %d, want NOERROR once the upstream answers", rcode)
	}
	if rcode, err := query(); err != nil || rcode != dns.RcodeSuccess {
		t.Errorf("a query after the first was answered: %s, %v; want NOERROR", dns.RcodeToString[rcode], err)
	}
}

// TestHandlerDropsWhatIsNoQuery: bytes that are no DNS message are
// dropped and counted, and the proxy goes on answering; an upstream that
// does not answer gives SERVFAIL, counted.
func TestHandlerDropsWhatIsNoQuery(t *testing.T) {
	var lc net.ListenConfig
	dead, err := lc.ListenPacket(t.Context(), "udp", "127.0.0.1:0") // never answers
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dead.Close() })
	h := &Handler{Upstream: dead.LocalAddr().String(), Timeout: 200 * time.Millisecond}
	addr := start(t, h)
	var d net.Dialer
	conn, err := d.DialContext(t.Context(), "udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	for _, junk := range [][]byte{{0x01}, []byte("not a dns message at all, just text"), make([]byte, 12)} {
		if _, err := conn.Write(junk); err != nil {
			t.Fatal(err)
		}
	}
	if r := ask(t, "udp", addr, "web.shop.svc.cluster.local.", dns.TypeA); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("with no upstream: %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	if h.Failed() != 1 {
		t.Errorf("Failed() = %d, want 1", h.Failed())
	}
	// Each datagram is served on its own: wait for the three counts.
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return h.Dropped() == 3, nil
	}); err != nil {
		t.Errorf("Dropped() = %d, want the 3 messages that are no query", h.Dropped())
	}
}

// TestTranslatorPTR: a reverse lookup's answer names the consumer's
// namespace, not the provider's; another namespace's name is left alone.
func TestTranslatorPTR(t *testing.T) {
	tr := newTranslator("cluster.local.", Names{"shop": "shop-a1"})
	req := new(dns.Msg)
	req.SetQuestion("20.0.96.10.in-addr.arpa.", dns.TypePTR)
	if got := tr.query(req).Question[0].Name; got != "20.0.96.10.in-addr.arpa." {
		t.Errorf("the reverse question became %s", got)
	}
	resp := new(dns.Msg)
	resp.SetReply(req)
	for _, target := range []string{"web.shop-a1.svc.cluster.local.", "web.shop-b2.svc.cluster.local.", "web.shop-a1.svc.example.org."} {
		resp.Answer = append(resp.Answer, &dns.PTR{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypePTR, Class: dns.ClassINET}, Ptr: target})
	}
	var got []string
	for _, rr := range tr.answer(req, resp).Answer {
		got = append(got, rr.(*dns.PTR).Ptr)
	}
	if want := []string{"web.shop.svc.cluster.local.", "web.shop-b2.svc.cluster.local.", "web.shop-a1.svc.example.org."}; !slices.Equal(got, want) {
		t.Errorf("PTR targets %q, want %q", got, want)
	}
}

// freePort is a loopback port free for UDP and TCP, closed again.
func freePort(t *testing.T) int32 {
	t.Helper()
	pc, l, err := dnstest.ListenBoth()
	if err != nil {
		t.Fatal(err)
	}
	port := pc.LocalAddr().(*net.UDPAddr).Port
	_, _ = pc.Close(), l.Close()
	return int32(port) //nolint:gosec // a port
}

// TestProxyServesEachConsumerOnItsServicesPort: against a real API server
// and BIND as the cluster DNS, the proxy opens the target port of each
// consumer's DNS Service, and a query there is asked with that consumer's
// namespace names (two consumers both call a namespace "shop"); a port
// two Services ask for goes to the first by name; a query from a pod of a
// namespace made for another consumer is refused and counted, one from
// the consumer's own pods or the provider's is answered; a Service
// deleted closes its port.
func TestProxyServesEachConsumerOnItsServicesPort(t *testing.T) {
	cfg := envtest.Start(t, "dnsproxy")
	named, err := dnstest.StartBind("cluster.local.", 30)
	if err != nil {
		testenv.Unsupported(t, err.Error())
	}
	t.Cleanup(named.Close)
	if err := named.Serve(nil, zone...); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const liqo = "liqo"
	create := func(o client.Object) {
		t.Helper()
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: liqo}})
	for ns, consumer := range map[string]string{"shop-a1": "cluster-a", "shop-b2": "cluster-b"} {
		create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels:      map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer},
			Annotations: map[string]string{offloadingv1alpha1.OriginNamespaceAnnotation: "shop"}}})
	}
	dnsService := func(name, consumer string, port int32) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: liqo, Name: name, Labels: map[string]string{
				offloadingv1alpha1.DNSServiceLabel: "", offloadingv1alpha1.OriginClusterLabel: consumer}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(port)}}},
		}
	}
	pa, pb := freePort(t), freePort(t)
	create(dnsService("dns-a", "cluster-a", pa))
	create(dnsService("dns-b", "cluster-b", pb))
	// Asks for cluster-a's port: dns-a is first by name.
	create(dnsService("dns-c", "cluster-c", pa))

	p := &Proxy{Namespace: liqo, Host: "127.0.0.1", Upstream: named.Addr, Log: testr.New(t)}
	envtest.StartManager(t, cfg, func(mgr ctrl.Manager) error {
		p.Client = mgr.GetClient()
		return p.SetupWithManager(ctx, mgr)
	})
	envtest.Eventually(t, 30*time.Second, func(context.Context) error {
		if got := p.Serving(); !maps.Equal(got, map[int32]string{pa: "cluster-a", pb: "cluster-b"}) {
			return fmt.Errorf("serving %v", got)
		}
		return nil
	})
	for port, want := range map[int32]string{pa: "10.96.0.20", pb: "10.96.0.30"} {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
		if got := records(ask(t, "udp", addr, "web.shop.svc.cluster.local.", dns.TypeA)); !slices.Equal(got, []string{"web.shop.svc.cluster.local. A " + want}) {
			t.Errorf("web.shop on port %d: %q, want %s", port, got, want)
		}
	}

	// Pods: one of each consumer's namespaces, and one of the provider's
	// own, each at an address of its own that a query can come from.
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "own"}})
	for ns, ip := range map[string]string{"shop-a1": "127.0.0.2", "shop-b2": "127.0.0.3", "own": "127.0.0.4"} {
		create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}})
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "client"}}}}
		create(pod)
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
		if err := c.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	askFrom := func(from string, port int32) (int, error) {
		q := new(dns.Msg)
		q.SetQuestion("web.shop.svc.cluster.local.", dns.TypeA)
		cl := &dns.Client{Timeout: 5 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(from)}}}
		r, _, err := cl.Exchange(q, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
		if err != nil {
			return 0, err
		}
		return r.Rcode, nil
	}
	// cluster-b's pod asks at cluster-a's address: refused, once the
	// proxy knows the pod.
	envtest.Eventually(t, 30*time.Second, func(context.Context) error {
		if rcode, err := askFrom("127.0.0.3", pa); err != nil || rcode != dns.RcodeRefused {
			return fmt.Errorf("cluster-b's pod at cluster-a's port: %s, %w; want REFUSED", dns.RcodeToString[rcode], err)
		}
		return nil
	})
	for _, q := range []struct {
		from string
		port int32
		who  string
	}{{"127.0.0.2", pa, "cluster-a's pod at its own port"}, {"127.0.0.3", pb, "cluster-b's pod at its own port"}, {"127.0.0.4", pa, "the provider's own pod"}} {
		if rcode, err := askFrom(q.from, q.port); err != nil || rcode != dns.RcodeSuccess {
			t.Errorf("%s: %s, %v; want NOERROR", q.who, dns.RcodeToString[rcode], err)
		}
	}
	if got := p.serving[pa].handler.ForeignQueries(); got < 1 {
		t.Errorf("cluster-a's proxy counted %d queries from another consumer's pods", got)
	}
	if got := p.serving[pb].handler.ForeignQueries(); got != 0 {
		t.Errorf("cluster-b's proxy counted %d foreign queries, want 0", got)
	}

	// A listener that stops on its own (its sockets gone) is opened
	// again at once, not at the next change of a Service.
	p.mu.Lock()
	dead := p.serving[pb]
	p.mu.Unlock()
	dead.stop()
	envtest.Eventually(t, 10*time.Second, func(context.Context) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if l := p.serving[pb]; l == nil || l == dead || l.exited.Load() {
			return errors.New("cluster-b's port is not served again")
		}
		return nil
	})
	if rcode, err := askFrom("127.0.0.3", pb); err != nil || rcode != dns.RcodeSuccess {
		t.Errorf("cluster-b's pod at its port opened again: %s, %v; want NOERROR", dns.RcodeToString[rcode], err)
	}

	if err := c.Delete(ctx, dnsService("dns-b", "", 0)); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 30*time.Second, func(context.Context) error {
		if got := p.Serving(); !maps.Equal(got, map[int32]string{pa: "cluster-a"}) {
			return fmt.Errorf("serving %v", got)
		}
		return nil
	})
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(pb))))
	if err != nil {
		t.Fatalf("cluster-b's UDP port is still open: %v", err)
	}
	_ = pc.Close()
	l, err := lc.Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(pb))))
	if err != nil {
		t.Fatalf("cluster-b's TCP port is still open: %v", err)
	}
	_ = l.Close()
}

// compressedLen is r's size on the wire, names compressed.
func compressedLen(r *dns.Msg) int {
	c := r.Copy()
	c.Compress = true
	return c.Len()
}

// TestPortOwners: each DNS Service's first target port serves the
// consumer it names; of two asking for one port the first by name has
// it; a Service naming no consumer, being deleted, or with no numeric
// port serves none.
func TestPortOwners(t *testing.T) {
	svc := func(name, consumer string, port int32, deleting bool) corev1.Service {
		s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if consumer != "" {
			s.Labels[offloadingv1alpha1.OriginClusterLabel] = consumer
		}
		if deleting {
			s.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		if port != 0 {
			s.Spec.Ports = []corev1.ServicePort{{TargetPort: intstr.FromInt32(port)}}
		}
		return s
	}
	named := corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "liqo-dns-f", Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: "f"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{TargetPort: intstr.FromString("dns")}}}}
	// Listed out of order: the rule is by name, not by listing.
	svcs := []corev1.Service{
		svc("liqo-dns-c", "c", 10053, false), // asks for a's port, after a by name
		svc("liqo-dns-a", "a", 10053, false),
		svc("liqo-dns-b", "b", 10054, false),
		svc("liqo-dns-d", "", 10055, false),
		svc("liqo-dns-e", "e", 10056, true),
		named,
	}
	var skipped []string
	got := PortOwners(svcs, func(name string, _ int32, _ string) { skipped = append(skipped, name) })
	if want := map[int32]string{10053: "a", 10054: "b"}; !maps.Equal(got, want) {
		t.Errorf("PortOwners = %v, want %v", got, want)
	}
	if want := []string{"liqo-dns-c", "liqo-dns-f"}; !slices.Equal(skipped, want) {
		t.Errorf("skipped %v, want %v", skipped, want)
	}
	if svcs[0].Name != "liqo-dns-c" {
		t.Errorf("PortOwners reordered its argument")
	}
}
