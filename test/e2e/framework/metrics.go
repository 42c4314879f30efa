// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/liqo-go/liqo/internal/install"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/playground"
)

// MetricsReader is the ServiceAccount, in the Liqo namespace, whose token
// the suites scrape metrics with, bound to install.MetricsReaderName.
const MetricsReader = "liqo-e2e-metrics-reader"

var metricsTokens sync.Map // *playground.Member -> string

// ServiceAccountToken returns a token of ServiceAccount name in the Liqo
// namespace of m, creating the account, and binding it to clusterRole
// unless that is empty.
func ServiceAccountToken(t testing.TB, m *localcluster.Cluster, name, clusterRole string) string {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(m.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := install.DefaultNamespace
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating ServiceAccount %s in %s: %v", name, m.Name, err)
	}
	if clusterRole != "" {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("binding %s to %s in %s: %v", name, clusterRole, m.Name, err)
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(6 * time.Hour / time.Second))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for %s in %s: %v", name, m.Name, err)
	}
	return tr.Status.Token
}

// ScrapeMetrics GETs a member's controller manager metrics endpoint
// (HTTPS, self-signed) with token, and returns the status and body.
func ScrapeMetrics(t testing.TB, m *playground.Member, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", m.MetricsPort), nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the endpoint's self-signed certificate, on loopback
	}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("scraping the metrics of %s: %v", m.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the metrics of %s: %v", m.Name, err)
	}
	return resp.StatusCode, string(body)
}

// Metric returns the sum of a Prometheus counter or gauge (of a histogram:
// its sample count), over the series
// whose labels include all of labels, from a member's controller manager,
// scraped as Prometheus would: with the token of a ServiceAccount bound to
// the liqo-metrics-reader ClusterRole.
func Metric(t testing.TB, m *playground.Member, name string, labels map[string]string) float64 {
	t.Helper()
	families := metricFamilies(t, m)
	var sum float64
	for _, metric := range families[name].GetMetric() {
		if hasLabels(metric.GetLabel(), labels) {
			sum += metric.GetCounter().GetValue() + metric.GetGauge().GetValue() + float64(metric.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// Bucket is a histogram's cumulative count of observations up to
// UpperBound.
type Bucket struct {
	UpperBound float64
	Count      float64
}

// Histogram returns the buckets of the controller manager's histogram
// name, summed over its series with labels, in order, +Inf last.
func Histogram(t testing.TB, m *playground.Member, name string, labels map[string]string) []Bucket {
	t.Helper()
	var out []Bucket
	for _, metric := range metricFamilies(t, m)[name].GetMetric() {
		if !hasLabels(metric.GetLabel(), labels) {
			continue
		}
		h := metric.GetHistogram()
		buckets := h.GetBucket()
		if out == nil {
			out = make([]Bucket, len(buckets)+1)
			for i, b := range buckets {
				out[i].UpperBound = b.GetUpperBound()
			}
			out[len(buckets)].UpperBound = math.Inf(1)
		}
		for i, b := range buckets {
			out[i].Count += float64(b.GetCumulativeCount())
		}
		out[len(buckets)].Count += float64(h.GetSampleCount())
	}
	return out
}

// Quantile estimates the q-quantile of the observations made between two
// readings of a histogram, as Prometheus's histogram_quantile does
// (linear within a bucket; the highest finite bound when it falls in
// +Inf). It returns NaN when nothing was observed in between.
func Quantile(q float64, before, after []Bucket) float64 {
	delta := make([]Bucket, len(after))
	for i := range after {
		delta[i] = after[i]
		if i < len(before) {
			delta[i].Count -= before[i].Count
		}
	}
	if len(delta) == 0 || delta[len(delta)-1].Count == 0 {
		return math.NaN()
	}
	rank := q * delta[len(delta)-1].Count
	lower, below := 0.0, 0.0
	for i, b := range delta {
		if b.Count >= rank {
			if math.IsInf(b.UpperBound, 1) {
				if i == 0 {
					return math.NaN()
				}
				return delta[i-1].UpperBound
			}
			if b.Count == below {
				return b.UpperBound
			}
			return lower + (b.UpperBound-lower)*(rank-below)/(b.Count-below)
		}
		lower, below = b.UpperBound, b.Count
	}
	return math.NaN()
}

// metricFamilies scrapes and parses the controller manager's metrics.
func metricFamilies(t testing.TB, m *playground.Member) map[string]*dto.MetricFamily {
	t.Helper()
	token, ok := metricsTokens.Load(m)
	if !ok {
		token = ServiceAccountToken(t, m.Cluster, MetricsReader, install.MetricsReaderName)
		metricsTokens.Store(m, token)
	}
	status, body := ScrapeMetrics(t, m, token.(string))
	if status != http.StatusOK {
		t.Fatalf("scraping the metrics of %s: %d %s", m.Name, status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing the metrics of %s: %v", m.Name, err)
	}
	return families
}

// ResidentMiB is a process's resident set size (VmRSS), in MiB.
func ResidentMiB(tb testing.TB, pid int) float64 {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		tb.Fatalf("reading the memory of pid %d: %v", pid, err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				tb.Fatalf("parsing %q: %v", line, err)
			}
			return kb / 1024
		}
	}
	tb.Fatalf("no VmRSS for pid %d", pid)
	return 0
}
