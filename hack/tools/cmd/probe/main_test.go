// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestTarRoundTrip: what "tar cf - PATH" writes, "tar -xmf - -C DIR"
// extracts, as kubectl cp runs them: a tree with its files' contents and
// modes, named without the leading "/".
func TestTarRoundTrip(t *testing.T) {
	src := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"a.txt": "first", "sub/b.bin": string(bytes.Repeat([]byte{0, 1, 2}, 100000))}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	var archive bytes.Buffer
	if err := tarCommand([]string{"cf", "-", src}, nil, &archive); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(archive.Bytes()))
	first, err := tr.Next()
	if err != nil || first.Name != src[1:]+"/" {
		t.Fatalf("first entry %+v (%v), want %s/ without the leading /", first, err, src[1:])
	}
	dst := t.TempDir()
	if err := tarCommand([]string{"-xmf", "-", "-C", dst}, bytes.NewReader(archive.Bytes()), nil); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		path := filepath.Join(dst, src, name)
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Errorf("%s: %d bytes (%v), want %d", name, len(got), err, len(content))
			continue
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("%s: mode %v (%v), want 0640", name, fi.Mode(), err)
		}
	}
}

// TestTarStaysInItsDirectory: an archive naming a path out of the
// directory it is extracted into is refused, and nothing is written there.
func TestTarStaysInItsDirectory(t *testing.T) {
	for _, name := range []string{"../escaped", "/abs/../../escaped", "a/../../escaped"} {
		var archive bytes.Buffer
		tw := tar.NewWriter(&archive)
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		parent := t.TempDir()
		dir := filepath.Join(parent, "into")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := tarCommand([]string{"-xmf", "-", "-C", dir}, &archive, nil); err == nil {
			t.Errorf("%s: extracted, want refused", name)
		}
		if _, err := os.Stat(filepath.Join(parent, "escaped")); err == nil {
			t.Errorf("%s: a file was written out of the directory", name)
		}
	}
}

func TestTest(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want bool
	}{{[]string{"-d", dir}, true}, {[]string{"-d", file}, false}, {[]string{"-e", file}, true}, {[]string{"-e", dir + "/none"}, false}, {[]string{"-x", dir}, false}} {
		if got := test(tc.args); got != tc.want {
			t.Errorf("test %v = %v, want %v", tc.args, got, tc.want)
		}
	}
}
