// Command layers fails when a package of the module imports a package of
// a layer above its own. The layers, bottom first, are in [Layers] and in
// docs/development.md; `make verify` runs this check.
//
// A package belongs to the group whose path is its own or a parent of it.
// A package may import any package of its own group and of every group in
// a lower layer; never one of another group in its layer or above it.
// Test files are held to the same rule, except under test/ and bench/.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// Module is the module whose packages are checked.
const Module = "github.com/liqo-go/liqo"

// Layers lists the groups of packages, bottom layer first. Keep
// docs/development.md in step.
var Layers = [][]string{
	// What a test does on a machine that lacks what it needs.
	{"internal/testenv"},
	// The API: types and the protocol's names (labels, annotations,
	// finalizers, condition types and reasons).
	{"api", "deployments"},
	// What liqoctl install puts in a cluster: the CRDs, the namespace,
	// the rights (below the test clusters, which a test installs it on).
	{"internal/install"},
	// Building blocks that know no controller: cluster identity,
	// certificates and users, the auth exchange, remote watches, the test
	// clusters and networks, reconciler phases.
	{"internal/clusterid", "internal/identity", "internal/auth", "internal/remotewatch",
		"internal/localcluster", "internal/netlab", "internal/phase"},
	// HTTP callers checked by the API server (its tests start one).
	{"internal/kubeauth"},
	// The ClusterConfig in force (its tests install the CRDs on a test
	// cluster).
	{"internal/clusterconfig"},
	// The registry of known clusters.
	{"internal/foreigncluster"},
	// Finding clusters: mDNS, DNS-SD, LAN and WAN.
	{"internal/discovery"},
	// Authenticating and peering.
	{"internal/peering"},
	// Advertising resources.
	{"internal/sharing"},
	// The network fabric: address spaces, tunnels, translation.
	{"internal/network"},
	// Namespaces offloaded to providers, pods admitted to virtual nodes.
	{"internal/offloading"},
	// Virtual nodes and the reflection of pods and objects.
	{"internal/virtualkubelet"},
	// The broker: catalog, orchestrator.
	{"internal/broker"},
	// Assembling the components.
	{"internal/controllermanager", "internal/playground"},
	{"internal/ctl"},
	// Programs, end-to-end tests and benchmarks.
	{"cmd", "test", "bench", "hack"},
}

// Package is what the check needs of `go list -json`.
type Package struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// Violation is one import the layers forbid.
type Violation struct {
	From, To string
	Test     bool
}

func (v Violation) String() string {
	kind := "imports"
	if v.Test {
		kind = "imports in its tests"
	}
	return fmt.Sprintf("%s %s %s, which is %s", v.From, kind, v.To, where(v.From, v.To))
}

func where(from, to string) string {
	_, lf, _ := group(from)
	gt, lt, ok := group(to)
	switch {
	case !ok:
		return "in no layer"
	case lt > lf:
		return fmt.Sprintf("in a layer above it (%s)", gt)
	default:
		return fmt.Sprintf("another group of its own layer (%s)", gt)
	}
}

// group returns the group and layer of a package path relative to the
// module ("internal/peering").
func group(rel string) (string, int, bool) {
	for layer, groups := range Layers {
		for _, g := range groups {
			if rel == g || strings.HasPrefix(rel, g+"/") {
				return g, layer, true
			}
		}
	}
	return "", 0, false
}

// Check returns the imports among pkgs that the layers forbid, and the
// packages that are in no layer.
func Check(pkgs []Package) (violations []Violation, unplaced []string) {
	for _, p := range pkgs {
		from, ok := strings.CutPrefix(p.ImportPath, Module+"/")
		if !ok {
			continue // the module's root package, if any, holds nothing
		}
		gf, lf, ok := group(from)
		if !ok {
			unplaced = append(unplaced, from)
			continue
		}
		testsExempt := gf == "test" || gf == "bench"
		check := func(imports []string, test bool) {
			for _, imp := range imports {
				to, ok := strings.CutPrefix(imp, Module+"/")
				if !ok {
					continue
				}
				gt, lt, ok := group(to)
				if ok && (gt == gf || lt < lf) {
					continue
				}
				violations = append(violations, Violation{From: from, To: to, Test: test})
			}
		}
		check(p.Imports, false)
		if !testsExempt {
			check(p.TestImports, true)
			check(p.XTestImports, true)
		}
	}
	return violations, unplaced
}

// List runs `go list` on the module in dir.
func List(ctx context.Context, dir string) ([]Package, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-json=ImportPath,Imports,TestImports,XTestImports", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p Package
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading go list: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

// Run checks the module in dir and writes what it finds to w.
func Run(ctx context.Context, dir string, w io.Writer) error {
	pkgs, err := List(ctx, dir)
	if err != nil {
		return err
	}
	violations, unplaced := Check(pkgs)
	for _, v := range violations {
		fmt.Fprintln(w, v)
	}
	slices.Sort(unplaced)
	for _, p := range unplaced {
		fmt.Fprintf(w, "%s is in no layer: add it to hack/layers and docs/development.md\n", p)
	}
	if n := len(violations) + len(unplaced); n > 0 {
		return fmt.Errorf("%d layering problem(s); the layers are in docs/development.md", n)
	}
	return nil
}

func main() {
	dir := flag.String("C", ".", "the module's directory")
	flag.Parse()
	if err := Run(context.Background(), *dir, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
