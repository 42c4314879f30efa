// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package foreigncluster

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// authService stands for the remote auth service the reconciler asks.
type authService struct {
	mu     sync.Mutex
	answer *auth.Response
	err    error
}

func (a *authService) set(resp *auth.Response, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.answer, a.err = resp, err
}

func (a *authService) get(_ context.Context, url string, o auth.ClientOptions) (*auth.Response, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return nil, a.err
	}
	resp := a.answer
	if resp == nil {
		return nil, fmt.Errorf("dial %s: connection refused", url)
	}
	// As the real client does with a pinned key.
	if o.PinnedKey != "" && resp.ServingKey != o.PinnedKey {
		return nil, &auth.KeyMismatchError{Pinned: o.PinnedKey, Presented: resp.ServingKey}
	}
	return resp, nil
}

func selfSignedCA(t *testing.T, name string) string {
	t.Helper()
	cert, err := auth.SelfSignedCertificate([]string{name})
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}))
}

// TestManualForeignClusterIsCompletedAndGuarded runs the ForeignCluster
// reconciler alone against a real API server. A ForeignCluster created
// with only an auth URL is completed from the auth service: identity,
// label, the CA pinned in a Secret, the API server address. Then the
// service answers with another CA and another address, as someone who
// took over the address would: the CA is not trusted, and the address
// does not move. Then it presents another serving key: the cluster is
// marked unreachable, naming the change.
func TestManualForeignClusterIsCompletedAndGuarded(t *testing.T) {
	cfg, c := envtest.StartInstalled(t, "consumer")
	ctx := t.Context()
	services := &authService{}
	const url = "https://198.51.100.7:30443"
	realCA := selfSignedCA(t, "provider-ca")
	services.set(&auth.Response{ServingKey: "key-1", Identity: &auth.Identity{
		ClusterID: "provider-1", ClusterName: "provider", APIServerURL: "https://198.51.100.7:6443", Namespace: "liqo", CACert: realCA,
	}}, nil)
	envtest.StartManager(t, cfg, func(mgr ctrl.Manager) error {
		return (&Reconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Namespace: install.DefaultNamespace, LocalClusterID: "consumer-1",
			Choices: &Choices{Client: mgr.GetClient(), Namespace: install.DefaultNamespace}, GetIdentity: services.get, Resync: 200 * time.Millisecond,
		}).SetupWithManager(mgr)
	})

	fc := &discoveryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand"},
		Spec:       discoveryv1alpha1.ForeignClusterSpec{ForeignAuthURL: url},
	}
	if err := c.Create(ctx, fc); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
			return err
		}
		switch {
		case fc.Spec.ClusterIdentity.ClusterID != "provider-1" || fc.Labels[discoveryv1alpha1.ClusterIDLabel] != "provider-1":
			return fmt.Errorf("identity %+v, labels %v: not completed", fc.Spec.ClusterIdentity, fc.Labels)
		case fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] != string(discoveryv1alpha1.ManualDiscovery):
			return fmt.Errorf("discovery type %q, want Manual", fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel])
		case !meta.IsStatusConditionTrue(fc.Status.Conditions, discoveryv1alpha1.ConditionCATrusted):
			return fmt.Errorf("CATrusted %+v, want True", meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionCATrusted))
		case fc.Status.APIServerURL != "https://198.51.100.7:6443":
			return fmt.Errorf("API server %q, want the one the service gave", fc.Status.APIServerURL)
		}
		return nil
	})
	var pinned corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: CASecretName("provider-1")}, &pinned); err != nil {
		t.Fatalf("the pinned CA: %v", err)
	}
	if string(pinned.Data[CASecretKey]) != realCA {
		t.Fatalf("the pinned CA is not the one the auth service gave")
	}

	// Another CA, another address, same serving key.
	impostorCA := selfSignedCA(t, "impostor")
	impostorFP, err := auth.Fingerprint([]byte(impostorCA))
	if err != nil {
		t.Fatal(err)
	}
	services.set(&auth.Response{ServingKey: "key-1", Identity: &auth.Identity{
		ClusterID: "provider-1", ClusterName: "provider", APIServerURL: "https://203.0.113.9:6443", Namespace: "liqo", CACert: impostorCA,
	}}, nil)
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionCATrusted); cond == nil || cond.Status != metav1.ConditionFalse {
			return fmt.Errorf("CATrusted %+v with a changed CA, want False", cond)
		}
		if fc.Status.PendingCAFingerprint != impostorFP {
			return fmt.Errorf("pending CA %q, want the one presented, %s", fc.Status.PendingCAFingerprint, impostorFP)
		}
		return nil
	})
	envtest.Consistently(t, time.Second, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
			return err
		}
		if fc.Status.APIServerURL != "https://198.51.100.7:6443" {
			return fmt.Errorf("the API server address moved to %q on the word of an untrusted CA", fc.Status.APIServerURL)
		}
		return nil
	})
	if err := c.Get(ctx, client.ObjectKey{Namespace: install.DefaultNamespace, Name: CASecretName("provider-1")}, &pinned); err != nil {
		t.Fatal(err)
	}
	if string(pinned.Data[CASecretKey]) != realCA {
		t.Fatal("the pinned CA was replaced by the untrusted one")
	}

	// Marked untrusted meanwhile: the CA presented is still shown as
	// pending (it is not the one stored), so trusting again names it.
	annotate := func(k, v string) {
		t.Helper()
		patch := client.MergeFrom(fc.DeepCopy())
		if fc.Annotations == nil {
			fc.Annotations = map[string]string{}
		}
		if v == "" {
			delete(fc.Annotations, k)
		} else {
			fc.Annotations[k] = v
		}
		if err := c.Patch(ctx, fc, patch); err != nil {
			t.Fatal(err)
		}
	}
	annotate(discoveryv1alpha1.UntrustedCAAnnotation, "true")
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionCATrusted)
		if cond == nil || cond.Reason != "Untrusted" || fc.Status.PendingCAFingerprint != impostorFP {
			return fmt.Errorf("CATrusted %+v, pending %q; want Untrusted with %s pending", cond, fc.Status.PendingCAFingerprint, impostorFP)
		}
		return nil
	})
	annotate(discoveryv1alpha1.UntrustedCAAnnotation, "")

	// Another serving key: whoever answers is not the service first met.
	services.set(&auth.Response{ServingKey: "key-2", Identity: &auth.Identity{ClusterID: "provider-1", CACert: realCA}}, nil)
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionReachable)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != reasonAuthKeyChanged {
			return fmt.Errorf("Reachable %+v, want False (%s)", cond, reasonAuthKeyChanged)
		}
		if fc.Status.PendingAuthKeyFingerprint != "key-2" || fc.Status.AuthServiceKeyFingerprint != "key-1" || fc.Status.PendingCAFingerprint != "" {
			return fmt.Errorf("auth key pinned %q, pending %q (pending CA %q); want key-1 pinned, key-2 pending and no CA pending behind an unknown key",
				fc.Status.AuthServiceKeyFingerprint, fc.Status.PendingAuthKeyFingerprint, fc.Status.PendingCAFingerprint)
		}
		return nil
	})

	// Unreachable: said in the condition, nothing else changes.
	services.set(nil, errors.New("dial tcp: i/o timeout"))
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionReachable); cond == nil || cond.Reason != "AuthServiceUnreachable" {
			return fmt.Errorf("Reachable %+v, want AuthServiceUnreachable", cond)
		}
		return nil
	})
	if fc.Spec.ClusterIdentity.ClusterID != "provider-1" {
		t.Errorf("identity changed while the service was unreachable: %+v", fc.Spec.ClusterIdentity)
	}
}

// TestMergedSourcesSurviveAConflict: the copy discovery made of a cluster
// then added by hand gives way to the manual one and hands over its
// sources, also when the first status write meets another writer's (a
// conflict): the copy goes only once they are written.
func TestMergedSourcesSurviveAConflict(t *testing.T) {
	cfg, c := envtest.StartInstalled(t, "consumer")
	ctx := t.Context()
	copied := &discoveryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "provider-1", Labels: map[string]string{
			discoveryv1alpha1.ClusterIDLabel: "provider-1", discoveryv1alpha1.DiscoveryTypeLabel: string(discoveryv1alpha1.LanDiscovery),
		}},
		Spec: discoveryv1alpha1.ForeignClusterSpec{
			ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: "provider-1"}, ForeignAuthURL: "https://198.51.100.7:30443",
		},
	}
	if err := c.Create(ctx, copied); err != nil {
		t.Fatal(err)
	}
	copied.Status.Sources = []discoveryv1alpha1.DiscoverySource{{Name: "mdns", Type: discoveryv1alpha1.LanDiscovery, LastSeen: metav1.Now()}}
	if err := c.Status().Update(ctx, copied); err != nil {
		t.Fatal(err)
	}
	services := &authService{}
	services.set(&auth.Response{ServingKey: "key-1", Identity: &auth.Identity{
		ClusterID: "provider-1", ClusterName: "provider", APIServerURL: "https://198.51.100.7:6443", Namespace: "liqo", CACert: selfSignedCA(t, "provider-ca"),
	}}, nil)
	// The first status write to the manual ForeignCluster is lost to
	// another writer.
	var once sync.Once
	envtest.StartManager(t, cfg, func(mgr ctrl.Manager) error {
		direct, err := client.NewWithWatch(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
		if err != nil {
			return err
		}
		conflicting := interceptor.NewClient(direct, interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				var err error
				if obj.GetName() == "by-hand" {
					once.Do(func() {
						err = apierrors.NewConflict(discoveryv1alpha1.GroupVersion.WithResource("foreignclusters").GroupResource(), "by-hand", errors.New("another writer"))
					})
				}
				if err != nil {
					return err
				}
				return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		})
		return (&Reconciler{
			Client: conflicting, APIReader: mgr.GetAPIReader(), Namespace: install.DefaultNamespace, LocalClusterID: "consumer-1",
			Choices: &Choices{Client: mgr.GetClient(), Namespace: install.DefaultNamespace}, GetIdentity: services.get, Resync: 200 * time.Millisecond,
		}).SetupWithManager(mgr)
	})
	fc := &discoveryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand"},
		Spec:       discoveryv1alpha1.ForeignClusterSpec{ForeignAuthURL: "https://198.51.100.7:30443"},
	}
	if err := c.Create(ctx, fc); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		var list discoveryv1alpha1.ForeignClusterList
		if err := c.List(ctx, &list, client.MatchingLabels{discoveryv1alpha1.ClusterIDLabel: "provider-1"}); err != nil {
			return err
		}
		if len(list.Items) != 1 || list.Items[0].Name != fc.Name {
			return fmt.Errorf("%d ForeignClusters of provider-1, want by-hand alone", len(list.Items))
		}
		for _, s := range list.Items[0].Status.Sources {
			if s.Name == "mdns" {
				return nil
			}
		}
		return fmt.Errorf("sources %+v: the copy's mdns source was not handed over", list.Items[0].Status.Sources)
	})
}
