// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	"github.com/liqo-go/liqo/internal/identity"
)

// TestNetworkChannel: the network talks to a provider as the virtual
// kubelet, its gateway the tunnel's client; to a consumer as the
// provider, the server; to a peer that is both, as the virtual kubelet,
// the server being the cluster of the greater ID on both sides; to a
// peer it has no identity in yet, not at all.
func TestNetworkChannel(t *testing.T) {
	const ns = "liqo"
	kubeconfig := func(server string) []byte {
		return []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + server + `", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)
	}
	asProvider := func(peer, server string) client.Object {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: PeerSecretName(peer)}, Data: map[string][]byte{PeerSecretKubeconfig: kubeconfig(server)}}
	}
	asConsumer := func(peer, server string) client.Object {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.RemoteSecretName(peer)}, Data: map[string][]byte{
			identity.ServerKey: []byte(server), identity.CAKey: []byte("ca"), identity.VirtualKubeletCertKey: []byte("cert"), identity.VirtualKubeletKeyKey: []byte("key"),
		}}
	}
	for _, tc := range []struct {
		name, local, peer string
		objs              []client.Object
		wantServer        string
		wantRole          netv1alpha1.GatewayRole
	}{
		{"a provider", "m", "p", []client.Object{asConsumer("p", "https://p-as-vk")}, "https://p-as-vk", netv1alpha1.GatewayClient},
		{"a consumer", "m", "c", []client.Object{asProvider("c", "https://c-as-provider")}, "https://c-as-provider", netv1alpha1.GatewayServer},
		{"both, this side greater", "z", "b", []client.Object{asConsumer("b", "https://b-as-vk"), asProvider("b", "https://b-as-provider")}, "https://b-as-vk", netv1alpha1.GatewayServer},
		{"both, this side lesser", "a", "b", []client.Object{asConsumer("b", "https://b-as-vk"), asProvider("b", "https://b-as-provider")}, "https://b-as-vk", netv1alpha1.GatewayClient},
		{"a consumer without its kubeconfig yet", "m", "c", []client.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: PeerSecretName("c")}}}, "", ""},
		{"a stranger", "m", "s", nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithObjects(tc.objs...).Build()
			ch := &Channels{Reader: c, Namespace: ns, LocalClusterID: tc.local, Remotes: &identity.Remotes{Client: c, Namespace: ns, Scheme: c.Scheme()}}
			cfg, role, err := ch.Network(t.Context(), tc.peer)
			if err != nil {
				t.Fatal(err)
			}
			server := ""
			if cfg != nil {
				server = cfg.Host
			}
			if server != tc.wantServer || role != tc.wantRole {
				t.Errorf("channel to %s from %s: %q as %q, want %q as %q", tc.peer, tc.local, server, role, tc.wantServer, tc.wantRole)
			}
		})
	}
}
