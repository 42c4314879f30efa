// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package bench

import (
	"context"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// BenchmarkClusterStart starts and stops one local cluster (etcd, API
// server, controller manager, scheduler, kwok and one Ready node) per
// iteration. It reports the p50 and worst start time, and the resident
// memory of the cluster's processes once it is ready.
//
//	make bench            # 3 starts
//	go test -run '^$' -bench ClusterStart -benchtime 5x ./bench/
func BenchmarkClusterStart(b *testing.B) {
	var starts []time.Duration
	var rssMB []float64
	for i := 0; b.Loop(); i++ {
		c, err := localcluster.Start(context.Background(), localcluster.Options{
			Name:  "bench" + strconv.Itoa(i),
			Dir:   filepath.Join(b.TempDir(), "c"),
			Nodes: 1,
		})
		if err != nil {
			b.Fatal(err)
		}
		starts = append(starts, c.StartDuration)
		var rss float64
		for _, p := range c.Processes() {
			rss += framework.ResidentMiB(b, p.PID)
		}
		rssMB = append(rssMB, rss)
		if err := c.Stop(); err != nil {
			b.Fatal(err)
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	b.ReportMetric(starts[len(starts)/2].Seconds(), "p50-start-s")
	b.ReportMetric(starts[len(starts)-1].Seconds(), "max-start-s")
	b.ReportMetric(mean(rssMB), "rss-MB/cluster")
	b.Logf("starts: %v; resident memory per cluster (MB): %.0f", starts, rssMB)
}

func mean(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}
