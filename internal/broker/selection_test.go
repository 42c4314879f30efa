// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/broker"
)

// consumerToken returns the token of a service account of consumer's
// tenant namespace allowed to read and change that consumer's selection,
// as liqoctl broker login makes.
func (w *world) consumerToken(t *testing.T, consumer string) string {
	t.Helper()
	ns := discoveryv1alpha1.TenantNamespace(consumer)
	w.create(t,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "selection"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{brokerv1alpha1.GroupVersion.Group}, Resources: []string{broker.SelectionResource},
			ResourceNames: []string{brokerv1alpha1.SelectionName}, Verbs: []string{"get", "update"},
		}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dashboard"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "selection"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "dashboard"}}},
	)
	return w.token(t, ns, "dashboard", "")
}

// selection decodes a selection answer.
func (a answer) selection(t *testing.T) broker.SelectionView {
	t.Helper()
	var v broker.SelectionView
	if a.code != http.StatusOK || a.contentType != "application/json" || json.Unmarshal(a.body, &v) != nil || v.Kind != "Selection" {
		t.Fatalf("want a selection, got %d %s %s", a.code, a.contentType, a.body)
	}
	return v
}

// TestSelection: a consumer enables and disables providers, by the
// original toggle (GET or POST) and the v1 API; its choice is a Selection
// in its tenant namespace; it reads back and changes only its own; an
// unknown provider, a malformed parameter, a missing or foreign
// credential and an oversized body are each refused with the right code
// and a message naming what is wrong.
func TestSelection(t *testing.T) {
	w := startBroker(t, broker.Options{Modes: broker.Modes{Orchestrator: true}})
	ctx := t.Context()
	w.create(t, peered("provider-1", "rome", true, false), peered("provider-2", "paris", true, false),
		peered("consumer-1", "milan", false, true), peered("consumer-2", "lyon", false, true))
	one, two := w.consumerToken(t, "consumer-1"), w.consumerToken(t, "consumer-2")

	eventually(t, func() error {
		a := w.do(t, http.MethodPost, "/api/toggle?id=provider-1&enable=true", one, "")
		if a.code != http.StatusOK {
			return fmt.Errorf("enabling provider-1: %d %s", a.code, a.body)
		}
		return nil
	})
	if v := w.do(t, http.MethodGet, "/api/toggle?id=provider-2&enable=true", one, "").selection(t); !slices.Equal(v.Providers, []string{"provider-1", "provider-2"}) || v.Consumer != "consumer-1" {
		t.Errorf("after enabling both, by POST then GET: %+v", v)
	}
	if v := w.get(t, "/api/v1/selection", one).selection(t); !slices.Equal(v.Providers, []string{"provider-1", "provider-2"}) {
		t.Errorf("read back: %+v", v)
	}
	var sel brokerv1alpha1.Selection
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace("consumer-1"), Name: brokerv1alpha1.SelectionName}, &sel); err != nil || !slices.Equal(sel.Spec.Providers, []string{"provider-1", "provider-2"}) {
		t.Errorf("the Selection of consumer-1: %+v (%v)", sel.Spec, err)
	}

	if v := w.do(t, http.MethodPut, "/api/v1/selection", two, `{"providers": ["provider-2"]}`).selection(t); !slices.Equal(v.Providers, []string{"provider-2"}) || v.Consumer != "consumer-2" {
		t.Errorf("consumer-2's own selection: %+v", v)
	}
	if v := w.do(t, http.MethodPost, "/api/toggle?id=provider-1&enable=false", one, "").selection(t); !slices.Equal(v.Providers, []string{"provider-2"}) {
		t.Errorf("after disabling provider-1: %+v", v)
	}
	if v := w.get(t, "/api/v1/selection", two).selection(t); !slices.Equal(v.Providers, []string{"provider-2"}) {
		t.Errorf("consumer-2's selection moved with consumer-1's: %+v", v)
	}

	for _, tc := range []struct {
		name, method, path, token, body string
		code                            int
		mention                         string
	}{
		{"anonymous toggle", http.MethodGet, "/api/toggle?id=provider-1&enable=true", "", "", http.StatusUnauthorized, "bearer token"},
		{"anonymous read", http.MethodGet, "/api/v1/selection?consumer=consumer-1", "", "", http.StatusUnauthorized, "bearer token"},
		{"another consumer's toggle", http.MethodPost, "/api/toggle?id=provider-1&enable=true&consumer=consumer-1", two, "", http.StatusForbidden, "liqo-tenant-consumer-1"},
		{"another consumer's selection", http.MethodGet, "/api/v1/selection?consumer=consumer-1", two, "", http.StatusForbidden, "liqo-tenant-consumer-1"},
		{"an unknown provider", http.MethodPost, "/api/toggle?id=nowhere&enable=true", one, "", http.StatusNotFound, "nowhere"},
		{"a consumer, not a provider", http.MethodPost, "/api/toggle?id=consumer-2&enable=true", one, "", http.StatusNotFound, "consumer-2"},
		{"a malformed id", http.MethodPost, "/api/toggle?id=No_Such&enable=true", one, "", http.StatusBadRequest, "id:"},
		{"a malformed enable", http.MethodPost, "/api/toggle?id=provider-1&enable=maybe", one, "", http.StatusBadRequest, "enable:"},
		{"a malformed consumer", http.MethodGet, "/api/v1/selection?consumer=-x", one, "", http.StatusBadRequest, "consumer:"},
		{"an unknown field", http.MethodPut, "/api/v1/selection", one, `{"provider": ["provider-1"]}`, http.StatusBadRequest, "body:"},
		{"an unknown provider in a list", http.MethodPut, "/api/v1/selection", one, `{"providers": ["provider-1", "nowhere"]}`, http.StatusNotFound, "providers[1]"},
		{"an oversized body", http.MethodPut, "/api/v1/selection", one, `{"providers": ["` + strings.Repeat("a", broker.MaxBodyBytes) + `"]}`, http.StatusRequestEntityTooLarge, "larger than"},
	} {
		a := w.do(t, tc.method, tc.path, tc.token, tc.body)
		if a.code != tc.code {
			t.Errorf("%s: %d %s, want %d", tc.name, a.code, a.body, tc.code)
			continue
		}
		if s := a.status(t); !strings.Contains(s.Message, tc.mention) {
			t.Errorf("%s: message %q does not mention %q", tc.name, s.Message, tc.mention)
		}
	}
	if v := w.get(t, "/api/v1/selection", one).selection(t); !slices.Equal(v.Providers, []string{"provider-2"}) {
		t.Errorf("a refused request changed consumer-1's selection: %+v", v)
	}
}

// TestSelectionPolicy: a consumer sets a policy through the API, and the
// broker refuses an invalid one naming its fields, changing nothing;
// under a policy, disabling a provider pins it out and enabling pins it
// in; dropping the policy returns to the providers enabled by hand.
// Another consumer can do none of it to the first one's selection.
func TestSelectionPolicy(t *testing.T) {
	w := startBroker(t, broker.Options{Modes: broker.Modes{Orchestrator: true, Catalog: true}})
	w.create(t, peered("provider-1", "rome", true, false), peered("provider-2", "paris", true, false),
		peered("consumer-1", "milan", false, true), peered("consumer-2", "lyon", false, true))
	one, two := w.consumerToken(t, "consumer-1"), w.consumerToken(t, "consumer-2")
	// A consumer reads the providers it chooses among, not the other
	// consumers, without the catalog's right.
	eventually(t, func() error {
		var list broker.ClusterList
		a := w.get(t, "/api/v1/clusters", one)
		if a.code != http.StatusOK || json.Unmarshal(a.body, &list) != nil {
			return fmt.Errorf("a consumer listing the providers: %d %s", a.code, a.body)
		}
		var ids []string
		for _, c := range list.Items {
			ids = append(ids, c.ClusterID)
		}
		if !slices.Equal(ids, []string{"provider-1", "provider-2"}) {
			return fmt.Errorf("a consumer sees %v, want the two providers only", ids)
		}
		return nil
	})
	if a := w.get(t, "/api/v1/clusters/consumer-2", one); a.code != http.StatusNotFound {
		t.Errorf("a consumer reading another consumer in the catalog: %d %s, want 404", a.code, a.body)
	}
	if a := w.get(t, "/api/v1/clusters?consumer=consumer-2", one); a.code != http.StatusForbidden {
		t.Errorf("a consumer reading the catalog as another: %d %s, want 403", a.code, a.body)
	}
	const policy = `{"count": 1, "weights": {"latency": 3, "price": 1}, "requirements": {"maxLatency": "50ms",
		"maxPrice": {"currency": "EUR", "perUnit": {"cpu": "0.05"}}}}`
	var v broker.SelectionView
	eventually(t, func() error {
		a := w.do(t, http.MethodPut, "/api/v1/selection/policy", one, policy)
		if a.code != http.StatusOK {
			return fmt.Errorf("setting the policy: %d %s", a.code, a.body)
		}
		v = a.selection(t)
		return nil
	})
	if v.Policy == nil || v.Policy.Count != 1 || v.Policy.Weights.Latency != 3 || v.Policy.Requirements.MaxLatency.Duration.String() != "50ms" {
		t.Errorf("the policy read back: %+v", v.Policy)
	}
	for _, tc := range []struct {
		name, body, token string
		code              int
		mentions          []string
	}{
		{"invalid fields", `{"count": 300, "weights": {"price": 101}, "requirements": {"minUptime": {"window": "2h", "percent": "101"}}}`, one,
			http.StatusBadRequest, []string{"spec.policy.count", "spec.policy.weights.price", "spec.policy.requirements.minUptime.window", "spec.policy.requirements.minUptime.percent"}},
		{"an unknown field", `{"cuont": 1}`, one, http.StatusBadRequest, []string{"body:", "cuont"}},
		{"another consumer's", policy, two, http.StatusForbidden, []string{"liqo-tenant-consumer-1"}},
	} {
		path := "/api/v1/selection/policy"
		if tc.token == two {
			path += "?consumer=consumer-1"
		}
		a := w.do(t, http.MethodPut, path, tc.token, tc.body)
		if a.code != tc.code {
			t.Errorf("%s: %d %s, want %d", tc.name, a.code, a.body, tc.code)
			continue
		}
		for _, m := range tc.mentions {
			if s := a.status(t); !strings.Contains(s.Message, m) {
				t.Errorf("%s: message %q does not name %q", tc.name, s.Message, m)
			}
		}
	}
	if got := w.get(t, "/api/v1/selection", one).selection(t); got.Policy == nil || got.Policy.Count != 1 {
		t.Errorf("a refused policy changed the selection: %+v", got.Policy)
	}

	// Under the policy: disable pins out, enable pins in (and no longer
	// out).
	if v := w.do(t, http.MethodPost, "/api/toggle?id=provider-1&enable=false", one, "").selection(t); !slices.Equal(v.Excluded, []string{"provider-1"}) {
		t.Errorf("disabled under a policy: excluded %v, want provider-1", v.Excluded)
	}
	if v := w.do(t, http.MethodPost, "/api/toggle?id=provider-1&enable=true", one, "").selection(t); len(v.Excluded) != 0 || !slices.Equal(v.Providers, []string{"provider-1"}) {
		t.Errorf("enabled again: providers %v excluded %v, want provider-1 pinned in only", v.Providers, v.Excluded)
	}
	if v := w.do(t, http.MethodDelete, "/api/v1/selection/policy?consumer=consumer-1", two, ""); v.code != http.StatusForbidden {
		t.Errorf("another consumer dropping the policy: %d %s", v.code, v.body)
	}
	if v := w.do(t, http.MethodDelete, "/api/v1/selection/policy", one, "").selection(t); v.Policy != nil || !slices.Equal(v.Providers, []string{"provider-1"}) {
		t.Errorf("policy dropped: %+v, want provider-1 enabled by hand", v)
	}
	// Without a policy, disabling only un-enables.
	if v := w.do(t, http.MethodPost, "/api/toggle?id=provider-2&enable=false", one, "").selection(t); len(v.Excluded) != 0 {
		t.Errorf("disabled without a policy: excluded %v", v.Excluded)
	}
}
