// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package offloading

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/liqo-go/liqo/api"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
)

// TestQuotaOf: the quota holds the offered pods, CPU and memory as
// requests and limits, ephemeral storage when offered, and what the
// ClusterConfig says of claims and objects (its defaults when silent);
// zero for what was not offered (or offered below zero), never nothing: a
// quota without a resource would not bound it.
func TestQuotaOf(t *testing.T) {
	q := resource.MustParse
	got := QuotaOf(corev1.ResourceList{
		corev1.ResourcePods: q("110"), corev1.ResourceCPU: q("3500m"), corev1.ResourceEphemeralStorage: q("10Gi"),
		corev1.ResourceMemory: q("-1Gi"),
	}, configv1alpha1.ConsumerQuota{Secrets: ptr.To[int64](7), Storage: ptr.To(q("5Gi"))})
	want := corev1.ResourceList{
		corev1.ResourcePods: q("110"), corev1.ResourceRequestsCPU: q("3500m"), corev1.ResourceLimitsCPU: q("3500m"),
		corev1.ResourceRequestsMemory: q("0"), corev1.ResourceLimitsMemory: q("0"),
		corev1.ResourceRequestsEphemeralStorage: q("10Gi"), corev1.ResourceLimitsEphemeralStorage: q("10Gi"),
		corev1.ResourcePersistentVolumeClaims: q("0"), corev1.ResourceRequestsStorage: q("5Gi"),
		corev1.ResourceSecrets: q("7"), corev1.ResourceConfigMaps: q("500"), corev1.ResourceServices: q("200"),
		"count/endpointslices.discovery.k8s.io": q("400"), "count/poddisruptionbudgets.policy": q("50"),
	}
	if len(got) != len(want) {
		t.Fatalf("QuotaOf = %v, want %v", got, want)
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g.Cmp(w) != 0 {
			t.Fatalf("QuotaOf[%s] = %v, want %v (all: %v)", name, g.String(), w.String(), got)
		}
	}
	none := QuotaOf(nil, configv1alpha1.ConsumerQuota{})
	for _, name := range []corev1.ResourceName{corev1.ResourcePods, corev1.ResourceRequestsCPU, corev1.ResourceLimitsCPU,
		corev1.ResourceRequestsMemory, corev1.ResourceLimitsMemory, corev1.ResourcePersistentVolumeClaims, corev1.ResourceRequestsStorage} {
		if v, ok := none[name]; !ok || !v.IsZero() {
			t.Fatalf("QuotaOf(nil)[%s] = %v, want zero (all: %v)", name, v.String(), none)
		}
	}
	if _, ok := none[corev1.ResourceRequestsEphemeralStorage]; ok {
		t.Fatalf("QuotaOf(nil) bounds ephemeral storage nobody offered: %v", none)
	}
}

// TestBalance: one namespace gets the whole offer; several share what is
// left after what each uses; a quota goes down at once and another goes
// up only out of what no quota holds (used, enforced or asked), so that
// two passes, the quota controller between them, move a share.
func TestBalance(t *testing.T) {
	q := resource.MustParse
	l := func(pods, cpu string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourcePods: q(pods), corev1.ResourceRequestsCPU: q(cpu)}
	}
	total := l("10", "2")
	got := balance(total, []quotaState{{namespace: "a"}})
	if get(corev1.ResourcePods, got["a"]) != 10 || get(corev1.ResourceRequestsCPU, got["a"]) != 2000 {
		t.Fatalf("one namespace: %v, want the whole offer", got)
	}
	// a holds the whole offer and uses 4 pods and 1 CPU; b comes.
	a := quotaState{namespace: "a", spec: total, enforced: total, used: l("4", "1")}
	got = balance(total, []quotaState{a, {namespace: "b"}})
	if p := get(corev1.ResourcePods, got["a"]); p != 7 {
		t.Errorf("a's pods: %d, want its 4 and half of the 6 left", p)
	}
	if p := get(corev1.ResourcePods, got["b"]); p != 0 {
		t.Errorf("b's pods before a's quota is enforced: %d, want 0 (a may still fill its old one)", p)
	}
	// The quota controller enforced a's new quota: b gets the rest.
	a.spec, a.enforced = got["a"], got["a"]
	got = balance(total, []quotaState{a, {namespace: "b", spec: got["b"], enforced: got["b"]}})
	if p, c := get(corev1.ResourcePods, got["b"]), get(corev1.ResourceRequestsCPU, got["b"]); p != 3 || c != 500 {
		t.Errorf("b once a's quota is enforced: %d pods, %dm; want 3 and 500m", p, c)
	}
}

// TestBalanceNeverOvercommits: for random usage and quotas (each pass's
// output enforced, or not, before the next, usage growing within what is
// enforced), the namespaces never hold together more than the offer.
func TestBalanceNeverOvercommits(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, uint64(time.Now().UnixNano()))) //nolint:gosec // a property test, not secrets
	for run := range 300 {
		total := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(rng.IntN(50)), resource.DecimalSI)}
		n := 1 + rng.IntN(4)
		states := make([]quotaState, n)
		for i := range states {
			states[i] = quotaState{namespace: fmt.Sprintf("ns-%d", i)}
			// What the consumer states: nothing, something, or far
			// more than the offer (a peer's word, not a fact).
			switch rng.IntN(3) {
			case 1:
				states[i].demand = corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(rng.IntN(60)), resource.DecimalSI)}
			case 2:
				states[i].demand = corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1<<62, resource.DecimalSI)}
			}
		}
		for pass := range 20 {
			out := balance(total, states)
			var holds int64
			for i := range states {
				states[i].spec = out[states[i].namespace]
				if rng.IntN(2) == 0 {
					states[i].enforced = states[i].spec
				}
				// Pods come, within what is enforced; some go.
				used, hard := get(corev1.ResourcePods, states[i].used), get(corev1.ResourcePods, states[i].enforced)
				if used < hard {
					used += rng.Int64N(hard - used + 1)
				} else if used > 0 && rng.IntN(3) == 0 {
					used--
				}
				states[i].used = corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(used, resource.DecimalSI)}
				holds += max(used, hard, get(corev1.ResourcePods, states[i].spec))
			}
			if holds > get(corev1.ResourcePods, total) {
				t.Fatalf("run %d pass %d: the namespaces hold %d pods, the offer is %d: %+v", run, pass, holds, get(corev1.ResourcePods, total), states)
			}
		}
	}
}

// TestBalanceByDemand: twelve namespaces share two CPUs evenly while the
// consumer states nothing (166m each, too little for a pod limited to
// 1250m); once it states that one namespace's pods want 1250m, that
// namespace's quota reaches it (the others going down first), and the rest
// stays shared evenly. Stating far more than the offer gets no more than
// the offer, and a namespace keeps what it uses whatever another states.
func TestBalanceByDemand(t *testing.T) {
	cpu := func(m int64) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceLimitsCPU: *resource.NewMilliQuantity(m, resource.DecimalSI)}
	}
	total := cpu(2000)
	states := make([]quotaState, 12)
	for i := range states {
		states[i] = quotaState{namespace: fmt.Sprintf("ns-%02d", i)}
	}
	settle := func() map[string]corev1.ResourceList { return settleQuotas(total, states) }
	got := settle()
	if c := get(corev1.ResourceLimitsCPU, got["ns-05"]); c != 166 && c != 167 {
		t.Fatalf("ns-05 with no demand stated: %dm, want an even share (166m or 167m)", c)
	}
	states[5].demand = cpu(1250)
	got = settle()
	if c := get(corev1.ResourceLimitsCPU, got["ns-05"]); c < 1250 {
		t.Fatalf("ns-05 wanting 1250m: %dm, want at least 1250m", c)
	}
	var sum int64
	for _, l := range got {
		sum += get(corev1.ResourceLimitsCPU, l)
	}
	if sum != 2000 {
		t.Fatalf("the quotas hold %dm together, want the offer's 2000m", sum)
	}
	if c := get(corev1.ResourceLimitsCPU, got["ns-00"]); c != 62 && c != 63 {
		t.Errorf("ns-00 beside it: %dm, want an even share of the 750m left (62m or 63m)", c)
	}
	// ns-00 uses 300m; ns-05 states far more than the offer.
	states[0].used, states[5].demand = cpu(300), cpu(1<<50)
	got = settle()
	if c := get(corev1.ResourceLimitsCPU, got["ns-00"]); c < 300 {
		t.Errorf("ns-00 using 300m: quota %dm, want at least what it uses", c)
	}
	if c := get(corev1.ResourceLimitsCPU, got["ns-05"]); c != 1700 {
		t.Errorf("ns-05 stating more than the offer: %dm, want the 1700m nobody uses", c)
	}
}

// TestEnsureQuotaStaleCache: a LimitRange made by the previous reconcile
// but not yet in the cache makes the create fail with AlreadyExists. That
// failure is shown and retried (errRetry), not left for the next resync;
// once the cache has it, the LimitRange is repaired.
func TestEnsureQuotaStaleCache(t *testing.T) {
	ctx := t.Context()
	stale := true
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.LimitRange); ok && stale {
				return apierrors.NewNotFound(corev1.Resource("limitranges"), key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).WithObjects(&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: DefaultsLimitRangeName}}).Build()
	r := &NamespaceMapReconciler{Client: c, Direct: c}
	offer := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}

	st, err := r.ensureLimitRange(ctx, "consumer", "demo", offer)
	if !errors.Is(err, errRetry) {
		t.Fatalf("stale cache: error %v, want errRetry", err)
	}
	if st.Phase != offloadingv1alpha1.RemoteNamespaceFailed || !strings.Contains(st.Message, "already exists") {
		t.Fatalf("stale cache: status %+v, want Failed naming the conflict", st)
	}

	stale = false
	if _, err := r.ensureLimitRange(ctx, "consumer", "demo", offer); err != nil {
		t.Fatalf("fresh cache: %v", err)
	}
	var lr corev1.LimitRange
	if err := c.Get(ctx, client.ObjectKey{Namespace: "demo", Name: DefaultsLimitRangeName}, &lr); err != nil {
		t.Fatal(err)
	}
	if len(lr.Spec.Limits) != 1 || lr.Spec.Limits[0].Type != corev1.LimitTypeContainer || lr.Spec.Limits[0].Default.Cpu().Cmp(DefaultRequests[corev1.ResourceCPU]) != 0 {
		t.Fatalf("LimitRange not repaired with default requests and limits: %+v", lr.Spec)
	}
}

// TestBalanceServesWholeWants: two namespaces each wanting 1250m of
// CPU limits out of 1890m are served one after the other (the first to
// come first), not 945m each that fits neither; once the first's pod has
// ended, the second gets its whole want. A smaller want is served before
// a larger one that came first, a want must fit in every resource to be
// served whole, and one beyond the offer waits behind the others.
func TestBalanceServesWholeWants(t *testing.T) {
	list := func(cpu, mem int64) corev1.ResourceList {
		return corev1.ResourceList{
			corev1.ResourceLimitsCPU:    *resource.NewMilliQuantity(cpu, resource.DecimalSI),
			corev1.ResourceLimitsMemory: *resource.NewQuantity(mem, resource.BinarySI),
		}
	}
	cpu := func(l corev1.ResourceList) int64 { return get(corev1.ResourceLimitsCPU, l) }
	mem := func(l corev1.ResourceList) int64 { return get(corev1.ResourceLimitsMemory, l) }
	total := list(1890, 4<<30)
	settle := func(states []quotaState) map[string]corev1.ResourceList { return settleQuotas(total, states) }
	// Listed in the order they came: b first.
	states := []quotaState{{namespace: "b", demand: list(1250, 64<<20)}, {namespace: "a", demand: list(1250, 64<<20)}}
	got := settle(states)
	if cpu(got["b"]) < 1250 {
		t.Fatalf("b, first to come, wanting 1250m: %dm (a: %dm), want its whole want", cpu(got["b"]), cpu(got["a"]))
	}
	if cpu(got["a"])+cpu(got["b"]) != 1890 {
		t.Fatalf("the quotas hold %dm together, want the offer's 1890m", cpu(got["a"])+cpu(got["b"]))
	}
	// b's pod runs, then ends: a gets its turn.
	states[0].used = list(1250, 64<<20)
	if got = settle(states); cpu(got["a"]) >= 1250 || cpu(got["b"]) < 1250 {
		t.Fatalf("b running its pod: b %dm, a %dm; want b to keep it and a to wait", cpu(got["b"]), cpu(got["a"]))
	}
	states[0].used, states[0].demand = nil, nil
	if got = settle(states); cpu(got["a"]) < 1250 {
		t.Fatalf("b's pod ended: a %dm, want its whole 1250m", cpu(got["a"]))
	}

	// c came first but wants more than d (which came last), and e wants
	// 200m of CPU but more memory than is offered after d's.
	states = []quotaState{
		{namespace: "c", demand: list(1300, 64<<20)},
		{namespace: "e", demand: list(200, 3<<30+512<<20)},
		{namespace: "d", demand: list(1000, 1<<30)},
	}
	got = settle(states)
	if cpu(got["d"]) < 1000 || mem(got["d"]) < 1<<30 {
		t.Fatalf("d wanting 1000m and 1Gi: %dm and %d bytes, want them whole, before c's larger want", cpu(got["d"]), mem(got["d"]))
	}
	if cpu(got["c"]) >= 1300 {
		t.Fatalf("c wanting 1300m got %dm beside d's 1000m of 1890m", cpu(got["c"]))
	}
	if mem(got["e"]) >= 3<<30+512<<20 {
		t.Fatalf("e got %d bytes of memory, more than what d's whole want leaves", mem(got["e"]))
	}

	// f states a backlog far beyond the offer; g wants 300m.
	states = []quotaState{{namespace: "f", demand: list(1<<40, 1<<50)}, {namespace: "g", demand: list(300, 64<<20)}}
	got = settle(states)
	if cpu(got["g"]) < 300 {
		t.Fatalf("g wanting 300m beside f stating more than the offer: %dm, want 300m", cpu(got["g"]))
	}
	if cpu(got["f"]) != 1590 {
		t.Fatalf("f stating more than the offer: %dm, want the 1590m g leaves", cpu(got["f"]))
	}
}

// settleQuotas balances total between states in passes, the quota controller
// enforcing each pass's quotas between them, and returns the last.
func settleQuotas(total corev1.ResourceList, states []quotaState) map[string]corev1.ResourceList {
	var out map[string]corev1.ResourceList
	for range 3 {
		out = balance(total, states)
		for i := range states {
			states[i].spec, states[i].enforced = out[states[i].namespace], out[states[i].namespace]
		}
	}
	return out
}
