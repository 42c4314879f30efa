// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package localcluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/liqo-go/liqo/internal/testenv"
)

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real clusters")
	}
}

// waitNoProcesses polls until nothing mentions dir any more.
func waitNoProcesses(t *testing.T, dir string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		left, err := ProcessesReferencing(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of %s still alive after %s: %v", dir, timeout, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTwoClustersInParallel starts two clusters at once, checks each is a
// separate working cluster, and that Stop leaves no process of either.
func TestTwoClustersInParallel(t *testing.T) {
	skipShort(t)
	var wg sync.WaitGroup
	clusters := make([]*Cluster, 2)
	errs := make([]error, 2)
	for i := range clusters {
		wg.Go(func() {
			clusters[i], errs[i] = Start(t.Context(), Options{
				Name: fmt.Sprintf("par%d", i), Dir: filepath.Join(t.TempDir(), "c"), Nodes: 2,
				ControlPlaneNode: i == 0, Log: testr.New(t),
			})
		})
	}
	wg.Wait()
	for i, c := range clusters {
		if errs[i] != nil {
			t.Fatalf("cluster %d: %v", i, errs[i])
		}
		t.Cleanup(func() { _ = c.Stop() })
	}
	if clusters[0].APIServerURL == clusters[1].APIServerURL {
		t.Fatalf("both clusters serve on %s", clusters[0].APIServerURL)
	}
	for i, c := range clusters {
		cs, err := c.Client()
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := cs.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("listing nodes of %s: %v", c.Name, err)
		}
		want := 2 + map[bool]int{true: 1}[i == 0]
		if len(nodes.Items) != want {
			t.Fatalf("%s has %d nodes, want %d", c.Name, len(nodes.Items), want)
		}
		for _, n := range nodes.Items {
			if !NodeReady(&n) || !strings.HasPrefix(n.Name, c.Name+"-") {
				t.Fatalf("%s: unexpected node %s (ready=%v)", c.Name, n.Name, NodeReady(&n))
			}
		}
		for _, comp := range Binaries {
			p := c.process(comp)
			if p == nil {
				t.Fatalf("%s: no %s process", c.Name, comp)
			}
			if _, err := os.Stat(p.LogPath); err != nil {
				t.Fatalf("%s: log of %s missing: %v", c.Name, comp, err)
			}
		}
	}

	for _, c := range clusters {
		pids := c.Processes()
		if err := c.Stop(); err != nil {
			t.Fatalf("stopping %s: %v", c.Name, err)
		}
		for _, p := range pids {
			if alive(p.PID) {
				t.Fatalf("%s: %s (pid %d) survived Stop", c.Name, p.Name, p.PID)
			}
		}
		waitNoProcesses(t, c.Dir, time.Second)
	}
}

// TestDetachedClusterStoppedFromState starts a detached cluster (as
// `liqoctl playground up` does) and stops it through its directory only,
// as `down` does from another shell.
func TestDetachedClusterStoppedFromState(t *testing.T) {
	skipShort(t)
	dir := filepath.Join(t.TempDir(), "detached")
	c, err := Start(t.Context(), Options{Name: "detached", Dir: dir, Detach: true, Log: testr.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = Reap(dir) }) // only if the assertions below fail
	running, err := ProcessesReferencing(dir)
	if err != nil || len(running) < len(Binaries) {
		t.Fatalf("want at least %d processes of the cluster running, got %v (%v)", len(Binaries), running, err)
	}
	for _, p := range c.Processes() {
		if sid, _ := unix.Getsid(p.PID); sid != p.PID {
			t.Fatalf("%s is not in a session of its own (sid %d, pid %d): it would die with the terminal", p.Name, sid, p.PID)
		}
	}
	if err := StopDir(dir); err != nil {
		t.Fatalf("StopDir: %v", err)
	}
	waitNoProcesses(t, dir, time.Second)
}

const helperEnv = "LIQO_LOCALCLUSTER_HELPER_DIR"

// TestMain doubles as the child process of TestKilledOwnerLeavesNothing:
// with helperEnv set, it starts a cluster, says READY and waits to be
// killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		os.Exit(runHelper(dir))
	}
	os.Exit(m.Run())
}

func runHelper(dir string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := Start(ctx, Options{Name: "orphan", Dir: dir}); err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	fmt.Println("READY")
	<-ctx.Done() // the parent kills this process long before
	return 1
}

// TestKilledOwnerLeavesNothing starts a cluster from a child process, kills
// that process with SIGKILL (no cleanup code can run, as when a test binary
// times out or is interrupted hard), and checks that every process of the
// cluster dies with it.
func TestKilledOwnerLeavesNothing(t *testing.T) {
	skipShort(t)
	dir := filepath.Join(t.TempDir(), "orphan")
	t.Cleanup(func() { _, _ = Reap(dir) }) // only if the assertions below fail

	cmd := exec.CommandContext(t.Context(), os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line := sc.Text(); line == "READY" || strings.HasPrefix(line, "ERROR") {
				ready <- line
			}
		}
		close(ready)
	}()
	select {
	case line := <-ready:
		if line != "READY" {
			t.Fatalf("helper failed: %s", line)
		}
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("helper did not start its cluster in time")
	}
	running, err := ProcessesReferencing(dir)
	if err != nil || len(running) < len(Binaries) {
		t.Fatalf("want the helper's cluster running, got %v (%v)", running, err)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitNoProcesses(t, dir, 10*time.Second)
}

func TestFreePortIsNeverHandedOutTwice(t *testing.T) {
	seen := map[int]bool{}
	for range 200 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}

func TestProcessesReferencingMatchesWholeDirectory(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "c1")
	sibling := filepath.Join(base, "c12")
	for _, d := range []string{dir, sibling} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A process of the sibling directory, whose path extends dir's.
	// "; true" keeps the shell from exec'ing sleep, so the marker ($0)
	// stays on the command line of the process we wait for.
	cmd := exec.CommandContext(t.Context(), "sh", "-c", "sleep 30; true", filepath.Join(sibling, "marker"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	// Until the child has exec'd, its command line is still ours.
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := ProcessesReferencing(sibling)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 && got[0] == cmd.Process.Pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ProcessesReferencing(%s) = %v, want [%d]", sibling, got, cmd.Process.Pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	got, err := ProcessesReferencing(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("ProcessesReferencing(%s) = %v, but only %s's process runs", dir, got, sibling)
	}
}

// TestStartPinned checks that a process started with CPUs runs on those
// CPUs only, and that the starting thread gets its own affinity back.
func TestStartPinned(t *testing.T) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	if all.Count() < 2 {
		testenv.Unsupported(t, "needs 2 CPUs to tell a pinned process from an unpinned one")
	}
	last := -1
	for c := range 1024 {
		if all.IsSet(c) {
			last = c
		}
	}
	p, err := startProcess("sleeper", "sleep", []string{"30"}, t.TempDir(), false, []int{last})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(time.Second) })
	var child unix.CPUSet
	if err := unix.SchedGetaffinity(p.PID, &child); err != nil {
		t.Fatal(err)
	}
	if child.Count() != 1 || !child.IsSet(last) {
		t.Errorf("child runs on %d CPUs (CPU %d set: %v), want only CPU %d", child.Count(), last, child.IsSet(last), last)
	}
	// No thread of this process stays pinned.
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		var tid int
		if _, err := fmt.Sscan(task.Name(), &tid); err != nil {
			continue
		}
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err == nil && set.Count() != all.Count() {
			t.Errorf("thread %d runs on %d CPUs after the start, want %d", tid, set.Count(), all.Count())
		}
	}
}
