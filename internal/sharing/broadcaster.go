// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package sharing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/clusterconfig"
	"github.com/liqo-go/liqo/internal/identity"
)

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
// +kubebuilder:rbac:groups=broker.liqo.io,resources=selections,verbs=get;list;watch

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

	clients identity.Clients
	mu      sync.Mutex
	written map[string]written // by PeeringRequest name
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
		b.forget(req.Name)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	consumer := pr.Spec.ClusterIdentity.ClusterID
	if !pr.DeletionTimestamp.IsZero() || !meta.IsStatusConditionTrue(pr.Status.Conditions, discoveryv1alpha1.PeeringRequestAccepted) {
		return ctrl.Result{}, nil
	}
	on, pct := b.sharing()
	key := client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(b.LocalClusterID), Name: sharingv1alpha1.AdvertisementName(b.LocalClusterID)}
	if !on {
		b.forget(pr.Name)
		// Nothing offered: the quota of the consumer's namespaces drops to
		// zero at once, whether the consumer can be told or not, so that
		// its credentials start nothing more.
		if err := b.setStatus(ctx, &pr, metav1.ConditionFalse, "BroadcasterDisabled",
			"spec.sharingConfig.enableBroadcaster is false: nothing is offered", nil, nil); err != nil {
			return ctrl.Result{}, err
		}
		remote, err := b.remote(ctx, consumer)
		if err != nil || remote == nil {
			return ctrl.Result{RequeueAfter: 5 * time.Second}, err
		}
		err = remote.Delete(ctx, &sharingv1alpha1.Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	// Nodes and pods come from the cache, uncopied (only read): this runs
	// after every burst of pod changes.
	var nodes corev1.NodeList
	if err := b.Client.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	var pods corev1.PodList
	if err := b.Client.List(ctx, &pods, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	// A consumer a broker orchestrates (it has a Selection here) is
	// offered what the providers it may use offer the broker: those it
	// enabled, or under a policy, all the policy lets it use (chosen for
	// its pods or not: see Selection.Offered).
	counted := RealNode
	var properties map[string]string
	var poolLabels []string
	var sel brokerv1alpha1.Selection
	switch err := b.Client.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace(consumer), Name: brokerv1alpha1.SelectionName}, &sel); {
	case err == nil:
		counted = OnProviders(sel.Offered())
		// Its PodDisruptionBudgets bound the moves of its pods here.
		properties = map[string]string{brokerv1alpha1.OrchestratorProperty: "true"}
		if sel.Aggregated() {
			// The aggregator resells its providers' offers by its own
			// measure, not this cluster's share of its own nodes.
			pct = sel.Spec.Aggregate.Resale()
			poolLabels = sel.Spec.Aggregate.PoolLabels
		}
	case !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err):
		return ctrl.Result{}, err
	}
	now := b.now()
	want := sharingv1alpha1.AdvertisementSpec{
		ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: b.LocalClusterID, ClusterName: b.LocalClusterName()},
		Resources:       SharedOn(nodes.Items, pods.Items, consumer, pct, counted),
		Labels:          commonLabels(nodes.Items, counted),
		Properties:      properties,
		Timestamp:       metav1.NewTime(now),
		TimeToLive:      metav1.NewTime(now.Add(b.ttl())),
	}
	// A sum hides how it is cut up: the consumer learns the largest pod
	// that fits in one piece too.
	want.LargestPods = LargestOn(nodes.Items, counted, pct)
	// Cut by the labels the consumer may choose providers by.
	want.Pools = PoolsOn(nodes.Items, pods.Items, consumer, pct, counted, poolLabels)
	if want.Pools != nil {
		// What one pool lacks (its pods ask more than it has) is not
		// taken from the others: the offer is what the pools offer.
		want.Resources = SumOfPools(want.Pools)
	}
	if cc := b.Config(); cc != nil {
		// Where the consumer's volume claims go (liqo-offloaded-claims).
		want.StorageClass = cc.Status.ConsumerStorageClass
	}
	if cc := b.Config(); cc != nil && cc.Spec.SharingConfig.Price != nil {
		price := cc.Spec.SharingConfig.Price
		want.Prices, want.Currency, want.PricePeriod = price.PerUnit.DeepCopy(), price.Currency, price.Period
	}
	// The consumer is asked only when the offer is new to this
	// PeeringRequest, moved beyond the threshold, or due for a refresh.
	written, fresh := b.lastWritten(&pr, &want, now)
	if !fresh {
		var err error
		if written, err = b.write(ctx, &pr, key, &want); written == nil {
			// Failed (said in the Advertised condition) or no kubeconfig yet.
			return ctrl.Result{RequeueAfter: 5 * time.Second}, err
		}
	}
	// Refresh before half the time-to-live is gone.
	next := time.Until(written.TimeToLive.Add(-b.ttl() / 2))
	// The quota of the consumer's namespaces follows what was offered.
	return ctrl.Result{RequeueAfter: max(next, time.Second)}, b.setStatus(ctx, &pr, metav1.ConditionTrue, "Advertised",
		fmt.Sprintf("Offering %d%% of the free resources: %s", pct, Describe(written.Resources)), written.Resources, nil)
}

// stale reports whether written must be replaced by want.
func (b *Broadcaster) stale(written, want *sharingv1alpha1.AdvertisementSpec, now time.Time) bool {
	return ChangedBeyond(written.Resources, want.Resources, ChangeThreshold) || largestChanged(written.LargestPods, want.LargestPods) || poolsChanged(written.Pools, want.Pools) ||
		now.After(written.TimeToLive.Add(-b.ttl()/2)) ||
		!equalStrings(written.Labels, want.Labels) || !equalStrings(written.Properties, want.Properties) || written.ClusterIdentity != want.ClusterIdentity ||
		!equality.Semantic.DeepEqual(written.Prices, want.Prices) || written.Currency != want.Currency || written.PricePeriod != want.PricePeriod ||
		written.StorageClass != want.StorageClass
}

// lastWritten returns what this process last wrote for pr, and whether it
// is still good.
func (b *Broadcaster) lastWritten(pr *discoveryv1alpha1.PeeringRequest, want *sharingv1alpha1.AdvertisementSpec, now time.Time) (*sharingv1alpha1.AdvertisementSpec, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w, ok := b.written[pr.Name]
	if !ok || w.uid != pr.UID || b.stale(&w.spec, want, now) {
		return nil, false
	}
	return &w.spec, true
}

func (b *Broadcaster) forget(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.written, name)
}

// write creates or refreshes the Advertisement in the consumer, unless
// the one there is still good, and remembers what is there. It returns nil
// when nothing could be written: no kubeconfig yet, or a failure recorded
// in the Advertised condition.
func (b *Broadcaster) write(ctx context.Context, pr *discoveryv1alpha1.PeeringRequest, key client.ObjectKey, want *sharingv1alpha1.AdvertisementSpec) (*sharingv1alpha1.AdvertisementSpec, error) {
	fail := func(reason, msg string, err error) (*sharingv1alpha1.AdvertisementSpec, error) {
		b.forget(pr.Name)
		return nil, b.setCondition(ctx, pr, metav1.ConditionFalse, reason, msg+err.Error(), nil)
	}
	remote, err := b.remote(ctx, pr.Spec.ClusterIdentity.ClusterID)
	if err != nil || remote == nil {
		return nil, err
	}
	var adv sharingv1alpha1.Advertisement
	err = remote.Get(ctx, key, &adv)
	switch {
	case apierrors.IsNotFound(err):
		adv = sharingv1alpha1.Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Spec: *want}
		if err := remote.Create(ctx, &adv); err != nil {
			return fail("WriteFailed", "Creating the Advertisement failed: ", err)
		}
	case err != nil:
		return fail("ConsumerUnreachable", "Reading the Advertisement failed: ", err)
	case b.stale(&adv.Spec, want, b.now()):
		adv.Spec = *want
		if err := remote.Update(ctx, &adv); err != nil {
			return fail("WriteFailed", "Refreshing the Advertisement failed: ", err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.written == nil {
		b.written = map[string]written{}
	}
	b.written[pr.Name] = written{uid: pr.UID, spec: adv.Spec}
	return &adv.Spec, nil
}

// written is the Advertisement last written for one PeeringRequest.
type written struct {
	uid  types.UID
	spec sharingv1alpha1.AdvertisementSpec
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
	return b.clients.For(cfg, b.Scheme)
}

// setCondition writes the Advertised condition.
func (b *Broadcaster) setCondition(ctx context.Context, pr *discoveryv1alpha1.PeeringRequest, s metav1.ConditionStatus, reason, msg string, err error) error {
	return b.setStatus(ctx, pr, s, reason, msg, pr.Status.OfferedResources, err)
}

// setStatus writes the Advertised condition and the resources offered,
// when either changed.
func (b *Broadcaster) setStatus(ctx context.Context, pr *discoveryv1alpha1.PeeringRequest, s metav1.ConditionStatus, reason, msg string, offered corev1.ResourceList, err error) error {
	orig := pr.DeepCopy()
	pr.Status.OfferedResources = offered
	meta.SetStatusCondition(&pr.Status.Conditions, metav1.Condition{Type: ConditionAdvertised, Status: s, Reason: reason, Message: msg, ObservedGeneration: pr.Generation})
	if c := meta.FindStatusCondition(orig.Status.Conditions, ConditionAdvertised); c != nil && c.Status == s && c.Reason == reason && c.Message == msg &&
		equality.Semantic.DeepEqual(orig.Status.OfferedResources, offered) {
		return err
	}
	return errors.Join(err, client.IgnoreNotFound(b.Client.Status().Patch(ctx, pr, client.MergeFrom(orig))))
}

// exposedLabels are the node labels worth showing on a virtual node, when
// every real node agrees on them; a consumer takes no others from an offer.
var exposedLabels = []string{
	"kubernetes.io/arch", "kubernetes.io/os", "topology.kubernetes.io/region", "topology.kubernetes.io/zone", "node.kubernetes.io/instance-type",
}

// AllowedNodeLabels returns the labels of an offer a virtual node may
// carry: the exposed ones alone, so that a provider cannot put a role, a
// hostname or another provider's ClusterID on the consumer's node.
func AllowedNodeLabels(offered map[string]string) map[string]string {
	out := map[string]string{}
	for _, key := range exposedLabels {
		// A value no label may have would fail the node's every write.
		if v, ok := offered[key]; ok && len(validation.IsValidLabelValue(v)) == 0 {
			out[key] = v
		}
	}
	return out
}

// Exposed says whether key is a label a virtual node may show.
func Exposed(key string) bool { return slices.Contains(exposedLabels, key) }

// ProviderOfTenant returns the peer whose tenant namespace ns is.
func ProviderOfTenant(ns string) (string, bool) {
	id, ok := strings.CutPrefix(ns, discoveryv1alpha1.TenantNamespace(""))
	return id, ok && id != ""
}

func commonLabels(nodes []corev1.Node, counted func(*corev1.Node) bool) map[string]string {
	out := map[string]string{}
	for _, key := range exposedLabels {
		value, seen, same := "", false, true
		for i := range nodes {
			if !counted(&nodes[i]) {
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

// largestChanged says whether the largest pods moved beyond the
// threshold: one more or fewer, or one of them.
func largestChanged(a, b []corev1.ResourceList) bool {
	if len(a) != len(b) {
		return true
	}
	for i := range a {
		if ChangedBeyond(a[i], b[i], ChangeThreshold) {
			return true
		}
	}
	return false
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

// resourcesSettle is how long the Broadcaster lets node and pod changes
// gather before it recomputes the offer: a burst of a thousand pods costs
// a few recomputations, not a thousand lists of every pod.
const resourcesSettle = time.Second

// SetupWithManager registers the Broadcaster: it recomputes on every
// PeeringRequest or configuration change, and a second after nodes or pods
// change.
func (b *Broadcaster) SetupWithManager(mgr ctrl.Manager) error {
	all := enqueueAll(mgr, &discoveryv1alpha1.PeeringRequestList{})
	settled := enqueueAllAfter(mgr, &discoveryv1alpha1.PeeringRequestList{}, resourcesSettle)
	// Pod status churns (kwok, kubelets): only what moves requests counts.
	podMoved := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Pod)
		n, ok2 := e.ObjectNew.(*corev1.Pod)
		return !ok1 || !ok2 || o.Spec.NodeName != n.Spec.NodeName || o.Status.Phase != n.Status.Phase ||
			!equality.Semantic.DeepEqual(PodRequests(o), PodRequests(n))
	}}
	return ctrl.NewControllerManagedBy(mgr).
		For(&discoveryv1alpha1.PeeringRequest{}).
		Watches(&corev1.Node{}, settled).
		Watches(&brokerv1alpha1.Selection{}, all).
		Watches(&corev1.Pod{}, settled, builder.WithPredicates(podMoved)).
		WatchesRawSource(clusterconfig.ChangeSource(mgr, b.Changes, &discoveryv1alpha1.PeeringRequest{}, all)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Named("broadcaster").
		Complete(b)
}

// enqueueAll returns a handler that enqueues every object of list's kind.
func enqueueAll(mgr ctrl.Manager, list client.ObjectList) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(requestsForAll(mgr, list))
}

// enqueueAllAfter is enqueueAll with a delay: the events of the delay
// fold into one request per object, as the work queue keeps one entry
// per request.
func enqueueAllAfter(mgr ctrl.Manager, list client.ObjectList, delay time.Duration) handler.EventHandler {
	requests := requestsForAll(mgr, list)
	add := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, r := range requests(ctx, nil) {
			q.AddAfter(r, delay)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, _ event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q)
		},
		UpdateFunc: func(ctx context.Context, _ event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q)
		},
		DeleteFunc: func(ctx context.Context, _ event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q)
		},
		GenericFunc: func(ctx context.Context, _ event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, q)
		},
	}
}

func requestsForAll(mgr ctrl.Manager, list client.ObjectList) handler.MapFunc {
	return func(ctx context.Context, _ client.Object) []reconcile.Request {
		l := list.DeepCopyObject().(client.ObjectList)
		if err := mgr.GetClient().List(ctx, l); err != nil {
			return nil
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(items))
		for _, it := range items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(it.(client.Object))})
		}
		return reqs
	}
}
