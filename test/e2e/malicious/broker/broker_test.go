// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package broker_test plays peers turned hostile against a broker and the
// clusters around it, with the credentials their peerings gave them:
// cluster-1 consumes through the broker, cluster-2 provides to the broker
// and consumes it too (the attacker, in either role), cluster-3 provides
// to the broker and runs cluster-1's pods. No consumer may read or change
// another's selection, no provider may steer a consumer's pods, a
// consumer may not mark its pods for another cluster's reach, and only a
// broker a provider accepts may introduce consumers to it.
package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/broker"
	ctlbroker "github.com/liqo-go/liqo/internal/ctl/broker"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

var suite *framework.Suite

// ns is the consumer's namespace offloaded to the broker, and replicas
// its Deployment's pods.
const (
	ns       = "orchestrated"
	replicas = 5
)

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, framework.Options{
		Clusters: 3,
		Broker:   []string{"catalog", "orchestrator"},
		ClusterConfig: func(_ string, spec *configv1alpha1.ClusterConfigSpec) {
			spec.DiscoveryConfig.EnableDiscovery = ptr.To(false)
			spec.DiscoveryConfig.EnableAdvertisement = ptr.To(false)
			spec.PeeringConfig.ReconcilePeriodSeconds = 3
		},
	}, &suite))
}

// call asks the broker's API, with token when set.
func call(t *testing.T, method, path, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, suite.Broker.BrokerURL+path, nil)
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
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// login is what `liqoctl broker login` prints on m: a token of the
// service account the broker keeps for it.
func login(t *testing.T, m *playground.Member) string {
	t.Helper()
	o := &ctlbroker.Options{Kubeconfig: m.Kubeconfig, Namespace: install.DefaultNamespace, Broker: suite.Broker.ClusterID, TTL: time.Hour, Timeout: 10 * time.Second}
	var token string
	framework.Eventually(t, 30*time.Second, func() error {
		var err error
		token, err = o.Login(t.Context())
		return err
	})
	return token
}

// placement counts, by virtual node, the pods the broker runs for
// consumer's ns.
func placement(t *testing.T, consumer *playground.Member) map[string]int {
	t.Helper()
	var list corev1.PodList
	if err := framework.Client(t, suite.Broker).List(t.Context(), &list, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumer.ClusterID}); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range list.Items {
		if strings.HasPrefix(p.Namespace, ns+"-") && p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			out[p.Spec.NodeName]++
		}
	}
	return out
}

// orchestratedNamespace is the namespace the broker made for consumer's
// ns.
func orchestratedNamespace(t *testing.T, consumer *playground.Member) string {
	t.Helper()
	var namespaces corev1.NamespaceList
	if err := framework.Client(t, suite.Broker).List(t.Context(), &namespaces, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumer.ClusterID}); err != nil {
		t.Fatal(err)
	}
	for _, n := range namespaces.Items {
		if strings.HasPrefix(n.Name, ns+"-") {
			return n.Name
		}
	}
	t.Fatalf("the broker made no namespace for %s's %s", consumer.Name, ns)
	return ""
}

// brokerMiB is the resident memory of the broker's controller manager.
func brokerMiB(t *testing.T) float64 {
	t.Helper()
	for _, p := range suite.Broker.Processes() {
		if p.Name == playground.ControllerManager {
			return framework.ResidentMiB(t, p.PID)
		}
	}
	t.Fatal("no controller manager process in the broker")
	return 0
}

// TestBrokerAbuse runs, on one set-up (the broker consuming cluster-2 and
// cluster-3, cluster-1 and cluster-2 consuming the broker, cluster-1's
// Deployment orchestrated to cluster-3), each peer's attack in turn.
func TestBrokerAbuse(t *testing.T) {
	consumer, attacker, provider, b := suite.Members[0], suite.Members[1], suite.Members[2], suite.Broker
	framework.LogOnFailure(t, consumer, attacker, provider, b)
	ctx := t.Context()

	framework.AddWithToken(t, b, attacker)
	framework.AddWithToken(t, b, provider)
	framework.WaitVirtualNodesReady(t, b, attacker, provider)
	framework.AddWithToken(t, consumer, b)
	framework.AddWithToken(t, attacker, b)
	framework.WaitVirtualNodesReady(t, consumer, b)
	framework.WaitVirtualNodesReady(t, attacker, b)
	one, two := login(t, consumer), login(t, attacker)
	if code, body := call(t, http.MethodPost, "/api/toggle?id="+provider.ClusterID+"&enable=true", one); code != http.StatusOK {
		t.Fatalf("the consumer enabling %s: %d %s", provider.Name, code, body)
	}
	framework.Offload(t, consumer, []*playground.Member{b}, ns, offloadingv1alpha1.NamespaceOffloadingSpec{
		PodOffloadingStrategy: offloadingv1alpha1.PodOffloadingRemote,
		ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: offloadingv1alpha1.RemoteClusterLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{b.ClusterID}},
		}}}},
	}, 1)
	// The consumer's pods claim to be for the attacker: the label that
	// opens a provider's network to a cluster.
	labels := map[string]string{"app": "web", offloadingv1alpha1.ForClusterLabel: attacker.ClusterID}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "pause"}}}},
	}}
	if err := framework.Client(t, consumer).Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	vnode, err := framework.VirtualNode(framework.Client(t, b), provider.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func() error {
		if got := placement(t, consumer); got[vnode.Name] != replicas || len(got) != 1 {
			return fmt.Errorf("the broker runs the consumer's pods on %v, want all %d on %s", got, replicas, vnode.Name)
		}
		return nil
	})

	t.Run("consumers neither see nor change each other's selection", func(t *testing.T) {
		for _, path := range []string{
			"/api/v1/selection?consumer=" + consumer.ClusterID,
			"/api/toggle?id=" + attacker.ClusterID + "&enable=true&consumer=" + consumer.ClusterID,
		} {
			for _, method := range []string{http.MethodGet, http.MethodPost} {
				if method == http.MethodPost && strings.Contains(path, "selection") {
					continue
				}
				if code, body := call(t, method, path, two); code != http.StatusForbidden {
					t.Errorf("%s %s with the other consumer's token: %d %s, want 403", method, path, code, body)
				}
			}
		}
		if code, body := call(t, http.MethodPost, "/api/toggle?id="+attacker.ClusterID+"&enable=true", ""); code != http.StatusUnauthorized {
			t.Errorf("an anonymous toggle: %d %s, want 401", code, body)
		}
		if code, body := call(t, http.MethodPost, "/api/toggle?id="+attacker.ClusterID+"&enable=true", "not-a-token"); code != http.StatusUnauthorized {
			t.Errorf("a toggle with a made-up token: %d %s, want 401", code, body)
		}
		// The attacker's own identity in the broker, which logs it in,
		// mints tokens for its own service account only; that token, used
		// on the broker's API server itself, reaches its own Selection and
		// nothing of the consumer's.
		cs := kubernetes.NewForConfigOrDie(framework.IdentityConfig(t, attacker, b.ClusterID))
		_, err := cs.CoreV1().ServiceAccounts(discoveryv1alpha1.TenantNamespace(consumer.ClusterID)).CreateToken(ctx, brokerv1alpha1.ConsumerServiceAccount,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		framework.Refused(t, "minting a token of the consumer's service account", err)
		_, err = cs.CoreV1().ServiceAccounts(discoveryv1alpha1.TenantNamespace(attacker.ClusterID)).CreateToken(ctx, "default",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		framework.Refused(t, "minting a token of another service account of its own tenant namespace", err)
		withToken := rest.AnonymousClientConfig(b.RESTConfig)
		withToken.BearerToken = two
		asTwo := framework.ClientFor(t, withToken)
		var theirs brokerv1alpha1.Selection
		framework.Refused(t, "reading the consumer's Selection with the token", asTwo.Get(ctx,
			client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer.ClusterID), Name: brokerv1alpha1.SelectionName}, &theirs))
		var all brokerv1alpha1.SelectionList
		framework.Refused(t, "listing every Selection with the token", asTwo.List(ctx, &all))
		var intros discoveryv1alpha1.IntroductionList
		framework.Refused(t, "listing the broker's Introductions with the token", asTwo.List(ctx, &intros, client.InNamespace(install.DefaultNamespace)))
		var secrets corev1.SecretList
		framework.Refused(t, "listing Secrets of its tenant namespace with the token", asTwo.List(ctx, &secrets, client.InNamespace(discoveryv1alpha1.TenantNamespace(attacker.ClusterID))))
		var own brokerv1alpha1.Selection
		framework.Allowed(t, "reading its own Selection with the token", asTwo.Get(ctx,
			client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(attacker.ClusterID), Name: brokerv1alpha1.SelectionName}, &own))
		// The consumer's selection is as it made it.
		code, body := call(t, http.MethodGet, "/api/v1/selection", one)
		var v broker.SelectionView
		if code != http.StatusOK || json.Unmarshal(body, &v) != nil || !slices.Equal(v.Providers, []string{provider.ClusterID}) {
			t.Errorf("the consumer's selection: %d %s, want %s alone", code, body, provider.Name)
		}
	})

	t.Run("a consumer's view is its own, and bounded", func(t *testing.T) {
		// The attacker's own identity in the broker, with which its
		// controller manager writes its view of its providers.
		asAttacker := framework.ClientFor(t, framework.IdentityConfig(t, attacker, b.ClusterID))
		theirs := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer.ClusterID), Name: brokerv1alpha1.ConsumerViewName}
		var v brokerv1alpha1.ConsumerView
		framework.Refused(t, "reading the consumer's view", asAttacker.Get(ctx, theirs, &v))
		lie := brokerv1alpha1.ConsumerViewSpec{CheckedAt: &metav1.Time{Time: time.Now()},
			Providers: []brokerv1alpha1.ProviderSight{{ClusterID: provider.ClusterID, Answered: true}}}
		framework.Refused(t, "writing the consumer's view", asAttacker.Update(ctx, &brokerv1alpha1.ConsumerView{
			ObjectMeta: metav1.ObjectMeta{Namespace: theirs.Namespace, Name: theirs.Name, ResourceVersion: "1"}, Spec: lie}))
		framework.Refused(t, "making a view in the consumer's tenant namespace", asAttacker.Create(ctx, &brokerv1alpha1.ConsumerView{
			ObjectMeta: metav1.ObjectMeta{Namespace: theirs.Namespace, Name: "other"}, Spec: lie}))
		framework.Refused(t, "making a second view in its own tenant namespace", asAttacker.Create(ctx, &brokerv1alpha1.ConsumerView{
			ObjectMeta: metav1.ObjectMeta{Namespace: discoveryv1alpha1.TenantNamespace(attacker.ClusterID), Name: "other"}, Spec: lie}))
		// Its own, which the broker made: it may write it, within bounds.
		own := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(attacker.ClusterID), Name: brokerv1alpha1.ConsumerViewName}
		framework.Eventually(t, 30*time.Second, func() error { return asAttacker.Get(ctx, own, &v) })
		for i := range brokerv1alpha1.MaxViewedProviders + 1 {
			v.Spec.Providers = append(v.Spec.Providers, brokerv1alpha1.ProviderSight{ClusterID: fmt.Sprintf("p-%d", i), Answered: true})
		}
		err := asAttacker.Update(ctx, &v)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.providers") {
			t.Errorf("a view of %d providers: %v, want refused naming spec.providers", len(v.Spec.Providers), err)
		}
		v.Spec = lie
		framework.Allowed(t, "writing its own view", asAttacker.Update(ctx, &v))
		// The consumer's view is as the broker made it (the consumer has
		// no brokered peerings here, so it writes none): nothing of the
		// attacker's in it, no other view beside it.
		bc := framework.Client(t, b)
		var consumers brokerv1alpha1.ConsumerView
		if err := bc.Get(ctx, theirs, &consumers); err != nil || len(consumers.Spec.Providers) != 0 || consumers.Spec.CheckedAt != nil {
			t.Errorf("the consumer's view after the attacker's tries: %+v (%v), want it empty", consumers.Spec, err)
		}
		var views brokerv1alpha1.ConsumerViewList
		if err := bc.List(ctx, &views, client.InNamespace(theirs.Namespace)); err != nil || len(views.Items) != 1 {
			t.Errorf("views in the consumer's tenant namespace: %d (%v), want its own alone", len(views.Items), err)
		}
		// The token its users log in with reaches the Selection only.
		withToken := rest.AnonymousClientConfig(b.RESTConfig)
		withToken.BearerToken = two
		framework.Refused(t, "reading its own view with the login token", framework.ClientFor(t, withToken).Get(ctx, own, &v))
	})

	t.Run("a provider cannot steer a consumer's pods", func(t *testing.T) {
		// The attacker's own credentials in the broker: as a provider to
		// it, and as a consumer of it (its virtual kubelet).
		asProvider := framework.ClientFor(t, framework.ProviderConfig(t, attacker, b.ClusterID))
		asVK := framework.ClientFor(t, framework.VirtualKubeletConfig(t, attacker, b))
		sel := &brokerv1alpha1.Selection{ObjectMeta: metav1.ObjectMeta{Namespace: discoveryv1alpha1.TenantNamespace(consumer.ClusterID), Name: brokerv1alpha1.SelectionName},
			Spec: brokerv1alpha1.SelectionSpec{Providers: []string{attacker.ClusterID}}}
		framework.Refused(t, "creating the consumer's selection", asProvider.Create(ctx, sel))
		framework.Refused(t, "changing the consumer's selection", asProvider.Update(ctx, sel))
		framework.Refused(t, "changing the consumer's selection as a consumer", asVK.Update(ctx, sel))
		var namespaces corev1.NamespaceList
		framework.Refused(t, "listing the broker's namespaces", asProvider.List(ctx, &namespaces))
		var consumerNS string
		if err := framework.Client(t, b).List(ctx, &namespaces); err != nil {
			t.Fatal(err)
		}
		for _, n := range namespaces.Items {
			if n.Labels[offloadingv1alpha1.OriginClusterLabel] == consumer.ClusterID && strings.HasPrefix(n.Name, ns+"-") {
				consumerNS = n.Name
			}
		}
		if consumerNS == "" {
			t.Fatalf("the broker made no namespace for %s's %s", consumer.Name, ns)
		}
		steer := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: consumerNS, Annotations: map[string]string{brokerv1alpha1.ProvidersAnnotation: attacker.ClusterID}}}
		for what, c := range map[string]client.Client{"as a provider": asProvider, "as a consumer": asVK} {
			framework.Refused(t, "re-annotating the consumer's namespace "+what, c.Patch(ctx, steer, client.Merge))
			no := &offloadingv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: consumerNS, Name: offloadingv1alpha1.NamespaceOffloadingName}}
			framework.Refused(t, "deleting the consumer's namespace's offloading "+what, c.Delete(ctx, no))
		}
		framework.Consistently(t, 3*time.Second, func() error {
			if got := placement(t, consumer); got[vnode.Name] != replicas || len(got) != 1 {
				return fmt.Errorf("the consumer's pods moved: %v", got)
			}
			return nil
		})
	})

	t.Run("a consumer cannot mark its pods for another cluster", func(t *testing.T) {
		// What the broker writes in the provider names the consumer, from
		// the broker's own origin label, whatever the consumer's pods say:
		// the attacker gets no reach into the provider's network.
		var pods corev1.PodList
		if err := framework.Client(t, provider).List(ctx, &pods, client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: b.ClusterID}); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != replicas {
			t.Fatalf("%s runs %d pods for the broker, want %d", provider.Name, len(pods.Items), replicas)
		}
		for _, p := range pods.Items {
			if got := p.Labels[offloadingv1alpha1.ForClusterLabel]; got != consumer.ClusterID {
				t.Errorf("%s's pod %s/%s is marked for %q, want the consumer %s", provider.Name, p.Namespace, p.Name, got, consumer.ClusterID)
			}
		}
	})

	t.Run("only a broker the provider accepts introduces consumers to it", func(t *testing.T) {
		// The broker's identities in the provider (an introducer writes
		// with its virtual kubelet's), and the attacker's own once it
		// consumes the provider too.
		framework.AddWithToken(t, attacker, provider)
		framework.WaitVirtualNodesReady(t, attacker, provider)
		asBroker := framework.ClientFor(t, framework.VirtualKubeletConfig(t, b, provider))
		asBrokerControlPlane := framework.ClientFor(t, framework.IdentityConfig(t, b, provider.ClusterID))
		asAttacker := framework.ClientFor(t, framework.VirtualKubeletConfig(t, attacker, provider))
		intro := func(introducer *playground.Member) *discoveryv1alpha1.Introduction {
			return &discoveryv1alpha1.Introduction{
				ObjectMeta: metav1.ObjectMeta{Namespace: discoveryv1alpha1.TenantNamespace(introducer.ClusterID), Name: consumer.ClusterID},
				Spec:       discoveryv1alpha1.IntroductionSpec{Consumer: discoveryv1alpha1.ClusterIdentity{ClusterID: consumer.ClusterID, ClusterName: consumer.Name}},
			}
		}
		framework.Refused(t, "the broker introducing a consumer to a provider that accepts no introducer", asBroker.Create(ctx, intro(b)))
		framework.Refused(t, "a peer that is no broker introducing a consumer", asAttacker.Create(ctx, intro(attacker)))
		framework.SetClusterConfig(t, provider, func(spec *configv1alpha1.ClusterConfigSpec) { spec.PeeringConfig.Introducers = []string{b.ClusterID} })
		framework.Cleanup(t, func(context.Context) {
			framework.SetClusterConfig(t, provider, func(spec *configv1alpha1.ClusterConfigSpec) { spec.PeeringConfig.Introducers = nil })
		})
		// The broker gains the right when its peering is reconciled; the
		// attacker, still not listed, never does, not even in the
		// broker's tenant namespace.
		framework.Eventually(t, time.Minute, func() error {
			in := intro(b)
			if err := asBroker.Create(ctx, in); err != nil {
				return err
			}
			return asBroker.Delete(ctx, in)
		})
		framework.Refused(t, "the broker introducing a consumer with its control plane's identity", asBrokerControlPlane.Create(ctx, intro(b)))
		framework.Refused(t, "a peer that is no broker introducing a consumer, once the provider accepts a broker", asAttacker.Create(ctx, intro(attacker)))
		framework.Refused(t, "a peer writing an introduction in the broker's tenant namespace", asAttacker.Create(ctx, intro(b)))
	})
	t.Run("a consumer's budgets in the broker carry its own ID, where the broker orchestrates it only", func(t *testing.T) {
		// Its virtual kubelet's real identity: the broker lets it keep
		// PodDisruptionBudgets in the namespaces orchestrated for it, which
		// bound the broker's moves of its own pods; unlabelled, or labelled
		// as another cluster's, the broker's cache would hold them whole.
		consumerNS := orchestratedNamespace(t, consumer)
		vk := framework.ClientFor(t, framework.VirtualKubeletConfig(t, consumer, b))
		budget := func(namespace string, labels map[string]string) *policyv1.PodDisruptionBudget {
			return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "hold", Labels: labels},
				Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{}, MinAvailable: ptr.To(intstr.FromInt32(1))}}
		}
		framework.Refused(t, "an unlabelled budget in the orchestrated namespace", vk.Create(ctx, budget(consumerNS, nil)))
		framework.Refused(t, "a budget labelled as another cluster's", vk.Create(ctx, budget(consumerNS,
			map[string]string{offloadingv1alpha1.OriginClusterLabel: attacker.ClusterID})))
		own := map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer.ClusterID}
		framework.Refused(t, "a budget in its tenant namespace", vk.Create(ctx, budget(discoveryv1alpha1.TenantNamespace(consumer.ClusterID), own)))
		mine := budget(consumerNS, own)
		framework.Allowed(t, "its own budget in the orchestrated namespace", vk.Create(ctx, mine))
		if err := vk.Delete(ctx, mine); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
	})

	t.Run("what a consumer stores where the broker orchestrates it does not grow the broker", func(t *testing.T) {
		// A hostile consumer keeps what it stores: its controller manager
		// is stopped, so that no reflector removes the Secrets as orphans.
		// The broker's virtual kubelet knows them by their metadata alone,
		// and reads none whole (no pod uses them).
		consumerNS := orchestratedNamespace(t, consumer)
		framework.StopControllerManager(t, consumer)
		vk := framework.ClientFor(t, framework.VirtualKubeletConfig(t, consumer, b))
		const secrets = 100
		payload := bytes.Repeat([]byte("x"), 1<<20-1024)
		before := brokerMiB(t)
		var wg sync.WaitGroup
		errs := make(chan error, secrets)
		sem := make(chan struct{}, 8)
		for i := range secrets {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: consumerNS, Name: fmt.Sprintf("hoard-%d", i),
					Labels: map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer.ClusterID}}, Data: map[string][]byte{"blob": payload}}
				// Writers by the dozen conflict on the namespace's quota.
				if err := retry.OnError(retry.DefaultBackoff, apierrors.IsConflict, func() error { return vk.Create(ctx, s) }); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("storing a Secret of 1 MiB as the consumer's virtual kubelet: %v", err)
		}
		framework.Cleanup(t, func(ctx context.Context) {
			if err := framework.Client(t, b).DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(consumerNS),
				client.MatchingLabels{offloadingv1alpha1.OriginClusterLabel: consumer.ClusterID}); err != nil {
				t.Errorf("removing the hoarded Secrets: %v", err)
			}
		})
		// Seen by the broker: its quota counts them.
		framework.Eventually(t, 6*time.Minute, func() error {
			var quotas corev1.ResourceQuotaList
			if err := framework.Client(t, b).List(ctx, &quotas, client.InNamespace(consumerNS)); err != nil {
				return err
			}
			for _, q := range quotas.Items {
				if used := q.Status.Used[corev1.ResourceSecrets]; used.Value() >= secrets {
					return nil
				}
			}
			return fmt.Errorf("the quota of %s does not count the %d Secrets yet", consumerNS, secrets)
		})
		after := brokerMiB(t)
		t.Logf("the broker's controller manager: %.0f MiB before %d Secrets of 1 MiB, %.0f MiB after", before, secrets, after)
		if grew := after - before; grew > secrets/4 {
			t.Errorf("the broker's controller manager grew by %.0f MiB with %d MiB a consumer stored", grew, secrets)
		}
	})
}
