// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package discovery_test

import (
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/discovery/dnssd"
	"github.com/liqo-go/liqo/internal/discovery/mdns"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// impostor is a LAN host's own auth service: under /<prefix>/ids it
// answers the identity identities returns for that prefix (the whole path
// before /ids), with a key of its own, and it records every request.
type impostor struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
}

func startImpostor(t *testing.T, identities func(prefix string) *auth.Identity) *impostor {
	t.Helper()
	cert, err := auth.SelfSignedCertificate([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	im := &impostor{}
	im.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		im.mu.Lock()
		im.requests = append(im.requests, r.Method+" "+r.URL.Path)
		im.mu.Unlock()
		prefix, ok := strings.CutSuffix(r.URL.Path, auth.IdentityPath)
		if r.Method != http.MethodGet || !ok {
			http.Error(w, "not here", http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(identities(strings.TrimPrefix(prefix, "/")))
	}))
	im.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	im.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point
	im.StartTLS()
	t.Cleanup(im.Close)
	return im
}

// exchanges returns the requests other than identity lookups: what a
// consumer would send when peering.
func (im *impostor) exchanges() []string {
	im.mu.Lock()
	defer im.mu.Unlock()
	var out []string
	for _, r := range im.requests {
		if !strings.HasSuffix(r, auth.IdentityPath) {
			out = append(out, r)
		}
	}
	return out
}

// announcer multicasts mDNS answers on the suite's port, as any host on the
// LAN can.
type announcer struct{ conn *mdns.Conn }

func newAnnouncer(t *testing.T) announcer {
	t.Helper()
	conn, err := mdns.Listen(t.Context(), "lo", suite.MDNSPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return announcer{conn}
}

// announce sends one announcement of clusterID at authURL.
func (a announcer) announce(t *testing.T, clusterID, authURL string) {
	t.Helper()
	u, err := urlPort(authURL)
	if err != nil {
		t.Fatal(err)
	}
	inst := &dnssd.Instance{
		Name: clusterID, Service: dnssd.DefaultService, Domain: "local.", Host: clusterID, Port: u,
		IPs:          []net.IP{net.ParseIP("127.0.0.1")},
		Announcement: dnssd.Announcement{ClusterID: clusterID, ClusterName: "impostor", AuthURL: authURL, Namespace: install.DefaultNamespace},
	}
	msg := new(dns.Msg)
	msg.Response, msg.Authoritative = true, true
	msg.Answer = inst.Records(120)
	b, err := msg.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.conn.SendRaw(b); err != nil {
		t.Fatalf("sending an announcement: %v", err)
	}
}

func urlPort(authURL string) (uint16, error) {
	hostport, _, _ := strings.Cut(strings.TrimPrefix(authURL, "https://"), "/")
	_, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return 0, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	return uint16(p), err
}

func dropped(t *testing.T, reason string) func() float64 {
	t.Helper()
	return func() float64 {
		t.Helper()
		return framework.Metric(t, member(1), "liqo_discovery_dropped_total", map[string]string{"source": dnssd.SourceMDNS, "reason": reason})
	}
}

// TestSpoofedAddressIsNotFollowed: a host on the LAN announces a known
// cluster's ClusterID at an address of its own, where it answers with that
// cluster's real identity (its public CA, its API server). The observer
// dials it only to check the key, refuses the move because the key is not
// the one pinned at first contact, counts the refusal, and keeps the real
// address, API server and LAN sighting; nothing is ever exchanged with
// the impostor.
func TestSpoofedAddressIsNotFollowed(t *testing.T) {
	m, victim := member(1), member(2)
	framework.LogOnFailure(t, m, victim)
	var pinned *discoveryv1alpha1.ForeignCluster
	framework.Eventually(t, 15*time.Second, func() (err error) {
		if pinned, err = foreignClusterOf(t, m, victim); err != nil {
			return err
		}
		if pinned.Status.AuthServiceKeyFingerprint == "" || pinned.Status.APIServerURL == "" {
			return fmt.Errorf("the auth service key of %s is not pinned yet", victim.Name)
		}
		return nil
	})
	real, err := auth.GetIdentity(t.Context(), victim.AuthURL, auth.ClientOptions{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	if real.ServingKey != pinned.Status.AuthServiceKeyFingerprint {
		t.Fatalf("pinned key %s, but %s presents %s", pinned.Status.AuthServiceKeyFingerprint, victim.Name, real.ServingKey)
	}
	im := startImpostor(t, func(string) *auth.Identity { return real.Identity })
	spoofed := im.URL

	refusals := dropped(t, foreigncluster.RefusedUnverifiedAddress)
	before := refusals()
	spoofedAt := time.Now()
	a := newAnnouncer(t)
	framework.Eventually(t, 15*time.Second, func() error {
		a.announce(t, victim.ClusterID, spoofed)
		if got := refusals(); got <= before {
			return fmt.Errorf("dropped{reason=%s} still %v", foreigncluster.RefusedUnverifiedAddress, got)
		}
		return nil
	})
	// The cluster's own announcements still count while the impostor's
	// are refused.
	framework.Eventually(t, 10*time.Second, func() error {
		a.announce(t, victim.ClusterID, spoofed)
		fc, err := foreignClusterOf(t, m, victim)
		if err != nil {
			return err
		}
		for _, s := range fc.Status.Sources {
			if s.Name == "mdns" && !s.LastSeen.Time.Before(spoofedAt.Truncate(time.Second).Add(time.Second)) {
				return nil
			}
		}
		return fmt.Errorf("no LAN sighting of %s recorded since the impostor started: %+v", victim.Name, fc.Status.Sources)
	})
	fc, err := foreignClusterOf(t, m, victim)
	if err != nil {
		t.Fatal(err)
	}
	if fc.UID != pinned.UID || fc.Spec.ForeignAuthURL != victim.AuthURL || fc.Status.APIServerURL != pinned.Status.APIServerURL {
		t.Fatalf("the ForeignCluster moved: uid %s->%s, auth URL %s (want %s), API server %s (want %s)",
			pinned.UID, fc.UID, fc.Spec.ForeignAuthURL, victim.AuthURL, fc.Status.APIServerURL, pinned.Status.APIServerURL)
	}
	if c := condition(fc, discoveryv1alpha1.ConditionReachable); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("%s is no longer reachable for %s: %+v", victim.Name, m.Name, c)
	}
	if ex := im.exchanges(); len(ex) > 0 {
		t.Fatalf("the impostor received %v", ex)
	}
}

// TestLANCannotClaimAClusterKnownOtherwise: LAN announcements of a cluster
// added by hand (or known from its peering) are ignored and counted: a LAN
// source would look like a LAN sighting, and would let a LAN host keep it
// alive.
func TestLANCannotClaimAClusterKnownOtherwise(t *testing.T) {
	m := member(1)
	framework.LogOnFailure(t, m)
	c := framework.Client(t, m)
	const id = "added-by-hand-only"
	fc := &discoveryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: id, Labels: map[string]string{
			discoveryv1alpha1.ClusterIDLabel: id, discoveryv1alpha1.DiscoveryTypeLabel: string(discoveryv1alpha1.ManualDiscovery),
		}},
		Spec: discoveryv1alpha1.ForeignClusterSpec{
			ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: id},
			ForeignAuthURL:  "https://127.0.0.1:1", InsecureSkipTLSVerify: ptr.To(true),
		},
	}
	if err := c.Create(t.Context(), fc); err != nil {
		t.Fatal(err)
	}
	framework.DeleteOnCleanup(t, c, fc)

	refusals := dropped(t, foreigncluster.RefusedNotDiscovered)
	before := refusals()
	a := newAnnouncer(t)
	framework.Eventually(t, 10*time.Second, func() error {
		a.announce(t, id, "https://127.0.0.1:2")
		if got := refusals(); got <= before {
			return fmt.Errorf("dropped{reason=%s} still %v", foreigncluster.RefusedNotDiscovered, got)
		}
		return nil
	})
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(fc), fc); err != nil {
		t.Fatal(err)
	}
	if len(fc.Status.Sources) > 0 || fc.Spec.ForeignAuthURL != "https://127.0.0.1:1" {
		t.Fatalf("a LAN announcement changed a cluster added by hand: sources %+v, auth URL %s", fc.Status.Sources, fc.Spec.ForeignAuthURL)
	}
}

// TestDiscoveryFloodIsBounded: a host announcing many clusters, each with
// an auth service that answers, gets at most maxDiscoveredClusters
// recorded; the rest are counted as dropped. When it stops, its clusters
// age out and the CA Secrets pinned for them go with them.
func TestDiscoveryFloodIsBounded(t *testing.T) {
	m := member(1)
	framework.LogOnFailure(t, m)
	c := framework.Client(t, m)
	discovered := func() (real, flood int) {
		t.Helper()
		var list discoveryv1alpha1.ForeignClusterList
		if err := c.List(t.Context(), &list); err != nil {
			t.Fatal(err)
		}
		for _, fc := range list.Items {
			switch {
			case strings.HasPrefix(fc.Name, "flood-"):
				flood++
			case fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] == string(discoveryv1alpha1.LanDiscovery) ||
				fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] == string(discoveryv1alpha1.WanDiscovery):
				real++
			}
		}
		return real, flood
	}
	const room, clusters = 3, 12
	framework.Eventually(t, 10*time.Second, func() error {
		if n, _ := discovered(); n < len(suite.Members)-1 {
			return fmt.Errorf("%s knows %d discovered clusters, want the %d others", m.Name, n, len(suite.Members)-1)
		}
		return nil
	})
	known, _ := discovered()
	limit := known + room
	setDiscovery(t, m, func(d *configv1alpha1.DiscoveryConfig) { d.MaxDiscoveredClusters = int32(limit) }) //nolint:gosec // small

	caPEM := func() string {
		cert, err := auth.SelfSignedCertificate([]string{"ca"})
		if err != nil {
			t.Fatal(err)
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}))
	}()
	im := startImpostor(t, func(id string) *auth.Identity {
		return &auth.Identity{ClusterID: id, ClusterName: id, APIServerURL: "https://127.0.0.1:1", CACert: caPEM}
	})
	refusals := dropped(t, foreigncluster.RefusedTooManyClusters)
	before := refusals()
	a := newAnnouncer(t)
	pinnedCAs := func() (n int) {
		t.Helper()
		var secrets corev1.SecretList
		if err := c.List(t.Context(), &secrets, client.InNamespace(install.DefaultNamespace)); err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets.Items {
			if strings.HasPrefix(s.Name, foreigncluster.CASecretName("flood-")) {
				n++
			}
		}
		return n
	}
	framework.Eventually(t, 20*time.Second, func() error {
		for i := range clusters {
			id := fmt.Sprintf("flood-%d", i)
			a.announce(t, id, im.URL+"/"+id)
		}
		_, flood := discovered()
		if got := refusals(); got <= before || flood < room || pinnedCAs() < room {
			return fmt.Errorf("%d flood clusters recorded, %d CAs pinned, dropped{reason=%s} %v (was %v)",
				flood, pinnedCAs(), foreigncluster.RefusedTooManyClusters, got, before)
		}
		return nil
	})
	if n, flood := discovered(); n+flood > limit {
		t.Fatalf("%d discovered clusters recorded (%d of them announced by the flood), over the limit of %d", n+flood, flood, limit)
	}
	// The flood stops: its clusters age out, then their pinned CAs go with
	// them (kube-controller-manager's garbage collector follows the owner
	// references; it may take a while to learn a CRD installed after it
	// started).
	// Every member heard the flood on the shared port, not only m: the
	// test ends once none of them holds a flood cluster, so that the next
	// test starts from a quiet LAN.
	framework.Eventually(t, 30*time.Second, func() error {
		for _, each := range suite.Members {
			var list discoveryv1alpha1.ForeignClusterList
			if err := framework.Client(t, each).List(t.Context(), &list); err != nil {
				return err
			}
			for _, fc := range list.Items {
				if strings.HasPrefix(fc.Name, "flood-") {
					return fmt.Errorf("%s still holds flood cluster %s", each.Name, fc.Name)
				}
			}
		}
		return nil
	})
	framework.Eventually(t, 60*time.Second, func() error {
		if n := pinnedCAs(); n > 0 {
			return fmt.Errorf("%d CA Secrets of the flood clusters left after they aged out", n)
		}
		return nil
	})
}
