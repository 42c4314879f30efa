// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	brokerapi "github.com/liqo-go/liqo/internal/broker"
)

func TestPrintClusters(t *testing.T) {
	lat, tunnel, age := 12.5, 0.8, 3.0
	now := metav1.Now()
	cs := []brokerapi.Cluster{
		{ClusterID: "p-1", ClusterName: "rome", Provider: true,
			Free:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("6Gi")},
			Offer: &brokerapi.Offer{Prices: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.03")}, Currency: "EUR", Period: "Hour", Labels: map[string]string{corev1.LabelTopologyZone: "eu-1a"}},
			KPIs: &brokerapi.KPIs{Measured: &now, AgeSeconds: &age, Reachable: true, LatencyMillis: &lat, TunnelLatencyMillis: &tunnel,
				Uptime: map[brokerv1alpha1.UptimeWindow]float64{brokerv1alpha1.Window24h: 0.995, brokerv1alpha1.Window1h: 1}, Pods: brokerapi.PodHealth{Running: 4, Pending: 1}}},
		{ClusterID: "c-1", ClusterName: "milan", Consumer: true},
	}
	var out bytes.Buffer
	if err := printClusters(&out, cs, true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want the header and the one provider:\n%s", len(lines), out.String())
	}
	for _, want := range []string{"p-1", "rome", "yes", "12.5ms", "0.8ms", "99.50%", "100.00%", "3", "6Gi", "cpu 0.03 EUR/Hour", "4/1/0", "eu-1a", "3s ago"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("the row %q does not show %q", lines[1], want)
		}
	}
	if err := checkOutput("wide", false); err == nil {
		t.Error("wide accepted where there is no wide table")
	}
	if err := checkOutput("xml", true); err == nil || !strings.Contains(err.Error(), "--output") {
		t.Errorf("xml: %v", err)
	}
}

func TestPrintDecision(t *testing.T) {
	d := &brokerv1alpha1.Decision{Time: metav1.NewTime(time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)), Chosen: []string{"near"}, Message: "chose near of 2",
		Providers: []brokerv1alpha1.ProviderDecision{
			{ClusterID: "near", Verdict: brokerv1alpha1.VerdictChosen, Score: 900, Message: "passed every criterion and scored 900",
				Terms: []brokerv1alpha1.Term{{Name: "latency", Score: 1000, Weight: 2, Measured: "5.0ms"}}},
			{ClusterID: "far", Verdict: brokerv1alpha1.VerdictFiltered, Criterion: "requirements.maxLatency", Measured: "80.0ms", Limit: "50.0ms",
				Message: "filtered out by requirements.maxLatency: 80.0ms, limit 50.0ms"},
		}}
	var out bytes.Buffer
	if err := printDecision(&out, d); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"Decided 2026-11-28T08:00:00Z: chose near of 2", "1000×2 (5.0ms)", "Filtered", "requirements.maxLatency: 80.0ms, limit 50.0ms"} {
		if !strings.Contains(s, want) {
			t.Errorf("the explanation does not show %q:\n%s", want, s)
		}
	}
}

func TestSetPolicyRefusesWhatIsNoPolicy(t *testing.T) {
	o := &Options{Broker: "broker-1", URL: "http://127.0.0.1:1", Timeout: time.Second}
	if err := o.SetPolicy(t.Context(), "", nil, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "--filename") {
		t.Errorf("no file: %v", err)
	}
	if err := o.SetPolicy(t.Context(), "-", strings.NewReader("count: [1\n"), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "not a policy") {
		t.Errorf("malformed YAML: %v", err)
	}
}

// TestPeerStringsCannotDriveTheTerminal: what a peer wrote, printed in a
// table (a provider's name, zone label, a decision's message), cannot
// send a control sequence to the terminal nor make a row of its own.
func TestPeerStringsCannotDriveTheTerminal(t *testing.T) {
	const evil = "rome\x1b[2J\nfake-provider\tyes"
	cs := []brokerapi.Cluster{{ClusterID: "p-1", ClusterName: evil, Provider: true,
		Offer: &brokerapi.Offer{Labels: map[string]string{corev1.LabelTopologyZone: "eu\x1b]0;owned\x07"}}, KPIs: &brokerapi.KPIs{}}}
	var out bytes.Buffer
	if err := printClusters(&out, cs, true); err != nil {
		t.Fatal(err)
	}
	d := &brokerv1alpha1.Decision{Message: "chose\x1b[31m", Providers: []brokerv1alpha1.ProviderDecision{{ClusterID: "p-1", Message: "unreachable: \r\nfake row"}}}
	if err := printDecision(&out, d); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if strings.ContainsAny(s, "\x1b\x07\r") {
		t.Errorf("a control character reached the terminal:\n%q", s)
	}
	if lines := strings.Split(strings.TrimSpace(s), "\n"); len(lines) != 5 {
		t.Errorf("%d lines, want 5 (two headers, two rows, the decision's line): a peer's string made its own:\n%s", len(lines), s)
	}
	for _, want := range []string{`"rome\x1b[2J\nfake-provider\tyes"`, `"unreachable: \r\nfake row"`} {
		if !strings.Contains(s, want) {
			t.Errorf("the output does not show %s, quoted:\n%s", want, s)
		}
	}
}
