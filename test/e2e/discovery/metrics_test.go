// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package discovery_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestMetricsNeedAuthorization: the controller manager's metrics are
// served over HTTPS only, to callers the API server authenticates and
// allows get on /metrics (the ClusterRole liqo-metrics-reader): nothing
// to a caller without a token, to a token the API server does not know,
// or to a ServiceAccount without the role, and nothing over plain HTTP.
func TestMetricsNeedAuthorization(t *testing.T) {
	m := member(0)
	framework.LogOnFailure(t, m)
	stranger := framework.ServiceAccountToken(t, m.Cluster, "metrics-stranger", "")
	cases := []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a token the API server did not issue", "not-a-token", http.StatusUnauthorized},
		{"a ServiceAccount without the role", stranger, http.StatusForbidden},
		{"a ServiceAccount bound to " + install.MetricsReaderName, framework.ServiceAccountToken(t, m.Cluster, framework.MetricsReader, install.MetricsReaderName), http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// RBAC bindings take a moment to reach the authorizer.
			framework.Eventually(t, 10*time.Second, func() error {
				status, body := framework.ScrapeMetrics(t, m, tc.token)
				if status != tc.want {
					return fmt.Errorf("status %d, want %d: %.200s", status, tc.want, body)
				}
				if status == http.StatusOK && !strings.Contains(body, "liqo_discovery_") {
					return fmt.Errorf("allowed, but the body holds no Liqo metric: %.200s", body)
				}
				if status != http.StatusOK && strings.Contains(body, "liqo_") {
					return fmt.Errorf("refused with %d, but the body holds metrics", status)
				}
				return nil
			})
		})
	}
	t.Run("plain HTTP", func(t *testing.T) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", m.MetricsPort)) //nolint:noctx // loopback
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("plain HTTP answered %s", resp.Status)
		}
	})
}
