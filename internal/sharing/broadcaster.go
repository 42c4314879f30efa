// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package sharing

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
)

// AdvertisementName is the name of the Advertisement provider writes into
// its tenant namespace in a consumer.
func AdvertisementName(providerID string) string { return "advertisement-" + providerID }

// Defaults of the Broadcaster.
const (
	// DefaultTTL is how long an Advertisement is valid unless refreshed; it
	// is refreshed at half of it.
	DefaultTTL = 2 * time.Minute
	// ChangeThreshold is the change, in percent of a resource, that makes
	// the Broadcaster refresh an Advertisement before its time.
	ChangeThreshold = 5
	// ConditionAdvertised is the PeeringRequest condition the Broadcaster
	// sets.
	ConditionAdvertised = "Advertised"
)

// PeerKubeconfig returns the kubeconfig this provider holds for consumer,
// as the peering stored it; nil when there is none yet.
type PeerKubeconfig func(ctx context.Context, consumerID string) ([]byte, error)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// Broadcaster offers each accepted consumer a share of this cluster's free
// resources, in an Advertisement in the consumer's tenant namespace.
type Broadcaster struct {
	// Client reads nodes and pods (cached) and PeeringRequests.
	Client client.Client
	// Scheme builds clients for the consumers.
	Scheme *runtime.Scheme
	// LocalClusterID and LocalClusterName identify this cluster.
	LocalClusterID string
	// LocalClusterName returns the name in force.
	LocalClusterName func() string
	// Config returns the ClusterConfig in force.
	Config func() *configv1alpha1.ClusterConfig
	// Kubeconfig returns the kubeconfig for a consumer.
	Kubeconfig PeerKubeconfig
	// TTL of the Advertisements; DefaultTTL when 0.
	TTL time.Duration
	// Now is injectable for tests.
	Now func() time.Time
	// Changes receives a value when the ClusterConfig changed (the share
	// percentage, the switch): every offer is recomputed.
	Changes <-chan struct{}
}

func (b *Broadcaster) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

func (b *Broadcaster) ttl() time.Duration {
	if b.TTL == 0 {
		return DefaultTTL
	}
	return b.TTL
}

// sharing returns whether the broadcaster is on and the share percentage.
func (b *Broadcaster) sharing() (bool, int32) {
	on, pct := true, int32(50)
	if cc := b.Config(); cc != nil {
		if cc.Spec.SharingConfig.EnableBroadcaster != nil {
			on = *cc.Spec.SharingConfig.EnableBroadcaster
		}
		pct = cc.Spec.SharingConfig.SharePercentage
	}
	return on, pct
}

// Reconcile implements reconcile.Reconciler.
func (b *Broadcaster) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pr discoveryv1alpha1.PeeringRequest
	if err := b.Client.Get(ctx, req.NamespacedName, &pr); err != nil {
		// Gone: the peering's revocation deletes the Advertisement.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	consumer := pr.Spec.ClusterIdentity.ClusterID
	if !pr.DeletionTimestamp.IsZero() || !meta.IsStatusConditionTrue(pr.Status.Conditions, discoveryv1alpha1.PeeringRequestAccepted) {
		return ctrl.Result{}, nil
	}
	remote, err := b.remote(ctx, consumer)
	if err != nil || remote == nil {
		return ctrl.Result{RequeueAfter: 5 * time.Second}, err
	}
	on, pct := b.sharing()
	key := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(b.LocalClusterID), Name: AdvertisementName(b.LocalClusterID)}
	if !on {
		err := remote.Delete(ctx, &sharingv1alpha1.Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
		return ctrl.Result{}, b.setCondition(ctx, &pr, metav1.ConditionFalse, "BroadcasterDisabled",
			"spec.sharingConfig.enableBroadcaster is false: nothing is offered", client.IgnoreNotFound(err))
	}

	var nodes corev1.NodeList
	if err := b.Client.List(ctx, &nodes); err != nil {
		return ctrl.Result{}, err
	}
	var pods corev1.PodList
	if err := b.Client.List(ctx, &pods); err != nil {
		return ctrl.Result{}, err
	}
	offer := Shared(nodes.Items, pods.Items, consumer, pct)
	now := b.now()
	want := sharingv1alpha1.AdvertisementSpec{
		ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: b.LocalClusterID, ClusterName: b.LocalClusterName()},
		Resources:       offer,
		Labels:          commonLabels(nodes.Items),
		Timestamp:       metav1.NewTime(now),
		TimeToLive:      metav1.NewTime(now.Add(b.ttl())),
		KubeconfigSecretRef: &discoveryv1alpha1.SecretReference{
			Namespace: pr.Spec.Namespace, Name: "liqo-remote-identity-" + b.LocalClusterID,
		},
	}

	var adv sharingv1alpha1.Advertisement
	err = remote.Get(ctx, key, &adv)
	switch {
	case apierrors.IsNotFound(err):
		adv = sharingv1alpha1.Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Spec: want}
		if err := remote.Create(ctx, &adv); err != nil {
			return ctrl.Result{RequeueAfter: 5 * time.Second}, b.setCondition(ctx, &pr, metav1.ConditionFalse, "WriteFailed", "Creating the Advertisement failed: "+err.Error(), nil)
		}
	case err != nil:
		return ctrl.Result{RequeueAfter: 5 * time.Second}, b.setCondition(ctx, &pr, metav1.ConditionFalse, "ConsumerUnreachable", "Reading the Advertisement failed: "+err.Error(), nil)
	case ChangedBeyond(adv.Spec.Resources, want.Resources, ChangeThreshold) || now.After(adv.Spec.TimeToLive.Add(-b.ttl()/2)) ||
		!equalStrings(adv.Spec.Labels, want.Labels) || adv.Spec.ClusterIdentity != want.ClusterIdentity:
		adv.Spec = want
		if err := remote.Update(ctx, &adv); err != nil {
			return ctrl.Result{RequeueAfter: 5 * time.Second}, b.setCondition(ctx, &pr, metav1.ConditionFalse, "WriteFailed", "Refreshing the Advertisement failed: "+err.Error(), nil)
		}
	}
	// Refresh before half the time-to-live is gone.
	next := time.Until(adv.Spec.TimeToLive.Add(-b.ttl() / 2))
	return ctrl.Result{RequeueAfter: max(next, time.Second)}, b.setCondition(ctx, &pr, metav1.ConditionTrue, "Advertised",
		fmt.Sprintf("Offering %s%% of the free resources: %s", fmt.Sprint(pct), describe(adv.Spec.Resources)), nil)
}

func (b *Broadcaster) remote(ctx context.Context, consumer string) (client.Client, error) {
	kc, err := b.Kubeconfig(ctx, consumer)
	if err != nil || len(kc) == 0 {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig for %s: %w", consumer, err)
	}
	cfg.Timeout = 10 * time.Second
	return client.New(cfg, client.Options{Scheme: b.Scheme})
}

func (b *Broadcaster) setCondition(ctx context.Context, pr *discoveryv1alpha1.PeeringRequest, s metav1.ConditionStatus, reason, msg string, err error) error {
	orig := pr.DeepCopy()
	meta.SetStatusCondition(&pr.Status.Conditions, metav1.Condition{Type: ConditionAdvertised, Status: s, Reason: reason, Message: msg, ObservedGeneration: pr.Generation})
	if c := meta.FindStatusCondition(orig.Status.Conditions, ConditionAdvertised); c != nil && c.Status == s && c.Reason == reason && c.Message == msg {
		return err
	}
	return errors.Join(err, client.IgnoreNotFound(b.Client.Status().Patch(ctx, pr, client.MergeFrom(orig))))
}

// exposedLabels are the node labels worth showing on a virtual node, when
// every real node agrees on them.
var exposedLabels = []string{
	"kubernetes.io/arch", "kubernetes.io/os", "topology.kubernetes.io/region", "topology.kubernetes.io/zone", "node.kubernetes.io/instance-type",
}

func commonLabels(nodes []corev1.Node) map[string]string {
	out := map[string]string{}
	for _, key := range exposedLabels {
		value, seen, same := "", false, true
		for i := range nodes {
			if IsVirtual(&nodes[i]) {
				continue
			}
			v, ok := nodes[i].Labels[key]
			if !ok || (seen && v != value) {
				same = false
				break
			}
			value, seen = v, true
		}
		if seen && same {
			out[key] = value
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func equalStrings(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func describe(l corev1.ResourceList) string {
	s := ""
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		if q, ok := l[name]; ok {
			if s != "" {
				s += ", "
			}
			s += fmt.Sprintf("%s %s", name, q.String())
		}
	}
	return s
}

// SetupWithManager registers the Broadcaster: it recomputes on every
// PeeringRequest change and whenever nodes or pods change.
func (b *Broadcaster) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list discoveryv1alpha1.PeeringRequestList
		if err := mgr.GetClient().List(ctx, &list); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&discoveryv1alpha1.PeeringRequest{}).
		Watches(&corev1.Node{}, all).
		Watches(&corev1.Pod{}, all).
		WatchesRawSource(configSource(mgr, b.Changes, &discoveryv1alpha1.PeeringRequest{}, all)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Named("broadcaster").
		Complete(b)
}

// configSource turns ClusterConfig changes into events for h.
func configSource(mgr ctrl.Manager, changes <-chan struct{}, obj client.Object, h handler.EventHandler) source.Source {
	events := make(chan event.GenericEvent)
	if changes != nil {
		_ = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-changes:
					select {
					case events <- event.GenericEvent{Object: obj}:
					case <-ctx.Done():
						return nil
					}
				}
			}
		}))
	}
	return source.Channel(events, h)
}
