// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"cmp"
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=resourcequotas;limitranges,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=resourcequotas/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=discovery.liqo.io,resources=peeringrequests,verbs=get;list;watch

// OfferQuotaName is the ResourceQuota that holds a consumer, in each
// namespace made for it, to its share of what it was offered.
const OfferQuotaName = "liqo-offer"

// DefaultsLimitRangeName is the LimitRange that gives containers without
// requests or limits small ones, so that the quota counts them (a quota
// on requests.cpu refuses pods that request none).
const DefaultsLimitRangeName = "liqo-defaults"

// DefaultRequests are what a container that requests nothing is given in
// a consumer's namespace, as requests and as limits: a container that
// names nothing is small and bounded.
var DefaultRequests = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("10m"),
	corev1.ResourceMemory: resource.MustParse("32Mi"),
}

// DefaultEphemeralStorage is what a container that names no ephemeral
// storage is given, as request and limit, where the offer bounds it.
var DefaultEphemeralStorage = resource.MustParse("128Mi")

// The object counts a consumer may keep when the ClusterConfig says
// nothing (its defaults).
const (
	DefaultSecrets        = 500
	DefaultConfigMaps     = 500
	DefaultServices       = 200
	DefaultEndpointSlices = 400
	DefaultBudgets        = 50
)

// The quota names of the objects counted.
const (
	quotaEndpointSlices corev1.ResourceName = "count/endpointslices.discovery.k8s.io"
	quotaBudgets        corev1.ResourceName = "count/poddisruptionbudgets.policy"
	// QuotaShadowPods counts a consumer's ShadowPods: as many as its pods,
	// so that it stores no more of them than it may run.
	QuotaShadowPods corev1.ResourceName = "count/shadowpods.offloading.liqo.io"
)

// QuotaOf returns what a consumer may use across all its namespaces here:
// the offer's pods, CPU and memory as requests and as limits, its
// ephemeral storage (when the offer names any) as requests and limits,
// and what consumer (the ClusterConfig's consumerQuota) says of storage
// claims and object counts. What is not offered is zero, never absent: a
// quota without a resource would not bound it.
func QuotaOf(offered corev1.ResourceList, consumer configv1alpha1.ConsumerQuota) corev1.ResourceList {
	hard := corev1.ResourceList{}
	offer := func(name corev1.ResourceName) resource.Quantity {
		q, ok := offered[name]
		if !ok || q.Sign() < 0 {
			return *resource.NewQuantity(0, resource.DecimalSI)
		}
		return q.DeepCopy()
	}
	hard[corev1.ResourcePods] = offer(corev1.ResourcePods)
	hard[corev1.ResourceRequestsCPU], hard[corev1.ResourceLimitsCPU] = offer(corev1.ResourceCPU), offer(corev1.ResourceCPU)
	hard[corev1.ResourceRequestsMemory], hard[corev1.ResourceLimitsMemory] = offer(corev1.ResourceMemory), offer(corev1.ResourceMemory)
	if _, ok := offered[corev1.ResourceEphemeralStorage]; ok {
		hard[corev1.ResourceRequestsEphemeralStorage] = offer(corev1.ResourceEphemeralStorage)
		hard[corev1.ResourceLimitsEphemeralStorage] = offer(corev1.ResourceEphemeralStorage)
	}
	count := func(p *int64, def int64) resource.Quantity {
		if p != nil {
			def = max(*p, 0)
		}
		return *resource.NewQuantity(def, resource.DecimalSI)
	}
	hard[corev1.ResourcePersistentVolumeClaims] = count(consumer.PersistentVolumeClaims, 0)
	hard[corev1.ResourceRequestsStorage] = *resource.NewQuantity(0, resource.BinarySI)
	if consumer.Storage != nil && consumer.Storage.Sign() > 0 {
		hard[corev1.ResourceRequestsStorage] = consumer.Storage.DeepCopy()
	}
	hard[corev1.ResourceSecrets] = count(consumer.Secrets, DefaultSecrets)
	hard[corev1.ResourceConfigMaps] = count(consumer.ConfigMaps, DefaultConfigMaps)
	hard[corev1.ResourceServices] = count(consumer.Services, DefaultServices)
	hard[quotaEndpointSlices] = count(consumer.EndpointSlices, DefaultEndpointSlices)
	hard[quotaBudgets] = count(consumer.PodDisruptionBudgets, DefaultBudgets)
	return hard
}

// offerOf returns what this cluster last offered consumer, nil for
// nothing (no PeeringRequest, or nothing advertised yet).
func offerOf(ctx context.Context, c client.Client, consumer string) (corev1.ResourceList, error) {
	var pr discoveryv1alpha1.PeeringRequest
	if err := c.Get(ctx, client.ObjectKey{Name: consumer}, &pr); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return pr.Status.OfferedResources, nil
}

// limitRange gives containers that name nothing small requests and
// limits, so that the quota on both counts them.
func limitRange(offered corev1.ResourceList) []corev1.LimitRangeItem {
	defaults := DefaultRequests.DeepCopy()
	if _, ok := offered[corev1.ResourceEphemeralStorage]; ok {
		defaults[corev1.ResourceEphemeralStorage] = DefaultEphemeralStorage.DeepCopy()
	}
	return []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, DefaultRequest: defaults, Default: defaults.DeepCopy()}}
}

// ensureLimitRange creates or repairs the consumer's LimitRange in
// namespace.
func (r *NamespaceMapReconciler) ensureLimitRange(ctx context.Context, consumer, namespace string, offered corev1.ResourceList) (offloadingv1alpha1.MappedNamespaceStatus, error) {
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: DefaultsLimitRangeName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, lr, func() error {
		lr.Labels = quotaLabels(consumer)
		lr.Spec.Limits = limitRange(offered)
		return nil
	}); err != nil {
		return apiFailure(namespace, fmt.Sprintf("LimitRange %s/%s: %v", namespace, DefaultsLimitRangeName, err))
	}
	return offloadingv1alpha1.MappedNamespaceStatus{Namespace: namespace, Phase: offloadingv1alpha1.RemoteNamespaceReady}, nil
}

func quotaLabels(consumer string) map[string]string {
	return map[string]string{offloadingv1alpha1.OriginClusterLabel: consumer, discoveryv1alpha1.ManagedByLabel: discoveryv1alpha1.ManagedByValue}
}

// quotaState is one namespace's quota as the API server has it.
type quotaState struct {
	namespace string
	// spec is what the quota asks; enforced what the API server enforces
	// (status.hard, which the quota controller copies from spec); used,
	// what it counted.
	spec, enforced, used corev1.ResourceList
	// demand is what the consumer states its pods there ask for
	// (NamespaceMap spec.demands); nil when it states nothing.
	demand corev1.ResourceList
}

// balance shares total between the quotas of one consumer's namespaces
// so that what they may take together never exceeds total. Each namespace
// keeps what it uses. What is left goes to the namespaces whose stated
// demand exceeds what they use, a whole want at a time: the smallest wants
// first (by the largest part of the offer a want takes, the order of
// quotas breaking ties: the order the namespaces came), each that fits in
// every resource whole; then what is still left to the wants that did not
// fit, in the same order; the rest evenly to all. A pod fits a quota
// whole or not at all: proportional shares of wants that together exceed
// the offer can leave every namespace short of its pod, where serving one
// after the other serves both. Smallest first, so that a namespace stating
// a backlog beyond the offer (a peer's word) waits behind the others
// rather than holding them all up. What a consumer states thus moves its
// share between its own namespaces, never past total.
//
// A quota goes down at once; it goes up only out of what no quota holds,
// counting for each the largest of what it uses, what the API server
// enforces and what its spec asks: a namespace whose quota just went down
// may still fill it until the quota controller takes the new one, so
// another's goes up on a later pass, once it has. With one namespace, it
// gets total.
func balance(total corev1.ResourceList, quotas []quotaState) map[string]corev1.ResourceList {
	out := make(map[string]corev1.ResourceList, len(quotas))
	for _, q := range quotas {
		out[q.namespace] = corev1.ResourceList{}
	}
	names := make([]corev1.ResourceName, 0, len(total))
	for name := range total {
		names = append(names, name)
	}
	slices.Sort(names)
	value := make([]int64, len(names))
	formats := make([]resource.Format, len(names))
	used := make([][]int64, len(names))
	want := make([][]int64, len(names))
	for r, name := range names {
		value[r], formats[r] = amount(name, total[name])
		used[r], want[r] = make([]int64, len(quotas)), make([]int64, len(quotas))
		for i, q := range quotas {
			used[r][i] = get(name, q.used)
			want[r][i] = max(min(get(name, q.demand), value[r])-used[r][i], 0)
		}
	}
	grant := serveWants(value, used, want)
	for r, name := range names {
		target := make([]int64, len(quotas))
		for i := range quotas {
			target[i] = used[r][i] + grant[r][i]
		}
		// Down at once; what every quota then holds.
		next := make([]int64, len(quotas))
		var held int64
		for i, q := range quotas {
			next[i] = min(target[i], get(name, q.spec))
			held += max(get(name, q.used), get(name, q.enforced), next[i])
		}
		// Up out of what is free.
		free := max(value[r]-held, 0)
		for i, q := range quotas {
			if target[i] <= next[i] {
				continue
			}
			holds := max(get(name, q.used), get(name, q.enforced), next[i])
			if target[i] <= holds {
				next[i] = target[i]
				continue
			}
			give := min(target[i]-holds, free)
			next[i] = holds + give
			free -= give
		}
		for i, q := range quotas {
			out[q.namespace][name] = quantity(name, next[i], formats[r])
		}
	}
	return out
}

// serveWants divides, resource by resource (r), what no namespace (i)
// uses of value between the namespaces: whole wants first, smallest
// first, each that fits in every resource; then what is left to the wants
// not served, in the same order; then the rest evenly, the remainders a
// unit each to the first namespaces.
func serveWants(value []int64, used, want [][]int64) [][]int64 {
	n := 0
	if len(want) > 0 {
		n = len(want[0])
	}
	left := make([]int64, len(value))
	grant := make([][]int64, len(value))
	for r := range value {
		var allUsed int64
		for i := range n {
			allUsed += used[r][i]
		}
		left[r] = max(value[r]-allUsed, 0)
		grant[r] = make([]int64, n)
	}
	// The largest part of the offer a want takes, in parts per million.
	dominant := func(i int) int64 {
		var d int64
		for r := range value {
			if value[r] > 0 {
				d = max(d, proportion(want[r][i], 1_000_000, value[r]))
			}
		}
		return d
	}
	order := make([]int, n)
	parts := make([]int64, n)
	for i := range n {
		order[i], parts[i] = i, dominant(i)
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(parts[a], parts[b]) })
	served := make([]bool, n)
	for _, i := range order {
		fits := true
		for r := range value {
			fits = fits && want[r][i] <= left[r]
		}
		if !fits {
			continue
		}
		served[i] = true
		for r := range value {
			grant[r][i] = want[r][i]
			left[r] -= want[r][i]
		}
	}
	for _, i := range order {
		if served[i] {
			continue
		}
		for r := range value {
			give := min(want[r][i], left[r])
			grant[r][i] += give
			left[r] -= give
		}
	}
	if n == 0 {
		return grant
	}
	for r := range value {
		for i := range n {
			grant[r][i] += left[r] / int64(n)
			if int64(i) < left[r]%int64(n) {
				grant[r][i]++
			}
		}
	}
	return grant
}

// proportion is a*b/c rounded down, without overflowing when a*b would.
func proportion(a, b, c int64) int64 {
	return new(big.Int).Div(new(big.Int).Mul(big.NewInt(a), big.NewInt(b)), big.NewInt(c)).Int64()
}

// amount is q in the unit the quota counts name in: millicores for CPU,
// whole units (bytes, objects) for the rest.
func amount(name corev1.ResourceName, q resource.Quantity) (int64, resource.Format) {
	if isCPU(name) {
		return q.MilliValue(), q.Format
	}
	return q.Value(), q.Format
}

func get(name corev1.ResourceName, l corev1.ResourceList) int64 {
	q, ok := l[name]
	if !ok {
		return 0
	}
	v, _ := amount(name, q)
	return v
}

func quantity(name corev1.ResourceName, v int64, format resource.Format) resource.Quantity {
	if isCPU(name) {
		return *resource.NewMilliQuantity(v, format)
	}
	return *resource.NewQuantity(v, format)
}

func isCPU(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || strings.HasSuffix(string(name), ".cpu")
}

// ensureQuotas shares what consumer may use (total) between the quotas of
// its namespaces managed here (in the order they came), by what it states
// they need (demands, by provider namespace), creating those missing; what the quotas of
// its other namespaces (on their way out) hold is not shared. A quota made
// in a namespace made on this pass (fresh) is counted here, so that the
// namespace takes pods at once instead of when the quota controller gets
// to it. It returns, for each managed namespace, Ready once its quota is
// enforced, Pending before.
func (r *NamespaceMapReconciler) ensureQuotas(ctx context.Context, consumer string, managed, others []string, fresh map[string]bool,
	total corev1.ResourceList, demands map[string]corev1.ResourceList,
) (map[string]offloadingv1alpha1.MappedNamespaceStatus, error) {
	// Read from the API server, not the cache: a share computed from a
	// quota the cache has not yet seen written could give out twice.
	read := func(ns string) (*corev1.ResourceQuota, error) {
		var q corev1.ResourceQuota
		err := r.Direct.Get(ctx, client.ObjectKey{Namespace: ns, Name: OfferQuotaName}, &q)
		if apierrors.IsNotFound(err) {
			return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: OfferQuotaName}}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the quota of %s: %w", ns, err)
		}
		return &q, nil
	}
	shared := total.DeepCopy()
	for _, ns := range others {
		q, err := read(ns)
		if err != nil {
			return nil, err
		}
		for name, t := range shared {
			v, format := amount(name, t)
			held := max(get(name, q.Status.Used), get(name, q.Status.Hard), get(name, q.Spec.Hard))
			shared[name] = quantity(name, max(v-held, 0), format)
		}
	}
	var states []quotaState
	current := map[string]*corev1.ResourceQuota{}
	for _, ns := range managed {
		q, err := read(ns)
		if err != nil {
			return nil, err
		}
		current[ns] = q
		states = append(states, quotaState{namespace: ns, spec: q.Spec.Hard, enforced: q.Status.Hard, used: q.Status.Used, demand: demands[ns]})
	}
	out := map[string]offloadingv1alpha1.MappedNamespaceStatus{}
	var retry error
	for ns, hard := range balance(shared, states) {
		// A namespace's share of pods is its share of ShadowPods too.
		if pods, ok := hard[corev1.ResourcePods]; ok {
			hard[QuotaShadowPods] = pods.DeepCopy()
		}
		q := current[ns]
		if err := r.writeQuota(ctx, consumer, q, hard, fresh[ns]); err != nil {
			out[ns], retry = failed(ns, err.Error()), errRetry
			continue
		}
		if err := r.countShadowPods(ctx, q); err != nil {
			out[ns], retry = failed(ns, err.Error()), errRetry
			continue
		}
		out[ns] = offloadingv1alpha1.MappedNamespaceStatus{Namespace: ns, Phase: offloadingv1alpha1.RemoteNamespaceReady}
		for name := range q.Spec.Hard {
			if _, counted := q.Status.Hard[name]; !counted {
				out[ns] = offloadingv1alpha1.MappedNamespaceStatus{Namespace: ns, Phase: offloadingv1alpha1.RemoteNamespacePending,
					Message: fmt.Sprintf("waiting for the quota controller to count namespace %s", ns)}
				break
			}
		}
	}
	return out, retry
}

// writeQuota makes q's spec hard, creating q when it is new; a new quota
// of a fresh namespace is counted at once.
func (r *NamespaceMapReconciler) writeQuota(ctx context.Context, consumer string, q *corev1.ResourceQuota, hard corev1.ResourceList, fresh bool) error {
	if q.ResourceVersion == "" {
		q.Labels, q.Spec.Hard = quotaLabels(consumer), hard
		if err := r.Client.Create(ctx, q); err != nil {
			return fmt.Errorf("ResourceQuota %s/%s: %w", q.Namespace, OfferQuotaName, err)
		}
		if !fresh {
			return nil
		}
		used, ok, err := r.countFresh(ctx, q.Namespace, hard)
		if err != nil || !ok {
			return err
		}
		q.Status = corev1.ResourceQuotaStatus{Hard: hard.DeepCopy(), Used: used}
		if err := r.Client.Status().Update(ctx, q); err != nil && !apierrors.IsConflict(err) {
			// A conflict: the quota controller counted it first.
			return fmt.Errorf("counting ResourceQuota %s/%s: %w", q.Namespace, OfferQuotaName, err)
		}
		return nil
	}
	if equality.Semantic.DeepEqual(q.Spec.Hard, hard) && equality.Semantic.DeepEqual(q.Labels, quotaLabels(consumer)) {
		return nil
	}
	patch := client.MergeFrom(q.DeepCopy())
	q.Labels, q.Spec.Hard = quotaLabels(consumer), hard
	if err := r.Client.Patch(ctx, q, patch); err != nil {
		return fmt.Errorf("ResourceQuota %s/%s: %w", q.Namespace, OfferQuotaName, err)
	}
	return nil
}

// countShadowPods counts the ShadowPods of q's namespace into q's usage
// when the quota controller enforces their count but has not counted
// them: it knows a custom resource only once its discovery, every 30
// seconds, found it, and counts a quota again only when its spec changes
// or every few minutes; meanwhile the API server refuses every ShadowPod
// (status unknown). None can be made while the usage is missing, so the
// count is exact; the quota controller keeps it until it counts them
// itself.
func (r *NamespaceMapReconciler) countShadowPods(ctx context.Context, q *corev1.ResourceQuota) error {
	if !uncountedShadowPods(q) {
		return nil
	}
	var list offloadingv1alpha1.ShadowPodList
	if err := r.Direct.List(ctx, &list, client.InNamespace(q.Namespace)); err != nil {
		return fmt.Errorf("counting the ShadowPods of %s: %w", q.Namespace, err)
	}
	if q.Status.Used == nil {
		q.Status.Used = corev1.ResourceList{}
	}
	q.Status.Used[QuotaShadowPods] = *resource.NewQuantity(int64(len(list.Items)), resource.DecimalSI)
	if err := r.Client.Status().Update(ctx, q); err != nil {
		return fmt.Errorf("counting the ShadowPods of ResourceQuota %s/%s: %w", q.Namespace, OfferQuotaName, err)
	}
	return nil
}

// countFresh is the usage of a namespace made on this pass, read from
// the API: nothing of the consumer's is there yet, but the API server
// publishes the cluster's CA in a ConfigMap of every namespace. ok is
// false when pods run there already: the quota controller counts it.
func (r *NamespaceMapReconciler) countFresh(ctx context.Context, namespace string, hard corev1.ResourceList) (corev1.ResourceList, bool, error) {
	used := corev1.ResourceList{}
	for name := range hard {
		used[name] = quantity(name, 0, resource.DecimalSI)
	}
	var pods corev1.PodList
	if err := r.Direct.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return nil, false, fmt.Errorf("counting the pods of %s: %w", namespace, err)
	}
	if len(pods.Items) > 0 {
		return nil, false, nil
	}
	var cms corev1.ConfigMapList
	if err := r.Direct.List(ctx, &cms, client.InNamespace(namespace)); err != nil {
		return nil, false, fmt.Errorf("counting the ConfigMaps of %s: %w", namespace, err)
	}
	used[corev1.ResourceConfigMaps] = *resource.NewQuantity(int64(len(cms.Items)), resource.DecimalSI)
	return used, true, nil
}
