// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
	"github.com/liqo-go/liqo/internal/broker"
	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/testenv/browser"
)

// rowHas is a JavaScript test that provider id's row holds s.
func rowHas(id, s string) string {
	return fmt.Sprintf(`(() => { const r = document.querySelector('#providers-table tr[data-id=%q]'); return !!r && r.innerText.includes(%q); })()`, id, s)
}

// TestDashboard, in a real headless Chromium against a real API server: a
// consumer signs in with its token; the page lists the providers with
// their measured KPIs (sparklines included) and offers, and follows a
// measurement's change without a reload; a policy saved in the page is
// refused naming the field when invalid and, once valid, the decision's
// explanation is shown per provider; the In use buttons, by mouse and by
// keyboard, change the Selection in the broker cluster. Another
// consumer's selection is nowhere in the page, nor reachable through the
// event stream, and a provider's label made of markup stays text.
func TestDashboard(t *testing.T) {
	w := startBroker(t, broker.Options{Modes: broker.Modes{Orchestrator: true, Catalog: true}, Namespace: install.DefaultNamespace})
	ctx := t.Context()
	latency := map[string]time.Duration{"near": 5 * time.Millisecond, "far": 40 * time.Millisecond}
	for _, id := range []string{"far", "near"} {
		w.create(t, peered(id, map[string]string{"near": "rome", "far": "paris"}[id], true, false), virtualNode("liqo-"+id, id))
		objs := offer(id, map[string]string{"near": "0.03", "far": "0.01"}[id])
		if id == "far" {
			// What a peer writes into its offer is shown as text.
			objs[1].(*sharingv1alpha1.Advertisement).Spec.Labels = map[string]string{"topology.kubernetes.io/zone": `<img src=x onerror="document.title='owned'">`}
		}
		w.create(t, objs...)
		measured(t, w, id, latency[id], nil)
	}
	w.create(t, peered("consumer-1", "milan", false, true), peered("consumer-2", "lyon", false, true))
	one, two := w.consumerToken(t, "consumer-1"), w.consumerToken(t, "consumer-2")
	other := &brokerv1alpha1.Selection{ObjectMeta: metav1.ObjectMeta{Namespace: discoveryv1alpha1.TenantNamespace("consumer-2"), Name: brokerv1alpha1.SelectionName},
		Spec: brokerv1alpha1.SelectionSpec{Providers: []string{"far"}, Policy: &brokerv1alpha1.Policy{Count: 1, Weights: brokerv1alpha1.Weights{Price: 97}}}}
	w.create(t, other)
	selection := func() brokerv1alpha1.SelectionSpec {
		var sel brokerv1alpha1.Selection
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: discoveryv1alpha1.TenantNamespace("consumer-1"), Name: brokerv1alpha1.SelectionName}, &sel); err != nil {
			t.Fatalf("reading consumer-1's Selection: %v", err)
		}
		return sel.Spec
	}

	p := browser.New(t)
	p.Run("opening the dashboard", chromedp.Navigate(w.url+"/"), chromedp.WaitVisible(chromedp.CSS(`#token`)))
	if title := browser.Eval[string](p, `document.title`); title != "Liqo broker" {
		t.Errorf("the page's title: %q", title)
	}
	p.Run("signing in", chromedp.SetValue(chromedp.CSS(`#token`), one), chromedp.Click(chromedp.CSS(`#signin-form button[type=submit]`)))
	p.Until("the consumer is named", `document.getElementById('who').innerText.includes('consumer-1')`)

	// The providers, with what the broker measured and their offers.
	p.Until("the providers' KPIs", rowHas("near", "Up")+" && "+rowHas("near", "5.0 ms")+" && "+rowHas("far", "40 ms")+
		" && "+rowHas("near", "cpu 8")+" && "+rowHas("near", "EUR per unit per hour")+" && "+rowHas("far", "cpu 0.01"))
	sparks := browser.Eval[[]string](p, `[...document.querySelectorAll('#providers-table svg.spark')].map(s => s.getAttribute('aria-label'))`)
	if len(sparks) != 4 || !slices.ContainsFunc(sparks, func(s string) bool { return strings.HasPrefix(s, "Latency of rome over the last hour") }) {
		t.Errorf("the sparklines' labels: %q, want latency and availability for each provider", sparks)
	}
	measured(t, w, "near", 30*time.Millisecond, nil)
	p.Until("a new measurement shown without a reload", rowHas("near", "30 ms"))

	// A provider's markup stays text.
	injected, title := browser.Eval[int](p, `document.querySelectorAll('#providers-table img').length`), browser.Eval[string](p, `document.title`)
	if injected != 0 || title != "Liqo broker" || !strings.Contains(p.Text(), `<img src=x onerror=`) {
		t.Errorf("a provider's label made markup: %d img elements, title %q", injected, title)
	}

	// A policy: refused naming the field, then saved and explained.
	setPolicy := func(js string) {
		p.Run("writing the policy", chromedp.SetValue(chromedp.CSS(`#policy-text`), js),
			chromedp.Click(chromedp.CSS(`#policy-form button[type=submit]`)))
	}
	setPolicy(`{"count": 300}`)
	p.Until("the refusal names the field", `document.getElementById('message').innerText.includes('spec.policy.count')`)
	if spec := selection(); spec.Policy != nil {
		t.Errorf("a refused policy was saved: %+v", spec.Policy)
	}
	setPolicy(`{"count": 1, "weights": {"latency": 3}, "requirements": {"maxLatency": "35ms"}}`)
	p.Until("the decision explained", rowHas("near", "Chosen")+" && "+rowHas("far", "Filtered"))
	browser.Eval[int](p, `document.querySelectorAll('#providers-table details').forEach(d => d.open = true), 0`)
	p.Until("the criterion and the measured value", rowHas("far", "requirements.maxLatency")+" && "+rowHas("far", "measured 40.0ms, limit 35.0ms")+" && "+rowHas("near", "latency"))
	if spec := selection(); spec.Policy == nil || spec.Policy.Count != 1 || spec.Policy.Weights.Latency != 3 {
		t.Errorf("the policy saved in the page: %+v", spec.Policy)
	}

	// Toggles: by mouse, pin far in; by keyboard, pin near out.
	p.Run("pinning far in", chromedp.Click(chromedp.CSS(`button[aria-label="Use paris (far)"]`)))
	p.Until("far pinned in", rowHas("far", "pinned in"))
	if spec := selection(); !slices.Equal(spec.Providers, []string{"far"}) {
		t.Errorf("after pinning far in, the Selection's providers: %v", spec.Providers)
	}
	p.Run("pinning near out with the keyboard", chromedp.Focus(chromedp.CSS(`button[aria-label="Use rome (near)"]`)), chromedp.KeyEvent("\r"))
	p.Until("near pinned out", rowHas("near", "pinned out")+" && "+rowHas("near", "Not in use"))
	if spec := selection(); !slices.Equal(spec.Excluded, []string{"near"}) {
		t.Errorf("after pinning near out, the Selection's excluded: %v", spec.Excluded)
	}
	pressed := browser.Eval[[]string](p, `[...document.querySelectorAll('button.toggle')].map(b => b.dataset.id + '=' + b.getAttribute('aria-pressed'))`)
	if !slices.Equal(pressed, []string{"far=true", "near=false"}) {
		t.Errorf("the toggles' states: %v", pressed)
	}

	// Another consumer's selection is nowhere.
	if text := p.Text(); strings.Contains(text, "consumer-2") || strings.Contains(text, "lyon") || strings.Contains(text, `"price": 97`) {
		t.Errorf("consumer-1's page shows consumer-2:\n%s", text)
	}
	if a := w.get(t, "/api/v1/events?consumer=consumer-2", one); a.code != http.StatusForbidden {
		t.Errorf("consumer-1 streaming consumer-2's state: %d %s, want 403", a.code, a.body)
	}
	// consumer-2's own stream is its own.
	first := firstEvent(t, w.url+"/api/v1/events", two)
	if !strings.Contains(first, `"consumer":"consumer-2"`) || !strings.Contains(first, `"price":97`) || strings.Contains(first, "consumer-1") {
		t.Errorf("consumer-2's first event: %.400s", first)
	}

	// Signing out forgets the token.
	p.Run("signing out", chromedp.Click(chromedp.CSS(`#signout`)), chromedp.WaitVisible(chromedp.CSS(`#token`)))
	if browser.Eval[bool](p, `sessionStorage.length > 0`) {
		t.Error("the token is still stored after signing out")
	}
}

// firstEvent reads the first event of the stream at url with token.
func firstEvent(t *testing.T, url, token string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("the event stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			return data
		}
	}
	t.Fatalf("the event stream ended with no event: %v", sc.Err())
	return ""
}
