// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package foundation_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/api"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestKilledComponentsComeBack: the controller manager and the API server,
// each killed with SIGKILL (the component itself, not its supervisor), are
// started again within 10 s with the restart counted, ready again, and the cluster
// converges: the controller manager, back on the restarted API server,
// applies a ClusterConfig change.
func TestKilledComponentsComeBack(t *testing.T) {
	m, _ := members()
	framework.LogOnFailure(t, m)
	ctx := t.Context()
	for _, name := range []string{playground.ControllerManager, localcluster.KubeAPIServer} {
		supervisor := m.Process(name)
		victim, err := childOf(supervisor.PID)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		before := m.Restarts(name)
		if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		framework.Eventually(t, 10*time.Second, func() error {
			now, err := childOf(supervisor.PID)
			if err == nil && now == victim {
				err = fmt.Errorf("still process %d", now)
			}
			if err != nil {
				return fmt.Errorf("%s not started again yet: %w", name, err)
			}
			if got := m.Restarts(name); got != before+1 {
				return fmt.Errorf("%s restarts %d, want %d", name, got, before+1)
			}
			return nil
		})
		// Started again by its supervisor within 10 s; ready when its own
		// start allows, which on 2 cores beside another suite took an
		// API server more than 10 s (a TLS handshake timing out).
		framework.Eventually(t, time.Minute, func() error { return ready(ctx, m, name) })
		t.Logf("%s back %s after SIGKILL", name, time.Since(killed).Round(10*time.Millisecond))
	}

	// A restarted API server serves the CRDs' groups a moment after it
	// answers: the first write is retried until then.
	var c client.Client
	var cc configv1alpha1.ClusterConfig
	framework.Eventually(t, 30*time.Second, func() error {
		var err error
		if c, err = client.New(m.RESTConfig, client.Options{Scheme: api.NewScheme()}); err != nil {
			return err
		}
		if err := c.Get(ctx, client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cc); err != nil {
			return err
		}
		patch := client.MergeFrom(cc.DeepCopy())
		cc.Spec.DiscoveryConfig.TTL++
		return c.Patch(ctx, &cc, patch)
	})
	framework.Eventually(t, 30*time.Second, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cc); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(cc.Status.Conditions, configv1alpha1.ConditionReady)
		if cond == nil || cond.ObservedGeneration != cc.Generation || cc.Status.ClusterID != m.ClusterID {
			return fmt.Errorf("ClusterConfig generation %d not applied: %+v", cc.Generation, cc.Status)
		}
		return nil
	})
}

// ready says whether the restarted component serves again.
func ready(ctx context.Context, m *playground.Member, name string) error {
	switch name {
	case playground.ControllerManager:
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(m.ProbePort)+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	default:
		cs, err := m.Client()
		if err != nil {
			return err
		}
		_, err = cs.Discovery().ServerVersion()
		return err
	}
}

// childOf returns the one child of pid: the component its supervisor runs.
func childOf(pid int) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after
		// its closing parenthesis.
		i := bytes.LastIndexByte(stat, ')')
		var state string
		var ppid int
		if i < 0 {
			continue
		}
		if _, err := fmt.Sscanf(string(stat[i+1:]), " %s %d", &state, &ppid); err == nil && ppid == pid && state != "Z" {
			return child, nil
		}
	}
	return 0, fmt.Errorf("process %d has no child", pid)
}
