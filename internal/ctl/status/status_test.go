// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
)

func TestPrint(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	fc := func(name string, join bool, conds ...metav1.Condition) discoveryv1alpha1.ForeignCluster {
		return discoveryv1alpha1.ForeignCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-90 * time.Minute)),
				Labels: map[string]string{discoveryv1alpha1.DiscoveryTypeLabel: "Manual"}},
			Spec:   discoveryv1alpha1.ForeignClusterSpec{ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: name, ClusterName: name + "-name"}, Join: join},
			Status: discoveryv1alpha1.ForeignClusterStatus{Conditions: conds, IncomingPeering: !join},
		}
	}
	peered := fc("b-peered", true,
		metav1.Condition{Type: discoveryv1alpha1.ConditionAuthenticated, Status: metav1.ConditionTrue, Reason: "IdentityIssued"},
		metav1.Condition{Type: discoveryv1alpha1.ConditionPeeringRequested, Status: metav1.ConditionTrue, Reason: "Accepted"})
	refused := fc("a-refused", true,
		metav1.Condition{Type: discoveryv1alpha1.ConditionAuthenticated, Status: metav1.ConditionFalse, Reason: "WrongToken", Message: "the peering token is wrong"})
	var out bytes.Buffer
	if err := (&Options{Verbose: true, Now: func() time.Time { return now }}).Print(&out, []discoveryv1alpha1.ForeignCluster{peered, refused}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "NAME ") {
		t.Fatalf("got:\n%s\nwant a header, two rows sorted by name, a blank line and one note", out.String())
	}
	for i, want := range [][]string{
		{"a-refused", "a-refused-name", "Manual", "true", "-", "False", "(WrongToken)", "-", "false", "-", "-", "90m"},
		{"b-peered", "b-peered-name", "Manual", "true", "-", "True", "True", "false", "-", "-", "90m"},
	} {
		if got := strings.Fields(lines[i+1]); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("row %d: %q, want %q", i+1, got, want)
		}
	}
	if lines[4] != "a-refused Authenticated: the peering token is wrong" {
		t.Errorf("note %q, want the message of the phase that is not done", lines[4])
	}

	// A cordoned virtual node shows where the operator looks.
	out.Reset()
	cordoned := fc("c-cordoned", true,
		metav1.Condition{Type: discoveryv1alpha1.ConditionVirtualNodeReady, Status: metav1.ConditionTrue, Reason: discoveryv1alpha1.ReasonVirtualNodeCordoned,
			Message: "Virtual node liqo-c: cordoned"})
	if err := (&Options{Verbose: true, Now: func() time.Time { return now }}).Print(&out, []discoveryv1alpha1.ForeignCluster{cordoned}); err != nil {
		t.Fatal(err)
	}
	lines = strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[1], "True (Cordoned)") || lines[3] != "c-cordoned VirtualNodeReady: Virtual node liqo-c: cordoned" {
		t.Errorf("cordoned virtual node shown as:\n%s", out.String())
	}

	out.Reset()
	if err := (&Options{}).Print(&out, nil); err != nil || out.String() != "No clusters known.\n" {
		t.Fatalf("no clusters: %q %v", out.String(), err)
	}
}

// What a peer wrote (its cluster name, an error it answered with) can
// neither send a control sequence to the terminal nor make a row or a
// note of its own.
func TestPrintPeerTextMadeSafe(t *testing.T) {
	fc := discoveryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: "p-1"},
		Spec: discoveryv1alpha1.ForeignClusterSpec{ClusterIdentity: discoveryv1alpha1.ClusterIdentity{ClusterID: "p-1", ClusterName: "rome\x1b[2J"}, Join: true},
		Status: discoveryv1alpha1.ForeignClusterStatus{Conditions: []metav1.Condition{{Type: discoveryv1alpha1.ConditionAuthenticated,
			Status: metav1.ConditionFalse, Reason: "AuthFailed", Message: "refused: \x1b]0;owned\x07\r\nfake-peer Authenticated: fine"}}}}
	var out bytes.Buffer
	if err := (&Options{Verbose: true}).Print(&out, []discoveryv1alpha1.ForeignCluster{fc}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if strings.ContainsAny(s, "\x1b\x07\r") {
		t.Errorf("a control character reached the terminal:\n%q", s)
	}
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want a header, one row, a blank line and one note:\n%s", len(lines), s)
	}
	for _, want := range []string{`"rome\x1b[2J"`, `"refused: \x1b]0;owned\a\r\nfake-peer Authenticated: fine"`} {
		if !strings.Contains(s, want) {
			t.Errorf("the output does not show %s quoted:\n%s", want, s)
		}
	}
}
