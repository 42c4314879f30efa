// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package localcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Restart backoff of a supervised component, as a kubelet restarts a
// container: doubling from the first delay up to the last, back to the
// first once the component ran for backoffReset.
const (
	backoffFirst = 500 * time.Millisecond
	backoffMax   = 8 * time.Second
	backoffReset = time.Minute
)

// Supervise runs bin with args and starts it again whenever it exits,
// after a backoff, counting the restarts in restartsFile (a number and a
// newline). SIGTERM and SIGINT go to the component and end the
// supervision once it exits; if the supervisor dies, the kernel kills the
// component. It is what `liqoctl playground supervise` runs for each
// component of a playground (Options.Supervisor).
func Supervise(ctx context.Context, restartsFile, bin string, args []string, log io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	restarts := 0
	if err := writeRestarts(restartsFile, restarts); err != nil {
		return err
	}
	delay := backoffFirst
	for {
		cmd := exec.Command(bin, args...) //nolint:noctx // stopped by the signal forwarded below, not by a context
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		started := time.Now()
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("starting %s: %w", bin, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			if err := <-exited; err != nil {
				fmt.Fprintf(log, "supervisor: %s stopped: %v\n", filepath.Base(bin), err)
			}
			return nil
		case err := <-exited:
			if time.Since(started) > backoffReset {
				delay = backoffFirst
			}
			fmt.Fprintf(log, "supervisor: %s exited (%v) after %s; restarting in %s\n", filepath.Base(bin), err, time.Since(started).Round(time.Millisecond), delay)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, backoffMax)
		restarts++
		if err := writeRestarts(restartsFile, restarts); err != nil {
			return err
		}
	}
}

func writeRestarts(path string, n int) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(n)+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadRestarts returns the restarts counted in path; 0 when the component
// is not supervised.
func ReadRestarts(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return n
}

// RestartsFile is where a component's restarts are counted.
func (c *Cluster) RestartsFile(name string) string {
	return filepath.Join(c.LogDir(), name+".restarts")
}

// Restarts is how many times the supervisor restarted the component.
func (c *Cluster) Restarts(name string) int { return ReadRestarts(c.RestartsFile(name)) }

// Restarts lists, from a cluster's directory, the supervised components
// that were restarted, with their counts (for `liqoctl playground status`).
func Restarts(dir string) map[string]int {
	files, _ := filepath.Glob(filepath.Join(dir, "logs", "*.restarts"))
	out := map[string]int{}
	for _, f := range files {
		if n := ReadRestarts(f); n > 0 {
			out[strings.TrimSuffix(filepath.Base(f), ".restarts")] = n
		}
	}
	return out
}
