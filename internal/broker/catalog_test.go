// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/broker"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// world is a broker cluster's API server with the broker's API in front.
type world struct {
	c   client.Client
	cfg *rest.Config
	url string
}

// startBroker starts an API server with Liqo's CRDs and the broker on it,
// its API on a loopback port.
func startBroker(t *testing.T, o broker.Options) *world {
	t.Helper()
	cfg, c := envtest.StartInstalled(t, "broker")
	ctx := t.Context()
	o.BindAddress = "127.0.0.1:0"
	var s *broker.Server
	envtest.StartManager(t, cfg, func(mgr ctrl.Manager) error {
		var err error
		s, err = broker.Setup(ctx, mgr, o)
		return err
	})
	return &world{c: c, cfg: cfg, url: "http://" + s.Listener.Addr().String()}
}

// create creates objs, and sets the status of those that carry one.
func (w *world) create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		status := o.DeepCopyObject().(client.Object)
		if err := w.c.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		switch s := status.(type) {
		case *discoveryv1alpha1.ForeignCluster, *corev1.Node:
			s.SetResourceVersion(o.GetResourceVersion())
			if err := w.c.Status().Update(t.Context(), s); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// token returns a token of a new service account of ns bound to the
// ClusterRole role (none when empty).
func (w *world) token(t *testing.T, ns, name, role string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	objs := []client.Object{sa}
	if role != "" {
		objs = append(objs, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}})
	}
	w.create(t, objs...)
	tr := &authenticationv1.TokenRequest{}
	if err := w.c.SubResource("token").Create(t.Context(), sa, tr); err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// answer is an HTTP answer: its status, content type and body.
type answer struct {
	code        int
	contentType string
	body        []byte
}

func (w *world) get(t *testing.T, path, token string) answer {
	t.Helper()
	return w.do(t, http.MethodGet, path, token, "")
}

func (w *world) do(t *testing.T, method, path, token, body string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, w.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{code: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: b}
}

// status decodes an error answer, checking it is a Kubernetes Status
// with the answer's code.
func (a answer) status(t *testing.T) metav1.Status {
	t.Helper()
	var s metav1.Status
	if a.contentType != "application/json" {
		t.Fatalf("error answer with Content-Type %q, want application/json", a.contentType)
	}
	if err := json.Unmarshal(a.body, &s); err != nil || s.Kind != "Status" || int(s.Code) != a.code {
		t.Fatalf("error answer %s (%v), want a Status with code %d", a.body, err, a.code)
	}
	return s
}

// eventually retries f until it returns nil, for at most 10 s.
func eventually(t *testing.T, f func() error) {
	t.Helper()
	envtest.Eventually(t, 10*time.Second, func(context.Context) error { return f() })
}

func peered(id, name string, outgoing, incoming bool) *discoveryv1alpha1.ForeignCluster {
	fc := &discoveryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: id, Labels: map[string]string{
			discoveryv1alpha1.ClusterIDLabel: id, discoveryv1alpha1.DiscoveryTypeLabel: string(discoveryv1alpha1.ManualDiscovery),
		}},
		Spec: discoveryv1alpha1.ForeignClusterSpec{
			ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: id, ClusterName: name},
			ForeignAuthURL:  "https://" + name + ".example:8443", Join: outgoing,
		},
		Status: discoveryv1alpha1.ForeignClusterStatus{IncomingPeering: incoming},
	}
	if outgoing {
		meta.SetStatusCondition(&fc.Status.Conditions, metav1.Condition{
			Type: discoveryv1alpha1.ConditionPeeringRequested, Status: metav1.ConditionTrue, Reason: discoveryv1alpha1.ReasonAccepted, Message: "accepted",
		})
	}
	return fc
}

// TestCatalog: the catalog lists the clusters peered with the broker,
// either way, in the original broker's ForeignCluster shape with every
// field and, under /api/v1, with each provider's offer and what is free
// of it; only callers the broker cluster's API server allows read it, and
// every error is a JSON Status naming what is wrong.
func TestCatalog(t *testing.T) {
	w := startBroker(t, broker.Options{Modes: broker.Modes{Catalog: true, Orchestrator: true}, Namespace: install.DefaultNamespace})
	ctx := t.Context()
	w.create(t,
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "catalog-reader"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{brokerv1alpha1.GroupVersion.Group}, Resources: []string{broker.CatalogResource}, Verbs: []string{"get"},
		}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "users"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "users", Name: "default"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: discoveryv1alpha1.TenantNamespace("provider-1")}},
		peered("provider-1", "rome", true, false),
		peered("consumer-1", "milan", false, true),
		peered("stranger-1", "turin", false, false),
		&sharingv1alpha1.Advertisement{
			ObjectMeta: metav1.ObjectMeta{Namespace: discoveryv1alpha1.TenantNamespace("provider-1"), Name: sharingv1alpha1.AdvertisementName("provider-1")},
			Spec: sharingv1alpha1.AdvertisementSpec{
				ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: "provider-1", ClusterName: "rome"},
				Resources:       corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Labels:          map[string]string{"topology.kubernetes.io/region": "eu-south"},
				Prices:          corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("30m")},
				Timestamp:       metav1.Now(), TimeToLive: metav1.NewTime(time.Now().Add(time.Hour)),
			},
		},
		&corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "liqo-rome", Labels: map[string]string{
				offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue, offloadingv1alpha1.RemoteClusterLabel: "provider-1",
			}},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		},
	)
	for i := range 2 {
		w.create(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "users", Name: fmt.Sprintf("p%d", i)},
			Spec: corev1.PodSpec{NodeName: "liqo-rome", AutomountServiceAccountToken: new(bool), Containers: []corev1.Container{{Name: "c", Image: "pause",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		})
	}
	reader := w.token(t, "users", "reader", "catalog-reader")
	nobody := w.token(t, "users", "nobody", "")

	t.Run("the original shape, every field", func(t *testing.T) {
		var got []map[string]any
		eventually(t, func() error {
			a := w.get(t, "/api/clusters", reader)
			if a.code != http.StatusOK || a.contentType != "application/json" {
				return fmt.Errorf("GET /api/clusters: %d %s %s", a.code, a.contentType, a.body)
			}
			got = nil
			if err := json.Unmarshal(a.body, &got); err != nil {
				return err
			}
			if len(got) != 2 {
				return fmt.Errorf("%d clusters, want the two peered: %s", len(got), a.body)
			}
			return nil
		})
		for i, id := range []string{"consumer-1", "provider-1"} {
			c := got[i]
			if c["kind"] != "ForeignCluster" || c["apiVersion"] != "discovery.liqo.io/v1alpha1" {
				t.Errorf("cluster %d: kind %v apiVersion %v", i, c["kind"], c["apiVersion"])
			}
			md, _ := c["metadata"].(map[string]any)
			labels, _ := md["labels"].(map[string]any)
			if md["name"] != id || labels[discoveryv1alpha1.ClusterIDLabel] != id || labels[discoveryv1alpha1.DiscoveryTypeLabel] != "Manual" {
				t.Errorf("cluster %d metadata %v, want %s with its cluster-id and discovery-type labels", i, md, id)
			}
			spec, _ := c["spec"].(map[string]any)
			for _, f := range []string{"clusterIdentity", "outgoingPeeringEnabled", "incomingPeeringEnabled", "networkingEnabled", "foreignAuthUrl", "insecureSkipTLSVerify", "ttl"} {
				if _, ok := spec[f]; !ok {
					t.Errorf("cluster %s: spec.%s missing", id, f)
				}
			}
			ident, _ := spec["clusterIdentity"].(map[string]any)
			if ident["clusterID"] != id || ident["clusterName"] == "" {
				t.Errorf("cluster %s: clusterIdentity %v", id, ident)
			}
		}
	})

	t.Run("v1: offers and what is free", func(t *testing.T) {
		var list broker.ClusterList
		a := w.get(t, "/api/v1/clusters", reader)
		if a.code != http.StatusOK || json.Unmarshal(a.body, &list) != nil || list.Kind != "ClusterList" || len(list.Items) != 2 {
			t.Fatalf("GET /api/v1/clusters: %d %s", a.code, a.body)
		}
		p := list.Items[1]
		if p.ClusterID != "provider-1" || !p.Provider || p.Consumer || !p.Ready || p.Offer == nil {
			t.Fatalf("provider-1: %+v", p)
		}
		if p.Offer.Labels["topology.kubernetes.io/region"] != "eu-south" || p.Offer.Prices.Cpu().MilliValue() != 30 {
			t.Errorf("provider-1's offer %+v, want its Advertisement's labels and prices", p.Offer)
		}
		for name, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: "5", corev1.ResourceMemory: "14Gi", corev1.ResourcePods: "108"} {
			if got := p.Free[name]; got.Cmp(resource.MustParse(want)) != 0 {
				t.Errorf("free %s: %s, want %s (allocatable less two pods)", name, got.String(), want)
			}
		}
		if c := list.Items[0]; c.ClusterID != "consumer-1" || c.Provider || !c.Consumer || c.Offer != nil {
			t.Errorf("consumer-1: %+v", c)
		}
		var one broker.Cluster
		if a := w.get(t, "/api/v1/clusters/provider-1", reader); a.code != http.StatusOK || json.Unmarshal(a.body, &one) != nil || one.ClusterID != "provider-1" {
			t.Errorf("GET /api/v1/clusters/provider-1: %d %s", a.code, a.body)
		}
	})

	t.Run("v1: what the broker measures, and as metrics", func(t *testing.T) {
		measured(t, w, "provider-1", 12*time.Millisecond, nil)
		// Its tunnel established, 0.8 ms through as the gateway measures it.
		var m brokerv1alpha1.Measurement
		if err := w.c.Get(t.Context(), client.ObjectKey{Namespace: install.DefaultNamespace, Name: "provider-1"}, &m); err != nil {
			t.Fatal(err)
		}
		m.Status.TunnelLatencyMicros = 800
		if err := w.c.Status().Update(t.Context(), &m); err != nil {
			t.Fatal(err)
		}
		var p broker.Cluster
		eventually(t, func() error {
			a := w.get(t, "/api/v1/clusters/provider-1", reader)
			if a.code != http.StatusOK {
				return fmt.Errorf("%d %s", a.code, a.body)
			}
			p = broker.Cluster{}
			if err := json.Unmarshal(a.body, &p); err != nil {
				return err
			}
			if p.KPIs == nil || p.KPIs.LatencyMillis == nil || p.KPIs.TunnelLatencyMillis == nil {
				return fmt.Errorf("no latencies yet: %s", a.body)
			}
			return nil
		})
		k := p.KPIs
		if !k.Reachable || *k.LatencyMillis != 12 || *k.TunnelLatencyMillis != 0.8 || k.Uptime[brokerv1alpha1.Window1h] != 1 || len(k.History) != 1 || k.History[0].Up != 1 ||
			k.AgeSeconds == nil || *k.AgeSeconds < 0 || *k.AgeSeconds > 60 || k.Measured == nil {
			t.Errorf("provider-1's KPIs %+v, want reachable at 12 ms (0.8 ms through the tunnel), up the whole hour, measured just now", k)
		}
		if k.Pods.Pending != 2 || k.Pods.Running != 0 {
			t.Errorf("provider-1's pods %+v, want the two pending", k.Pods)
		}
		families, err := ctrlmetrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				key := f.GetName()
				for _, l := range m.GetLabel() {
					key += "," + l.GetName() + "=" + l.GetValue()
				}
				got[key] = m.GetGauge().GetValue()
			}
		}
		for key, want := range map[string]float64{
			"liqo_broker_provider_reachable,provider=provider-1":                                1,
			"liqo_broker_provider_latency_seconds,provider=provider-1":                          0.012,
			"liqo_broker_provider_tunnel_latency_seconds,provider=provider-1":                   0.0008,
			"liqo_broker_provider_uptime_ratio,provider=provider-1,window=1h":                   1,
			"liqo_broker_provider_pods,phase=pending,provider=provider-1":                       2,
			"liqo_broker_provider_free,provider=provider-1,resource=cpu":                        5,
			"liqo_broker_provider_price,currency=,period=Hour,provider=provider-1,resource=cpu": 0.03,
		} {
			if v, ok := got[key]; !ok || v != want {
				t.Errorf("%s: %v (exported: %v), want %v", key, v, ok, want)
			}
		}
	})

	t.Run("callers and errors", func(t *testing.T) {
		for _, tc := range []struct {
			name, path, token string
			code              int
			mention           string
		}{
			{"anonymous", "/api/clusters", "", http.StatusUnauthorized, "bearer token"},
			{"a made-up token", "/api/v1/clusters", "made-up", http.StatusUnauthorized, "bearer token"},
			{"a user without the right", "/api/clusters", nobody, http.StatusForbidden, "system:serviceaccount:users:nobody"},
			{"an unknown cluster", "/api/v1/clusters/nowhere", reader, http.StatusNotFound, "nowhere"},
			{"a malformed cluster ID", "/api/v1/clusters/Not_An_ID", reader, http.StatusBadRequest, "id:"},
			{"an unknown path", "/api/v2/anything", reader, http.StatusNotFound, "/api/v2/anything"},
		} {
			a := w.get(t, tc.path, tc.token)
			if a.code != tc.code {
				t.Errorf("%s: %d %s, want %d", tc.name, a.code, a.body, tc.code)
				continue
			}
			if s := a.status(t); !strings.Contains(s.Message, tc.mention) {
				t.Errorf("%s: message %q does not mention %q", tc.name, s.Message, tc.mention)
			}
		}
	})

	t.Run("a cluster leaves when its peering ends", func(t *testing.T) {
		var fc discoveryv1alpha1.ForeignCluster
		if err := w.c.Get(ctx, client.ObjectKey{Name: "consumer-1"}, &fc); err != nil {
			t.Fatal(err)
		}
		fc.Status.IncomingPeering = false
		if err := w.c.Status().Update(ctx, &fc); err != nil {
			t.Fatal(err)
		}
		eventually(t, func() error {
			var list broker.ClusterList
			a := w.get(t, "/api/v1/clusters", reader)
			if err := json.Unmarshal(a.body, &list); err != nil {
				return err
			}
			if len(list.Items) != 1 || list.Items[0].ClusterID != "provider-1" {
				return fmt.Errorf("clusters %+v, want provider-1 alone", list.Items)
			}
			return nil
		})
	})
}

// TestPublicCatalog: with the catalog public, anonymous callers read it.
func TestPublicCatalog(t *testing.T) {
	w := startBroker(t, broker.Options{Modes: broker.Modes{Catalog: true}, PublicCatalog: true})
	if a := w.get(t, "/api/clusters", ""); a.code != http.StatusOK || strings.TrimSpace(string(a.body)) != "[]" {
		t.Errorf("anonymous GET /api/clusters on a public catalog: %d %s, want 200 and no cluster", a.code, a.body)
	}
}
