package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	pkg := func(path string, imports ...string) Package {
		p := Package{ImportPath: Module + "/" + path}
		for _, i := range imports {
			p.Imports = append(p.Imports, Module+"/"+i)
		}
		return p
	}
	cases := []struct {
		name    string
		pkgs    []Package
		want    []string // violations, as From>To
		unplace []string
	}{
		{name: "downward and within a group", pkgs: []Package{
			pkg("internal/peering", "api/discovery/v1alpha1", "internal/identity", "internal/foreigncluster"),
			pkg("internal/discovery/lan", "internal/discovery/mdns", "internal/foreigncluster"),
			pkg("test/e2e/framework", "internal/virtualkubelet", "internal/peering"),
		}},
		{name: "upward", pkgs: []Package{pkg("internal/peering", "internal/offloading")}, want: []string{"internal/peering>internal/offloading"}},
		{name: "sideways in a layer", pkgs: []Package{pkg("internal/identity", "internal/auth")}, want: []string{"internal/identity>internal/auth"}},
		{name: "a prefix is not a parent", pkgs: []Package{pkg("internal/authz")}, unplace: []string{"internal/authz"}},
		{name: "to a package in no layer", pkgs: []Package{pkg("internal/peering", "internal/nowhere")}, want: []string{"internal/peering>internal/nowhere"}},
		{name: "tests too", pkgs: []Package{{ImportPath: Module + "/internal/sharing", XTestImports: []string{Module + "/internal/virtualkubelet"}}},
			want: []string{"internal/sharing>internal/virtualkubelet"}},
		{name: "but not those of the e2e suites", pkgs: []Package{{ImportPath: Module + "/test/e2e/peering", TestImports: []string{Module + "/internal/peering"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, u := Check(tc.pkgs)
			var got []string
			for _, x := range v {
				got = append(got, x.From+">"+x.To)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") || strings.Join(u, " ") != strings.Join(tc.unplace, " ") {
				t.Fatalf("violations %v, unplaced %v; want %v, %v", got, u, tc.want, tc.unplace)
			}
		})
	}
}

// TestRunFailsOnABadImport runs the whole check, go list included, on a
// small module with the module's path where peering imports offloading.
func TestRunFailsOnABadImport(t *testing.T) {
	dir := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, path)), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module "+Module+"\n\ngo 1.24\n")
	write("internal/offloading/o.go", "package offloading\n\nconst X = 1\n")
	write("internal/peering/p.go", "package peering\n\nimport \""+Module+"/internal/offloading\"\n\nconst Y = offloading.X\n")

	var out strings.Builder
	err := Run(t.Context(), dir, &out)
	if err == nil || !strings.Contains(out.String(), "internal/peering imports internal/offloading, which is in a layer above it") {
		t.Fatalf("Run: %v, output %q; want the upward import reported", err, out.String())
	}

	// The same module without the import passes.
	write("internal/peering/p.go", "package peering\n\nconst Y = 1\n")
	out.Reset()
	if err := Run(t.Context(), dir, &out); err != nil {
		t.Fatalf("Run without the bad import: %v, output %q", err, out.String())
	}
}
