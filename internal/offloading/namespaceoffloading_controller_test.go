// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/localcluster/envtest"
)

// TestNamespaceOffloadingAcrossClusters runs the consumer's
// NamespaceOffloading reconciler and the provider's NamespaceMap
// reconciler on two real API servers, the consumer reaching the provider
// with a virtual kubelet identity that has only the rights a peering gives
// it (its tenant namespace's NamespaceMap). A namespace offloaded to the
// provider's virtual node gets its namespace there and turns Ready; a
// remote name reserved in providers is refused by the consumer's schema,
// naming the field; the offloading deleted releases the namespace.
func TestNamespaceOffloadingAcrossClusters(t *testing.T) {
	const consumerID, providerID = "consumer-1", "provider-1"
	consumer := envtest.StartCluster(t, "consumer")
	provider := envtest.StartCluster(t, "provider")
	envtest.SignCSRs(t, provider)
	envtest.CountQuotas(t, provider)
	ctx := t.Context()
	clientOf := func(c *localcluster.Cluster) client.Client {
		t.Helper()
		if err := install.Install(ctx, c.RESTConfig, install.Options{}); err != nil {
			t.Fatal(err)
		}
		cl, err := client.New(c.RESTConfig, client.Options{Scheme: api.NewScheme()})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	inConsumer, inProvider := clientOf(consumer), clientOf(provider)

	// The provider's side of an accepted peering: the request, the tenant
	// namespace, and the virtual kubelet's Role there.
	tenant := discoveryv1alpha1.TenantNamespace(consumerID)
	vkUser := identity.VirtualKubeletUserPrefix + consumerID
	for _, obj := range []client.Object{
		&discoveryv1alpha1.PeeringRequest{
			ObjectMeta: metav1.ObjectMeta{Name: consumerID},
			Spec: discoveryv1alpha1.PeeringRequestSpec{
				ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: consumerID}, Namespace: "liqo",
				APIServerURL: consumer.APIServerURL, CACert: "ca", ProviderCertificate: "cert",
			},
		},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "vk"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"offloading.liqo.io"}, Resources: []string{"namespacemaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"offloading.liqo.io"}, Resources: []string{"namespacemaps/status"}, Verbs: []string{"get"}},
		}},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "vk"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "vk"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: vkUser}},
		},
	} {
		if err := inProvider.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T: %v", obj, err)
		}
	}
	// The consumer's identity Secret with the virtual kubelet's key and
	// the certificate the provider signed.
	key, csr, err := identity.NewKeyAndCSR(vkUser)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := identity.Issue(ctx, inProvider, nil, csr, vkUser, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	providerCA, err := os.ReadFile(provider.CACertPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := inConsumer.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: install.DefaultNamespace, Name: identity.RemoteSecretName(providerID)},
		Data: map[string][]byte{
			identity.ServerKey: []byte(provider.APIServerURL), identity.CAKey: providerCA,
			identity.VirtualKubeletCertKey: cert, identity.VirtualKubeletKeyKey: key,
		},
	}); err != nil {
		t.Fatal(err)
	}
	if err := inConsumer.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "liqo-provider", Labels: map[string]string{
		offloadingv1alpha1.VirtualNodeLabel: offloadingv1alpha1.VirtualNodeValue, offloadingv1alpha1.RemoteClusterLabel: providerID,
	}}}); err != nil {
		t.Fatal(err)
	}

	// Released with nothing kept: the virtual kubelet closes every view
	// of the namespace.
	var releasedMu sync.Mutex
	var releasedAll []string
	envtest.StartManager(t, consumer.RESTConfig, func(mgr ctrl.Manager) error {
		remotes := &identity.Remotes{Client: mgr.GetClient(), Namespace: install.DefaultNamespace, Scheme: mgr.GetScheme()}
		return (&NamespaceOffloadingReconciler{
			Client: mgr.GetClient(), Remotes: remotes, LocalClusterID: consumerID,
			Released: func(local string, keep map[string]bool) {
				if len(keep) == 0 {
					releasedMu.Lock()
					releasedAll = append(releasedAll, local)
					releasedMu.Unlock()
				}
			},
		}).SetupWithManager(mgr)
	})
	startNamespaceMapReconciler(t, provider.RESTConfig)

	offload := func(ns string, spec offloadingv1alpha1.NamespaceOffloadingSpec) *offloadingv1alpha1.NamespaceOffloading {
		t.Helper()
		if err := inConsumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		no := &offloadingv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: offloadingv1alpha1.NamespaceOffloadingName}, Spec: spec}
		if err := inConsumer.Create(ctx, no); err != nil {
			t.Fatal(err)
		}
		return no
	}
	ready := func(ctx context.Context, no *offloadingv1alpha1.NamespaceOffloading) (*metav1.Condition, error) {
		if err := inConsumer.Get(ctx, client.ObjectKeyFromObject(no), no); err != nil {
			return nil, err
		}
		return meta.FindStatusCondition(no.Status.Conditions, offloadingv1alpha1.ConditionReady), nil
	}

	web := offload("web", offloadingv1alpha1.NamespaceOffloadingSpec{})
	remoteName := RemoteNamespaceName("web", consumerID, &web.Spec)
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		c, err := ready(ctx, web)
		if err != nil {
			return err
		}
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %+v, want True", c)
		}
		if got, ok := web.ReadyRemoteNamespace(providerID); !ok || got != remoteName {
			return fmt.Errorf("remote namespaces %+v, want %s ready in %s", web.Status.RemoteNamespaces, remoteName, providerID)
		}
		return nil
	})
	var ns corev1.Namespace
	if err := inProvider.Get(ctx, client.ObjectKey{Name: remoteName}, &ns); err != nil {
		t.Fatalf("the namespace in the provider: %v", err)
	}
	if ns.Labels[offloadingv1alpha1.OriginClusterLabel] != consumerID {
		t.Errorf("provider namespace labels %v, want %s=%s", ns.Labels, offloadingv1alpha1.OriginClusterLabel, consumerID)
	}

	// A remote name reserved in providers is refused at once, by the
	// schema, naming the field; the provider is never asked.
	if err := inConsumer.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "system"}}); err != nil {
		t.Fatal(err)
	}
	err = inConsumer.Create(ctx, &offloadingv1alpha1.NamespaceOffloading{
		ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: offloadingv1alpha1.NamespaceOffloadingName},
		Spec: offloadingv1alpha1.NamespaceOffloadingSpec{
			NamespaceMappingStrategy: offloadingv1alpha1.SelectedNameMapping, RemoteNamespaceName: "kube-system",
		},
	})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.remoteNamespaceName") {
		t.Errorf("offloading to kube-system: %v, want Invalid naming spec.remoteNamespaceName", err)
	}
	var nm offloadingv1alpha1.NamespaceMap
	if err := inProvider.Get(ctx, client.ObjectKey{Namespace: tenant, Name: offloadingv1alpha1.NamespaceMapName}, &nm); err != nil {
		t.Fatal(err)
	}
	if _, ok := nm.Spec.Mappings["system"]; ok {
		t.Errorf("the provider was asked for kube-system: mappings %v", nm.Spec.Mappings)
	}

	// A pod this cluster's virtual kubelet left there (its provider did
	// not answer when the pod was moved) goes with the release, whatever
	// the provider's own namespace deletion does; the provider's own pod
	// there is not this cluster's to delete.
	left := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: remoteName, Name: "left", Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: consumerID}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}
	theirs := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: remoteName, Name: "theirs"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}
	if err := inProvider.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: remoteName, Name: "default"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// As the provider's admin, past the offer's quota (no offer here):
	// removed before each try, as the provider's controller manager makes
	// it again (a CI run saw the second pod refused by it).
	for _, pod := range []*corev1.Pod{left, theirs} {
		envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
			if err := inProvider.DeleteAllOf(ctx, &corev1.ResourceQuota{}, client.InNamespace(remoteName)); err != nil {
				return err
			}
			err := inProvider.Create(ctx, pod.DeepCopy())
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
	}
	if err := inConsumer.Delete(ctx, web); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		var pod corev1.Pod
		if err := inProvider.Get(ctx, client.ObjectKeyFromObject(left), &pod); err == nil && pod.DeletionTimestamp.IsZero() {
			return errors.New("this cluster's pod left in the provider is still there after the release")
		}
		return nil
	})
	var own corev1.Pod
	if err := inProvider.Get(ctx, client.ObjectKeyFromObject(theirs), &own); err != nil || !own.DeletionTimestamp.IsZero() {
		t.Errorf("the provider's own pod in the namespace: %v, deleting %v; the release deleted it", err, own.DeletionTimestamp)
	}
	envtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		err := inProvider.Get(ctx, client.ObjectKey{Name: remoteName}, &ns)
		if apierrors.IsNotFound(err) || (err == nil && !ns.DeletionTimestamp.IsZero()) {
			return nil
		} else if err != nil {
			return err
		}
		return errors.New("the provider namespace stays after the offloading went")
	})
	envtest.Eventually(t, 10*time.Second, func(ctx context.Context) error {
		err := inConsumer.Get(ctx, client.ObjectKeyFromObject(web), web)
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		return fmt.Errorf("the NamespaceOffloading is still there, finalizers %v", web.Finalizers)
	})
	releasedMu.Lock()
	defer releasedMu.Unlock()
	if !slices.Contains(releasedAll, "web") {
		t.Errorf("the virtual kubelet was not told to release web's views (released: %v)", releasedAll)
	}
}
