// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestKubectlLogsAndExec: `kubectl logs`, `kubectl exec`, `kubectl attach`
// and `kubectl port-forward` (10 MB each way) on the consumer reach the
// offloaded pod in its provider, through the consumer's
// API server, the virtual node's kubelet API and the provider's API
// server (kwok answers there, naming its cluster). The kubelet API lets in
// only clients the API server's client CA signed, and of those only users
// allowed nodes/proxy.
func TestKubectlLogsAndExec(t *testing.T) {
	peered(t)
	a, b, c := members()
	ctx := context.Background()
	cl := framework.Client(t, a)
	const ns = "offload-kubectl"
	offload(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote})

	// One pod on each virtual node.
	nodes := map[string]*corev1.Node{}
	for _, p := range []*playground.Member{b, c} {
		n, err := framework.VirtualNode(cl, p.ClusterID)
		if err != nil {
			t.Fatal(err)
		}
		nodes[p.Name] = n
		if err := cl.Create(ctx, pauseOn(ns, "on-"+p.Name, n.Name)); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, time.Minute, func() error { return allRunning(t, ns, 2) })

	kubectl := func(stdin string, args ...string) (string, error) {
		return framework.Kubectl(t, a, stdin, append([]string{"--namespace", ns}, args...)...)
	}

	for _, p := range []*playground.Member{b, c} {
		pod := "on-" + p.Name
		t.Run("kubectl logs "+pod+" shows the log of the pod in "+p.Name, func(t *testing.T) {
			out, err := kubectl("", "logs", pod)
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(out) != localcluster.KwokLogLine(p.Name) {
				t.Errorf("kubectl logs %s printed %q, want %q", pod, out, localcluster.KwokLogLine(p.Name))
			}
		})
		t.Run("kubectl exec "+pod+" runs the command in "+p.Name, func(t *testing.T) {
			out, err := kubectl("", "exec", pod, "--", "printenv", localcluster.KwokExecClusterEnv)
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(out) != p.Name {
				t.Errorf("kubectl exec %s -- printenv %s printed %q, want %q", pod, localcluster.KwokExecClusterEnv, out, p.Name)
			}
			// Standard input flows too, through the protocol upgrade. (kwok
			// does not pass on the end of stdin, so the command stops by
			// itself.)
			const text = "offloaded stdin\nsecond line\n"
			out, err = kubectl(text, "exec", "-i", pod, "--", "head", "-n", "2")
			if err != nil {
				t.Fatal(err)
			}
			if out != text {
				t.Errorf("kubectl exec -i %s -- head -n 2 printed %q, want %q", pod, out, text)
			}
			// A failing command fails kubectl exec.
			if _, err := kubectl("", "exec", pod, "--", "sh", "-c", "exit 3"); err == nil || !strings.Contains(err.Error(), "exit status 3") {
				t.Errorf("kubectl exec %s -- sh -c 'exit 3': %v, want a failure with exit status 3", pod, err)
			}
		})
		t.Run("kubectl attach "+pod+" shows what its container writes in "+p.Name, func(t *testing.T) {
			framework.CheckAttach(t, a, ns, pod, p)
		})
		t.Run("kubectl port-forward to "+pod+" carries 10 MB both ways through "+p.Name, func(t *testing.T) {
			framework.CheckPortForward(t, a, ns, pod, 10<<20)
		})
	}

	t.Run("the kubelet API checks who calls, and each node serves its own pods", func(t *testing.T) {
		endpoint := func(p *playground.Member) string { return kubeletEndpoint(t, cl, p) }
		nodeB, nodeC := endpoint(b), endpoint(c)
		if nodeB == nodeC {
			t.Fatalf("both virtual nodes publish %s: each needs its own kubelet port", nodeB)
		}
		logsPath := func(p *playground.Member) string { return "/containerLogs/" + ns + "/on-" + p.Name + "/app" }
		logsURL := nodeB + logsPath(b)
		get := func(cert *tls.Certificate, url string) (int, string) { return kubeletGet(t, cert, url) }
		certFor := func(m *playground.Member, user string) *tls.Certificate { return clientCert(t, m, user) }

		if code, body := get(nil, logsURL); code != http.StatusUnauthorized {
			t.Errorf("without a client certificate: %d %q, want 401", code, body)
		}
		// Signed by another cluster's CA: not the consumer API server's.
		if code, body := get(certFor(b, "intruder"), logsURL); code != http.StatusUnauthorized {
			t.Errorf("with a certificate of another CA: %d %q, want 401", code, body)
		}
		const user = "liqo-e2e-log-reader"
		reader := certFor(a, user)
		if code, body := get(reader, logsURL); code != http.StatusForbidden || !strings.Contains(body, "nodes/proxy") {
			t.Errorf("as %s without nodes/proxy: %d %q, want 403 naming nodes/proxy", user, code, body)
		}
		// nodes/proxy on the first virtual node only.
		grantUser(t, cl, user, user, rbacv1.PolicyRule{
			APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"get"}, ResourceNames: []string{nodes[b.Name].Name},
		})
		framework.Eventually(t, 10*time.Second, func() error {
			code, body := get(reader, logsURL)
			if code != http.StatusOK || strings.TrimSpace(body) != localcluster.KwokLogLine(b.Name) {
				return fmt.Errorf("as %s with nodes/proxy: %d %q", user, code, body)
			}
			return nil
		})
		if code, body := get(reader, nodeC+logsPath(c)); code != http.StatusForbidden {
			t.Errorf("as %s, on the node it may not use: %d %q, want 403", user, code, body)
		}
		// A node serves the pods bound to it, not another node's.
		if code, body := get(reader, nodeB+logsPath(c)); code != http.StatusNotFound {
			t.Errorf("the pod of %s through the kubelet API of %s: %d %q, want 404", nodes[c.Name].Name, nodes[b.Name].Name, code, body)
		}
		if code, body := get(reader, nodeB+"/containerLogs/"+ns+"/no-such-pod/app"); code != http.StatusNotFound {
			t.Errorf("logs of a pod that does not exist: %d %q, want 404", code, body)
		}
		if code, body := get(reader, nodeB+"/configz"); code != http.StatusNotFound {
			t.Errorf("a kubelet path the virtual node does not serve: %d %q, want 404", code, body)
		}

		// The read endpoints: health, and the pods bound to the node, as
		// this cluster sees them.
		if code, body := get(reader, nodeB+"/healthz"); code != http.StatusOK || body != "ok" {
			t.Errorf("/healthz: %d %q, want 200 ok", code, body)
		}
		podNames := func(body string) []string {
			t.Helper()
			var list corev1.PodList
			if err := json.Unmarshal([]byte(body), &list); err != nil {
				t.Fatalf("not a pod list: %v: %q", err, body)
			}
			var names []string
			for _, p := range list.Items {
				names = append(names, p.Namespace+"/"+p.Name)
			}
			return names
		}
		for _, path := range []string{"/pods", "/runningpods/"} {
			code, body := get(reader, nodeB+path)
			if code != http.StatusOK {
				t.Fatalf("%s: %d %q", path, code, body)
			}
			if names := podNames(body); len(names) != 1 || names[0] != ns+"/on-"+b.Name {
				t.Errorf("%s of %s lists %v, want %s/on-%s alone", path, nodes[b.Name].Name, names, ns, b.Name)
			}
		}
		// nodes/pods alone (a kubelet's fine-grained right) reads the pod
		// list, and nothing more.
		const lister = "liqo-e2e-pod-lister"
		listerCert := certFor(a, lister)
		listerRole := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: lister},
			Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{""}, Resources: []string{"nodes/pods"}, Verbs: []string{"get"}, ResourceNames: []string{nodes[b.Name].Name},
			}},
		}
		listerBinding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: lister},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: lister},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: lister}},
		}
		for _, o := range []client.Object{listerRole, listerBinding} {
			if err := cl.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
			framework.DeleteOnCleanup(t, cl, o)
		}
		framework.Eventually(t, 10*time.Second, func() error {
			if code, body := get(listerCert, nodeB+"/pods"); code != http.StatusOK {
				return fmt.Errorf("as %s with nodes/pods: /pods %d %q", lister, code, body)
			}
			return nil
		})
		if code, body := get(listerCert, logsURL); code != http.StatusForbidden || !strings.Contains(body, "nodes/proxy") {
			t.Errorf("as %s, with nodes/pods alone, logs: %d %q, want 403 naming nodes/proxy", lister, code, body)
		}
	})
}

// kubeletEndpoint is the https:// address of the kubelet API of p's
// virtual node in cl.
func kubeletEndpoint(t *testing.T, cl client.Client, p *playground.Member) string {
	t.Helper()
	n, err := framework.VirtualNode(cl, p.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	var addr string
	for _, ad := range n.Status.Addresses {
		if ad.Type == corev1.NodeInternalIP {
			addr = ad.Address
		}
	}
	port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
	if addr == "" || port == 0 {
		t.Fatalf("virtual node %s publishes no kubelet endpoint: addresses %v, port %d", n.Name, n.Status.Addresses, port)
	}
	return "https://" + net.JoinHostPort(addr, strconv.Itoa(int(port)))
}

// kubeletGet GETs url of a kubelet API with cert (nil: none), and returns
// the status code and body (0 and the error when nothing answered).
func kubeletGet(t *testing.T, cert *tls.Certificate, url string) (int, string) {
	t.Helper()
	return kubeletRequest(t, cert, "", url)
}

// kubeletGetWithToken GETs url of a kubelet API with a bearer token and
// no client certificate, as metrics-server and Prometheus call kubelets.
func kubeletGetWithToken(t *testing.T, token, url string) (int, string) {
	t.Helper()
	return kubeletRequest(t, nil, token, url)
}

func kubeletRequest(t *testing.T, cert *tls.Certificate, token, url string) (int, string) {
	t.Helper()
	cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the kubelet's serving certificate is not what is tested
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		// A status no kubelet answers: callers waiting for one retry.
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// clientCert is a client certificate of user signed by m's client CA.
func clientCert(t *testing.T, m *playground.Member, user string) *tls.Certificate {
	t.Helper()
	certPEM, keyPEM, err := m.IssueClientCertificate(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &cert
}

// grantUser gives user rules, through a ClusterRole and its binding named
// name in cl, until the test ends.
func grantUser(t *testing.T, cl client.Client, name, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := cl.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		framework.DeleteOnCleanup(t, cl, o)
	}
}
