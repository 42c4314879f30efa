// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
)

var _ provider.Usage = &Sessions{}

// maxUsageBytes bounds the metrics list read from a provider: a peer's
// answer, not a fact.
const maxUsageBytes = 16 << 20

// podMetricsList is what a PodMetricsList (metrics.k8s.io/v1beta1) says
// that PodUsage reads.
type podMetricsList struct {
	Items []struct {
		Metadata   metav1.ObjectMeta `json:"metadata"`
		Timestamp  metav1.Time       `json:"timestamp"`
		Window     metav1.Duration   `json:"window"`
		Containers []struct {
			Name  string              `json:"name"`
			Usage corev1.ResourceList `json:"usage"`
		} `json:"containers"`
	} `json:"items"`
}

// PodUsage implements provider.Usage: the provider's metrics API
// (metrics.k8s.io, metrics-server's), read with the virtual kubelet's
// identity there, in its namespace only. A provider without that API, or
// one that does not grant reading it, answers provider.ErrNoUsage. What the provider says is its word: only
// CPU and memory pass, negative amounts are dropped.
func (s *Sessions) PodUsage(ctx context.Context, id, remote string) (map[string]provider.PodUsage, error) {
	sess, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	// JSON, whatever the session prefers: metrics-server answers
	// protobuf to a client that accepts it first.
	body, err := sess.cs.Discovery().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/namespaces", remote, "pods").
		SetHeader("Accept", "application/json").Stream(ctx)
	switch {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		// The group is not served (a namespace with no pods answers an
		// empty list), or the provider does not let this cluster read it.
		return nil, fmt.Errorf("provider %s: %w: %w", id, provider.ErrNoUsage, err)
	case err != nil:
		return nil, fmt.Errorf("reading the usage of provider %s's namespace %s: %w", id, remote, err)
	}
	defer func() { _ = body.Close() }()
	var list podMetricsList
	if err := json.NewDecoder(io.LimitReader(body, maxUsageBytes)).Decode(&list); err != nil {
		return nil, fmt.Errorf("reading the usage of provider %s's namespace %s: %w", id, remote, err)
	}
	out := make(map[string]provider.PodUsage, len(list.Items))
	for _, item := range list.Items {
		if item.Window.Duration <= 0 || item.Window.Duration > time.Hour {
			continue
		}
		u := provider.PodUsage{Timestamp: item.Timestamp.Time, Window: item.Window.Duration, Containers: map[string]corev1.ResourceList{}}
		for _, c := range item.Containers {
			l := corev1.ResourceList{}
			for name, most := range usageBounds {
				if q, ok := c.Usage[name]; ok && q.Sign() >= 0 && q.Cmp(most) <= 0 {
					l[name] = q
				}
			}
			u.Containers[c.Name] = l
		}
		out[item.Metadata.Name] = u
	}
	return out, nil
}

// usageBounds are the resources PodUsage passes on, and the most of each
// it believes a container uses: beyond, a provider's figure is dropped.
var usageBounds = map[corev1.ResourceName]resource.Quantity{
	corev1.ResourceCPU:    resource.MustParse("1M"),  // a million cores
	corev1.ResourceMemory: resource.MustParse("1Ei"), // an exbibyte
}
