package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// fakeBinaries writes a "binary" per platform: what the images hold does
// not need to run for the assembly to be checked.
func fakeBinaries(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []string{"linux_amd64", "linux_arm64"} {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p, "tool"), []byte(content+" for "+p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// build runs the command and returns what it printed.
func buildAll(t *testing.T, binDir string) (out string, printed string) {
	t.Helper()
	out = t.TempDir()
	var buf bytes.Buffer
	if err := run([]string{"--bin-dir", binDir, "--out", out, "--epoch", "1700000000", "--tag", "v1", "--links", "cat,tar", "tool"}, &buf); err != nil {
		t.Fatal(err)
	}
	// The output paths differ between builds; the rest must not.
	return out, strings.ReplaceAll(buf.String(), out, "OUT")
}

func TestImagesAreReproducibleAndComplete(t *testing.T) {
	bins := fakeBinaries(t, "binary")
	out1, printed1 := buildAll(t, bins)
	_, printed2 := buildAll(t, bins)
	if printed1 != printed2 {
		t.Fatalf("two builds of the same binaries differ:\n%s\n%s", printed1, printed2)
	}
	_, printedOther := buildAll(t, fakeBinaries(t, "another binary"))
	if printedOther == printed1 {
		t.Fatal("another binary gives the same digests")
	}

	lp, err := layout.FromPath(filepath.Join(out1, "tool"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 || topManifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v1" {
		t.Fatalf("the layout lists %+v, want one index tagged v1", topManifest.Manifests)
	}
	idx, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, d.Platform)
		// The archive holds the same image, named for containerd.
		archived := untar(t, filepath.Join(out1, "tool-"+d.Platform.OS+"-"+d.Platform.Architecture+".tar"))
		alp, err := layout.FromPath(archived)
		if err != nil {
			t.Fatal(err)
		}
		aidx, err := alp.ImageIndex()
		if err != nil {
			t.Fatal(err)
		}
		am, err := aidx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(am.Manifests) != 1 || am.Manifests[0].Digest != d.Digest || am.Manifests[0].Annotations["io.containerd.image.name"] != "ghcr.io/liqo-go/tool:v1" {
			t.Fatalf("the %s archive lists %+v, want %s named ghcr.io/liqo-go/tool:v1", d.Platform, am.Manifests, d.Digest)
		}
		if _, err := aidx.Image(d.Digest); err != nil {
			t.Fatalf("the %s archive: %v", d.Platform, err)
		}
	}
	if strings.Join(platforms, " ") != "linux/amd64 linux/arm64" {
		t.Fatalf("platforms %v", platforms)
	}
}

func checkImage(t *testing.T, img v1.Image, p *v1.Platform) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		t.Errorf("config platform %s/%s, index says %s", cf.OS, cf.Architecture, p)
	}
	if cf.Config.User != "65532:65532" || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/tool" {
		t.Errorf("user %q, entrypoint %v", cf.Config.User, cf.Config.Entrypoint)
	}
	epoch := time.Unix(1700000000, 0).UTC()
	if !cf.Created.Equal(epoch) {
		t.Errorf("created %s, want the epoch", cf.Created)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*tar.Header{}
	contents := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if !h.ModTime.Equal(epoch) {
				t.Errorf("%s has time %s, want the epoch", h.Name, h.ModTime)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name], contents[h.Name] = h, data
		}
		_ = rc.Close()
	}
	if h := files["tool"]; h == nil || h.Mode != 0o755 || string(contents["tool"]) != "binary for "+p.OS+"_"+p.Architecture {
		t.Errorf("the binary: %+v %q", h, contents["tool"])
	}
	for _, l := range []string{"cat", "tar"} {
		if h := files[l]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "tool" {
			t.Errorf("the link %s: %+v, want a symbolic link to the binary", l, h)
		}
	}
	if h := files["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("/tmp: %+v", h)
	}
	if h := files["home/nonroot/"]; h == nil || h.Uid != nonRoot {
		t.Errorf("the non-root home: %+v", h)
	}
	if !strings.Contains(string(contents["etc/passwd"]), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd: %q", contents["etc/passwd"])
	}
	pool, rest := 0, contents["etc/ssl/certs/ca-certificates.crt"]
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			t.Fatalf("a CA certificate: %v", err)
		}
		pool++
	}
	if pool < 100 || len(bytes.TrimSpace(rest)) > 0 {
		t.Errorf("%d CA certificates and %d bytes left over", pool, len(rest))
	}
}

func TestBadFlagsAreRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--out", "x", "tool"},
		{"--bin-dir", "x", "--out", "y", "--platforms", "linux", "tool"},
		{"--bin-dir", "x", "--out", "y", "--labels", "novalue", "tool"},
		{"--bin-dir", "x", "--out", "y", "--links", "bin/sh", "tool"},
		{"--bin-dir", "x", "--out", "y", "--links", "tool", "tool"},
		{"--bin-dir", "x", "--out", "y", "--links", "cat,cat", "tool"},
		{"--bin-dir", t.TempDir(), "--out", t.TempDir(), "tool"}, // no binaries there
	} {
		if err := run(args, io.Discard); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

// untar extracts an archive of regular files and directories.
func untar(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
