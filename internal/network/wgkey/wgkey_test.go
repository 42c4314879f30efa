// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package wgkey

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	k, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, in, want string // want: "" for a key, else a part of the error
	}{
		{"a public key", k.Public().String(), ""},
		{"the all-zero key", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "all-zero"},
		{"not base64", "not a key!", "base64"},
		{"too short", "AAAA", "bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.want == "" {
				if err != nil || got.String() != tc.in {
					t.Fatalf("Parse(%q) = %s, %v", tc.in, got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%q) = %s, %v; want an error about %s", tc.in, got, err, tc.want)
			}
		})
	}
}
