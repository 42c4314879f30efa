// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package framework holds what every end-to-end suite needs: a fresh build
// of the Liqo binaries, a playground of real clusters started once per
// package from TestMain, and the guarantee that nothing it started
// survives the suite, whether the tests pass, fail or are interrupted.
package framework

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/liqo-go/liqo/api"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	ctlplayground "github.com/liqo-go/liqo/internal/ctl/playground"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/internal/playground"
	"github.com/liqo-go/liqo/internal/testenv"
)

// Suite is a running set of clusters shared by a package's tests.
type Suite struct {
	*playground.Playground
	// Dir is the suite's scratch directory: binaries, clusters, logs.
	Dir string
	// ControllerManagerBin is the freshly built liqo-controller-manager.
	ControllerManagerBin string
	// ReadyAt is when every cluster and controller manager was ready.
	ReadyAt time.Time
}

// Options says what a suite starts.
type Options struct {
	// Clusters is the number of clusters; defaults to 2.
	Clusters int
	// NodesPerCluster defaults to 1.
	NodesPerCluster int
	// Customize adjusts each cluster's harness options.
	Customize func(name string, o *localcluster.Options)
	// ClusterConfig adjusts the ClusterConfig each cluster starts with.
	ClusterConfig func(name string, spec *configv1alpha1.ClusterConfigSpec)
	// ControllerManagerArgs are extra flags for every controller manager.
	ControllerManagerArgs []string
	// ControllerManagerArgsFor adds flags for one cluster's.
	ControllerManagerArgsFor func(name string) []string
	// Supervise runs every component under liqoctl's supervisor (bin/liqoctl
	// playground supervise), as `liqoctl playground up` does: a component
	// that exits is restarted.
	Supervise bool
	// OnReady, when set, runs once the suite is up and before any test:
	// the place to measure what must be measured from the start.
	OnReady func(s *Suite) error
	// Network gives each cluster a real node, with the chart's gateway
	// and route agent built from the working tree, instead of kwok
	// workers (playground.Options.Network). On a machine without real
	// nodes the suite is skipped, and fails in CI.
	Network bool
	// DNSProxy, with Network, runs the chart's DNS proxy in every cluster
	// (playground.Options.DNSProxy), asking DNSProxyUpstream
	// (HOST:PORT, as the pods' network namespace sees it) when set.
	DNSProxy         bool
	DNSProxyUpstream string
	// Broker adds the playground's broker cluster, running liqo-broker
	// built from the working tree with these modes
	// (playground.Options.Broker).
	Broker []string
}

// Main is the body of a suite's TestMain: it builds the binaries, starts
// the clusters, runs the tests, stops everything and fails the run when a
// process outlives the suite. Logs are kept and their place printed when a
// test failed; otherwise the scratch directory is removed.
func Main(m *testing.M, opts Options, suite **Suite) int {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping end-to-end suite in -short mode")
		return 0
	}
	if opts.Network {
		if err := realNodesSupported(); err != nil {
			if testenv.InCI() {
				fmt.Fprintf(os.Stderr, "CI=true and this machine cannot run this suite: no real nodes: %v\n", err)
				return 1
			}
			fmt.Printf("skipping end-to-end suite: no real nodes: %v\n", err)
			return 0
		}
	}
	// controller-runtime's clients log through this; without it they warn.
	ctrllog.SetLogger(stdoutLogger())
	dir, err := os.MkdirTemp("", "liqo-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := start(dir, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the suite: %v\n", err)
		reapAndCheck(dir)
		fmt.Fprintf(os.Stderr, "logs kept in %s\n", dir)
		return 1
	}
	*suite = s
	code := 0
	if opts.OnReady != nil {
		if err := opts.OnReady(s); err != nil {
			fmt.Fprintf(os.Stderr, "suite not ready: %v\n", err)
			code = 1
		}
	}
	if code == 0 {
		code = m.Run()
	}
	if err := s.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the suite: %v\n", err)
		code = 1
	}
	if !reapAndCheck(dir) {
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "logs kept in %s\n", dir)
	} else {
		_ = os.RemoveAll(dir)
	}
	return code
}

func start(dir string, opts Options) (*Suite, error) {
	if opts.Clusters == 0 {
		opts.Clusters = 2
	}
	if opts.NodesPerCluster == 0 && !opts.Network {
		opts.NodesPerCluster = 1
	}
	// Builds have their own bound: cold, with another suite compiling
	// beside it on two cores, building the race-enabled controller
	// manager and the gateway's image took more than five minutes in CI.
	bctx, bcancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer bcancel()
	bin, err := BuildControllerManager(bctx, dir)
	if err != nil {
		return nil, err
	}
	var brokerBin string
	if len(opts.Broker) > 0 {
		if brokerBin, err = Build(bctx, dir, playground.BrokerProcess); err != nil {
			return nil, err
		}
	}
	var gatewayImage string
	if opts.Network {
		if gatewayImage, err = PlaygroundGatewayImage(bctx, filepath.Join(dir, "images")); err != nil {
			return nil, err
		}
	}
	var supervisor []string
	if opts.Supervise {
		bin, err := localcluster.FindBinDir()
		if err != nil {
			return nil, err
		}
		liqoctl := filepath.Join(bin, "liqoctl")
		if _, err := os.Stat(liqoctl); err != nil {
			return nil, fmt.Errorf("the supervisor %s is missing (make build): %w", liqoctl, err)
		}
		supervisor = ctlplayground.Supervisor(liqoctl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, err := playground.Up(ctx, playground.Options{
		Supervisor:               supervisor,
		Dir:                      filepath.Join(dir, "playground"),
		Clusters:                 opts.Clusters,
		NodesPerCluster:          opts.NodesPerCluster,
		ControllerManagerBin:     bin,
		Customize:                opts.Customize,
		ClusterConfig:            opts.ClusterConfig,
		ControllerManagerArgs:    opts.ControllerManagerArgs,
		ControllerManagerArgsFor: opts.ControllerManagerArgsFor,
		Network:                  opts.Network,
		GatewayImage:             gatewayImage,
		Broker:                   opts.Broker,
		BrokerBin:                brokerBin,
		DNSProxy:                 opts.DNSProxy,
		DNSProxyUpstream:         opts.DNSProxyUpstream,
		Out:                      os.Stdout,
		Log:                      stdoutLogger(),
	})
	if err != nil {
		return nil, err
	}
	return &Suite{Playground: p, Dir: dir, ControllerManagerBin: bin, ReadyAt: time.Now()}, nil
}

// realNodesSupported says why this machine cannot run real nodes, or nil.
func realNodesSupported() error {
	bin, err := localcluster.FindBinDir()
	if err != nil {
		return err
	}
	return localcluster.RealNodesSupported(bin)
}

// reapAndCheck kills anything still running from dir and reports whether
// nothing was.
func reapAndCheck(dir string) bool {
	n, err := localcluster.Reap(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "reaping: %v\n", err)
		return false
	}
	if n > 0 {
		fmt.Fprintf(os.Stderr, "%d processes outlived the suite and were killed\n", n)
		return false
	}
	return true
}

// BuildTimeout bounds the builds a suite does before its clusters start.
const BuildTimeout = 15 * time.Minute

// BuildControllerManager builds liqo-controller-manager from the working
// tree into dir, so that a suite never tests a stale binary.
func BuildControllerManager(ctx context.Context, dir string) (string, error) {
	return Build(ctx, dir, playground.ControllerManager)
}

// Build builds cmd/<name> from the working tree into dir, and returns
// the binary's path.
func Build(ctx context.Context, dir, name string) (string, error) {
	out := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/liqo-go/liqo/cmd/"+name)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building %s: %w", name, err)
	}
	return out, nil
}

func stdoutLogger() logr.Logger {
	return funcr.New(func(prefix, args string) { fmt.Println(prefix, args) }, funcr.Options{})
}

// Client returns an admin controller-runtime client for a member.
func Client(t testing.TB, m *playground.Member) client.Client {
	t.Helper()
	c, err := client.New(m.RESTConfig, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatalf("creating a client for %s: %v", m.Name, err)
	}
	return c
}

// Clientset returns an admin client-go clientset for a member.
func Clientset(t testing.TB, m *playground.Member) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(m.RESTConfig)
	if err != nil {
		t.Fatalf("creating a clientset for %s: %v", m.Name, err)
	}
	return cs
}

// LogOnFailure prints where a member's logs are when the test fails.
func LogOnFailure(t testing.TB, members ...*playground.Member) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range members {
				t.Logf("logs of %s: %s", m.Name, m.LogDir())
			}
		}
	})
}

// Eventually polls cond every interval until it returns nil or timeout
// passes, then fails the test with the last error.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %v", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Consistently checks cond for duration, twenty times or every second if
// that is more often, and fails the test at the first error: what must hold
// for a while, not only once.
func Consistently(t testing.TB, duration time.Duration, cond func() error) {
	t.Helper()
	every := min(time.Second, max(duration/20, 50*time.Millisecond))
	deadline := time.Now().Add(duration)
	for {
		if err := cond(); err != nil {
			t.Fatalf("condition stopped holding before %s were over: %v", duration, err)
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(every)
	}
}

// CleanupTimeout bounds what a test's cleanup does.
const CleanupTimeout = time.Minute

// Cleanup registers f to run when the test ends, with a context of its own
// bounded by CleanupTimeout: the test's context is already cancelled then.
func Cleanup(t testing.TB, f func(ctx context.Context)) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), CleanupTimeout)
		defer cancel()
		f(ctx)
	})
}

// DeleteOnCleanup deletes obj with c when the test ends, and reports a
// failure other than the object being gone already.
func DeleteOnCleanup(t testing.TB, c client.Client, obj client.Object) {
	t.Helper()
	Cleanup(t, func(ctx context.Context) {
		if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			t.Errorf("cleanup: deleting %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
		}
	})
}

func hasLabels(have []*dto.LabelPair, want map[string]string) bool {
	found := 0
	for _, l := range have {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			found++
		}
	}
	return found == len(want)
}

// RepoRoot is the root of the source tree the tests run in.
func RepoRoot() (string, error) {
	root, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(root, "hack", "tools", "go.mod")); err == nil {
			return root, nil
		}
		if filepath.Dir(root) == root {
			return "", errors.New("not in the source tree")
		}
		root = filepath.Dir(root)
	}
}

// BuildImages builds, from this tree, the images of the binaries that
// run in a cluster (the controller manager, the gateway) for this
// machine's architecture, as make images does, into dir; it returns their
// archives, for a real node's containerd, and the controller manager's
// reference, tagged e2e.
func BuildImages(ctx context.Context, dir string) (archives []string, ref string, err error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, "", err
	}
	return BuildImagesFrom(ctx, root, dir, "e2e")
}

// BuildImagesFrom is BuildImages from the sources at src (another
// commit's checkout), tagged tag. A checkout without the gateway builds
// the controller manager alone.
func BuildImagesFrom(ctx context.Context, src, dir, tag string) (archives []string, ref string, err error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, "", err
	}
	arch := runtime.GOARCH
	bins := filepath.Join(dir, "image-bin-"+tag)
	names := []string{playground.ControllerManager}
	if _, err := os.Stat(filepath.Join(src, "cmd", Gateway)); err == nil {
		names = append(names, Gateway)
	}
	var cmds []*exec.Cmd
	for _, name := range names {
		build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", filepath.Join(bins, "linux_"+arch)+"/", "./cmd/"+name)
		build.Dir = src
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		cmds = append(cmds, build)
	}
	out := filepath.Join(dir, "images-"+tag)
	images := exec.CommandContext(ctx, "go", append([]string{"run", "./cmd/images", "--bin-dir", bins, "--out", out,
		"--platforms", "linux/" + arch, "--repository", "ghcr.io/liqo-go", "--tag", tag}, names...)...)
	images.Dir = filepath.Join(root, "hack", "tools")
	for _, cmd := range append(cmds, images) {
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, "", fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
		}
	}
	for _, name := range names {
		archives = append(archives, filepath.Join(out, name+"-linux-"+arch+".tar"))
	}
	return archives, "ghcr.io/liqo-go/" + playground.ControllerManager + ":" + tag, nil
}

// PlaygroundGatewayImage builds, from this tree, the gateway's image as a
// playground with a network imports it (tagged playground.GatewayImageTag),
// into dir, and returns its archive.
func PlaygroundGatewayImage(ctx context.Context, dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	archives, _, err := BuildImagesFrom(ctx, root, dir, playground.GatewayImageTag)
	if err != nil {
		return "", err
	}
	for _, a := range archives {
		if strings.HasPrefix(filepath.Base(a), Gateway+"-") {
			return a, nil
		}
	}
	return "", fmt.Errorf("no %s image among %v", Gateway, archives)
}

// Gateway is the gateway's binary and image name.
const Gateway = "liqo-gateway"
