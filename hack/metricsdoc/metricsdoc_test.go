// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package metricsdoc_test checks that docs/metrics.md lists every metric
// the project's code defines, with its labels, and no metric that is gone.
package metricsdoc_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// metric is a metric as defined in the code or listed in the docs.
type metric struct {
	labels []string
	where  string
}

// defined reads every metric the non-test Go files under dirs define:
// the Name of a prometheus.{Counter,Gauge,Histogram,Summary}Opts (with the
// label names given to its New...Vec), and the name of a
// prometheus.NewDesc (with its variable labels). A name or label list
// that is not a literal is an error: it could not be checked.
func defined(t *testing.T, dirs ...string) map[string]metric {
	t.Helper()
	out := map[string]metric{}
	fset := token.NewFileSet()
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				fn := selector(call.Fun)
				switch {
				case fn == "prometheus.NewDesc" && len(call.Args) >= 3:
					name := stringLit(t, fset, call.Args[0])
					out[name] = metric{labels: stringsLit(t, fset, call.Args[2]), where: fset.Position(call.Pos()).String()}
				case strings.HasPrefix(fn, "prometheus.New") && len(call.Args) >= 1:
					opts, ok := call.Args[0].(*ast.CompositeLit)
					if !ok || !strings.HasSuffix(selector(opts.Type), "Opts") {
						return true
					}
					var labels []string
					if strings.HasSuffix(fn, "Vec") && len(call.Args) >= 2 {
						labels = stringsLit(t, fset, call.Args[1])
					}
					for _, el := range opts.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok && ident(kv.Key) == "Name" {
							out[stringLit(t, fset, kv.Value)] = metric{labels: labels, where: fset.Position(call.Pos()).String()}
						}
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func selector(e ast.Expr) string {
	if s, ok := e.(*ast.SelectorExpr); ok {
		return ident(s.X) + "." + s.Sel.Name
	}
	return ""
}

func ident(e ast.Expr) string {
	if i, ok := e.(*ast.Ident); ok {
		return i.Name
	}
	return ""
}

func stringLit(t *testing.T, fset *token.FileSet, e ast.Expr) string {
	t.Helper()
	if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
		s, err := strconv.Unquote(lit.Value)
		if err == nil {
			return s
		}
	}
	t.Errorf("%s: a metric name that is not a string literal cannot be checked against docs/metrics.md", fset.Position(e.Pos()))
	return ""
}

func stringsLit(t *testing.T, fset *token.FileSet, e ast.Expr) []string {
	t.Helper()
	if id, ok := e.(*ast.Ident); ok && id.Name == "nil" {
		return nil
	}
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		t.Errorf("%s: labels that are not a []string literal cannot be checked against docs/metrics.md", fset.Position(e.Pos()))
		return nil
	}
	var out []string
	for _, el := range lit.Elts {
		out = append(out, stringLit(t, fset, el))
	}
	return out
}

// row is a metric's row in docs/metrics.md: | `name` | type | `label`, ... | meaning |.
var row = regexp.MustCompile("^\\| `([a-z_:]+)` \\| [a-z]+ \\| ([^|]*) \\| [^|]+ \\|$")

// documented reads the metrics docs/metrics.md lists.
func documented(t *testing.T, path string) map[string]metric {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]metric{}
	for i, line := range strings.Split(string(data), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			if strings.HasPrefix(line, "| `liqo_") {
				t.Errorf("%s:%d: a metric's row that does not read | `name` | type | labels | meaning |: %s", path, i+1, line)
			}
			continue
		}
		var labels []string
		for l := range strings.SplitSeq(m[2], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" && l != "—" {
				labels = append(labels, l)
			}
		}
		out[m[1]] = metric{labels: labels, where: path + ":" + strconv.Itoa(i+1)}
	}
	return out
}

// TestEveryMetricIsDocumented: every metric the code defines has a row in
// docs/metrics.md with the same labels, and every row is a metric the
// code defines.
func TestEveryMetricIsDocumented(t *testing.T) {
	code := defined(t, "../../internal", "../../cmd")
	docs := documented(t, "../../docs/metrics.md")
	if len(code) == 0 {
		t.Fatal("no metric found in the code: the scan is broken")
	}
	for name, m := range code {
		d, ok := docs[name]
		switch {
		case !ok:
			t.Errorf("%s (%s) is not in docs/metrics.md", name, m.where)
		case !slices.Equal(sorted(d.labels), sorted(m.labels)):
			t.Errorf("%s has labels %v in the code (%s) but %v in docs/metrics.md", name, m.labels, m.where, d.labels)
		}
	}
	for name, d := range docs {
		if _, ok := code[name]; !ok {
			t.Errorf("%s (%s) is documented but no code defines it", name, d.where)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestDashboardUsesDocumentedMetrics: every expression of the example
// Grafana dashboard (deployments/grafana) is PromQL over metrics of
// docs/metrics.md, or over controller-runtime's work queue and reconcile
// metrics; so the dashboard cannot drift from the code.
func TestDashboardUsesDocumentedMetrics(t *testing.T) {
	data, err := os.ReadFile("../../deployments/grafana/liqo-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	docs := documented(t, "../../docs/metrics.md")
	name := regexp.MustCompile(`\b(liqo_[a-z_]+|workqueue_[a-z_]+|controller_runtime_[a-z_]+)\b`)
	exprs := 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			exprs++
			found := name.FindAllString(target.Expr, -1)
			if len(found) == 0 {
				t.Errorf("panel %q: %q uses no metric this check knows", p.Title, target.Expr)
			}
			for _, n := range found {
				if !strings.HasPrefix(n, "liqo_") {
					continue
				}
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
				if _, ok := docs[base]; !ok {
					if _, ok := docs[n]; !ok {
						t.Errorf("panel %q uses %s, which docs/metrics.md does not list", p.Title, n)
					}
				}
			}
		}
	}
	if exprs == 0 {
		t.Fatal("the dashboard has no expression")
	}
}
