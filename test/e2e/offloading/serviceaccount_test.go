// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/internal/virtualkubelet/token"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestServiceAccountToken: an offloaded pod gets no token of the consumer
// unless it asks (annotation); one that asks finds, where its token volume
// is mounted in the provider, a token bound to the local pod that the
// consumer's API server accepts as the pod's service account, the
// consumer's CA and its namespace. Deleting the pod deletes the token in
// the provider, and the token stops working.
func TestServiceAccountToken(t *testing.T) {
	peered(t)
	a, b, _ := members()
	ctx := context.Background()
	cl := framework.Client(t, a)
	const ns = "offload-token"
	remotes := offload(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote})

	// The ServiceAccount admission plugin mounts the token of "default"
	// once the service account controller made it.
	framework.Eventually(t, 30*time.Second, func() error {
		return cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
	})
	node, err := framework.VirtualNode(cl, b.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	newPod := func(name string, asks bool) *corev1.Pod {
		p := pauseOn(ns, name, node.Name)
		if asks {
			p.Annotations = map[string]string{offloadingv1alpha1.ServiceAccountTokenAnnotation: "true"}
		}
		return p
	}
	with, without := newPod("with-token", true), newPod("without-token", false)
	for _, p := range []*corev1.Pod{with, without} {
		if err := cl.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, time.Minute, func() error { return allRunning(t, ns, 2) })

	pc := framework.Client(t, b)
	remoteNS := remoteNamespaceOf(remotes, b.ClusterID)
	remotePod := func(name string) *corev1.Pod {
		t.Helper()
		var p corev1.Pod
		if err := pc.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: name}, &p); err != nil {
			t.Fatal(err)
		}
		return &p
	}
	tokenSecret := token.SecretName(with.Name)

	t.Run("a pod that does not ask gets no token", func(t *testing.T) {
		p := remotePod(without.Name)
		for _, v := range p.Spec.Volumes {
			if v.Projected != nil {
				t.Errorf("provider pod %s has projected volume %s: %+v", p.Name, v.Name, v.Projected)
			}
		}
		err := pc.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: token.SecretName(without.Name)}, &corev1.Secret{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("token Secret of %s in the provider: %v, want none", without.Name, err)
		}
	})

	var token []byte
	t.Run("a pod that asks mounts a token of the consumer bound to it", func(t *testing.T) {
		var local corev1.Pod
		if err := cl.Get(ctx, client.ObjectKeyFromObject(with), &local); err != nil {
			t.Fatal(err)
		}
		var mounted string
		for _, v := range local.Spec.Volumes {
			if v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool { return s.ServiceAccountToken != nil }) {
				mounted = v.Name
			}
		}
		if mounted == "" {
			t.Fatalf("the local pod has no token volume: %+v", local.Spec.Volumes)
		}
		p := remotePod(with.Name)
		var tokenKey string
		for _, v := range p.Spec.Volumes {
			if v.Name == mounted && v.Projected != nil && len(v.Projected.Sources) > 0 && v.Projected.Sources[0].Secret != nil &&
				v.Projected.Sources[0].Secret.Name == tokenSecret {
				for _, it := range v.Projected.Sources[0].Secret.Items {
					if it.Path == "token" {
						tokenKey = it.Key
					}
				}
			}
		}
		if tokenKey == "" {
			t.Fatalf("provider pod volume %s does not take its token from Secret %s: %+v", mounted, tokenSecret, p.Spec.Volumes)
		}
		var secret corev1.Secret
		if err := pc.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: tokenSecret}, &secret); err != nil {
			t.Fatal(err)
		}
		ca, err := os.ReadFile(a.CACertPath)
		if err != nil {
			t.Fatal(err)
		}
		if string(secret.Data["ca.crt"]) != string(ca) || string(secret.Data["namespace"]) != ns {
			t.Errorf("token Secret ca.crt equal to the consumer's CA: %v; namespace %q, want %q",
				string(secret.Data["ca.crt"]) == string(ca), secret.Data["namespace"], ns)
		}
		token = secret.Data[tokenKey]
		// The kube-api-access volume asks 3607 s, which the API server
		// stretches to a year; a token that leaves the cluster lives an hour.
		if exp, err := tokenExpiry(token); err != nil || time.Until(exp) > 61*time.Minute {
			t.Errorf("the token expires at %v (%v), want within the hour", exp, err)
		}
		user, err := whoAmI(a, token)
		if err != nil {
			t.Fatalf("the consumer's API server refuses the token: %v", err)
		}
		if want := "system:serviceaccount:" + ns + ":default"; user.Username != want {
			t.Errorf("the token authenticates as %q, want %q", user.Username, want)
		}
		if got := user.Extra["authentication.kubernetes.io/pod-uid"]; len(got) != 1 || got[0] != string(local.UID) {
			t.Errorf("the token is bound to pod UID %v, want %s", got, local.UID)
		}
	})

	t.Run("deleting the pod deletes its token, which stops working", func(t *testing.T) {
		if err := cl.Delete(ctx, with); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 30*time.Second, func() error {
			err := pc.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: tokenSecret}, &corev1.Secret{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("token Secret still in %s: %w", b.Name, err)
			}
			return nil
		})
		if token == nil {
			t.Fatal("the previous step read no token")
		}
		framework.Eventually(t, 30*time.Second, func() error {
			if _, err := whoAmI(a, token); err == nil {
				return fmt.Errorf("the consumer's API server still accepts the token of the deleted pod")
			}
			return nil
		})
	})
}

// whoAmI asks m's API server who token is.
func whoAmI(m *playground.Member, token []byte) (*authenticationv1.UserInfo, error) {
	cfg := rest.AnonymousClientConfig(m.RESTConfig)
	cfg.BearerToken = string(token)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return &r.Status.UserInfo, nil
}

// tokenExpiry reads the exp claim of a JWT.
func tokenExpiry(token []byte) (time.Time, error) {
	parts := strings.Split(string(token), ".")
	if len(parts) != 3 {
		return time.Time{}, fmt.Errorf("not a JWT: %d parts", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, err
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return time.Time{}, err
	}
	return time.Unix(claims.Exp, 0), nil
}
