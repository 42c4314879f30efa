// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestAdvertisementCannotStealCredentials: a provider that points its
// Advertisement's kubeconfigSecretRef at a Secret of the consumer holding
// a kubeconfig of the attacker's choosing gets no request from the
// consumer (no probe, no credential sent to its server), and its virtual
// node stays Ready.
func TestAdvertisementCannotStealCredentials(t *testing.T) {
	peered(t)
	a, b, _ := members()
	ctx := t.Context()
	inA := framework.Client(t, a)

	// The attacker's server counts whatever reaches it and answers as a
	// ready API server would.
	var hits atomic.Int64
	var mu sync.Mutex
	var seen []string
	attacker := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" Authorization="+r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(attacker.Close)

	// A static token: a request carrying the consumer's credentials to
	// the attacker would show "Authorization: Bearer attacker-bait".
	kc := clientcmdapi.NewConfig()
	kc.Clusters["attacker"] = &clientcmdapi.Cluster{Server: attacker.URL, InsecureSkipTLSVerify: true}
	kc.AuthInfos["attacker"] = &clientcmdapi.AuthInfo{Token: "attacker-bait"}
	kc.Contexts["attacker"] = &clientcmdapi.Context{Cluster: "attacker", AuthInfo: "attacker"}
	kc.CurrentContext = "attacker"
	kubeconfig, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}

	// In a two-way peering a peer can create such a Secret itself,
	// through its offloading rights in the consumer; the consumer's admin
	// stands in for that step here.
	const ns, name = "stolen-creds", "bait"
	if err := inA.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = inA.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	if err := inA.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data:       map[string][]byte{identity.VirtualKubeletKubeconfigKey: kubeconfig},
	}); err != nil {
		t.Fatal(err)
	}

	// As B, with the kubeconfig B holds for A.
	provider := framework.ClientFor(t, framework.ProviderConfig(t, b, a.ClusterID))
	key := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(b.ClusterID), Name: sharingv1alpha1.AdvertisementName(b.ClusterID)}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var adv sharingv1alpha1.Advertisement
		if err := provider.Get(ctx, key, &adv); err != nil {
			return err
		}
		adv.Spec.KubeconfigSecretRef = &discoveryv1alpha1.SecretReference{Namespace: ns, Name: name} //nolint:staticcheck // the attack sets the deprecated field
		return provider.Update(ctx, &adv)
	})
	switch {
	case err == nil:
		t.Log("the redirected kubeconfigSecretRef was accepted: it must have no effect")
	case framework.IsRefusal(err):
		t.Logf("the redirected kubeconfigSecretRef was refused: %v", err)
	default:
		t.Fatalf("redirecting the kubeconfigSecretRef: %v, want a refusal or no effect", err)
	}

	// B's Broadcaster puts its own reference back only when it refreshes
	// the offer; two probes of B after the write are enough to see.
	node := waitHeartbeats(t, a, b.ClusterID, 2)
	if n := hits.Load(); n != 0 {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the consumer sent %d requests to the attacker's server: %v", n, seen)
	}
	requireReady(t, node)
}
