// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package ipam

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func addr(s string) netip.Addr  { return netip.MustParseAddr(s) }

func TestTranslate(t *testing.T) {
	for _, tc := range []struct {
		addr, from, to string
		want           string // "" when the mapping is refused
	}{
		{"10.100.3.7", "10.100.0.0/16", "10.81.0.0/16", "10.81.3.7"},
		{"10.100.255.255", "10.100.0.0/16", "10.81.0.0/16", "10.81.255.255"},
		{"10.100.0.10", "10.100.0.0/14", "172.16.0.0/14", "172.16.0.10"},
		{"10.103.1.2", "10.100.0.0/14", "172.20.0.0/14", "172.23.1.2"},
		{"192.168.1.77", "192.168.1.64/26", "10.0.0.0/26", "10.0.0.13"},
		{"10.100.3.7", "10.100.3.7/32", "10.1.1.1/32", "10.1.1.1"},
		{"10.100.3.7", "10.100.0.0/16", "10.100.0.0/16", "10.100.3.7"},
		{"fd00::1:2", "fd00::/96", "fd01::/96", "fd01::1:2"},
		// Refused: outside the range, different sizes or families, an
		// unmasked prefix.
		{"10.101.0.1", "10.100.0.0/16", "10.81.0.0/16", ""},
		{"10.100.0.1", "10.100.0.0/16", "10.81.0.0/24", ""},
		{"10.100.0.1", "10.100.0.0/16", "fd00::/16", ""},
		{"10.100.0.1", "10.100.0.0/16", "10.81.1.0/16", ""},
	} {
		got, ok := Translate(addr(tc.addr), pfx(tc.from), pfx(tc.to))
		if tc.want == "" {
			if ok {
				t.Errorf("Translate(%s, %s, %s) = %s, want refused", tc.addr, tc.from, tc.to, got)
			}
			continue
		}
		if !ok || got != addr(tc.want) {
			t.Errorf("Translate(%s, %s, %s) = %s, %v; want %s", tc.addr, tc.from, tc.to, got, ok, tc.want)
		}
		// The mapping is a bijection: back again gives the address.
		if back, ok := Translate(got, pfx(tc.to), pfx(tc.from)); !ok || back != addr(tc.addr) {
			t.Errorf("Translate back of %s = %s, %v; want %s", got, back, ok, tc.addr)
		}
	}
}

func TestLast(t *testing.T) {
	for in, want := range map[string]string{
		"10.100.0.0/14": "10.103.255.255",
		"10.0.0.0/8":    "10.255.255.255",
		"10.1.2.3/32":   "10.1.2.3",
		"10.1.2.3/24":   "10.1.2.255",
		"fd00::/120":    "fd00::ff",
	} {
		if got := Last(pfx(in)); got != addr(want) {
			t.Errorf("Last(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestAllocate(t *testing.T) {
	pool := []netip.Prefix{pfx("10.0.0.0/8"), pfx("192.168.0.0/16")}
	for _, tc := range []struct {
		name string
		bits int
		used []string
		want string
	}{
		{"first of the pool", 16, nil, "10.0.0.0/16"},
		{"past a used range", 16, []string{"10.0.0.0/16"}, "10.1.0.0/16"},
		{"past a smaller range inside the first candidate", 16, []string{"10.0.128.0/24"}, "10.1.0.0/16"},
		{"past a larger range", 16, []string{"10.0.0.0/12"}, "10.16.0.0/16"},
		{"past several", 14, []string{"10.0.0.0/14", "10.4.0.0/16", "10.100.0.0/14"}, "10.8.0.0/14"},
		{"next pool when the first is full", 16, []string{"10.0.0.0/8"}, "192.168.0.0/16"},
		{"no room in any pool", 12, []string{"10.0.0.0/9", "10.128.0.0/10", "10.192.0.0/12", "10.208.0.0/12", "10.224.0.0/11"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			used, err := ParsePrefixes(tc.used)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Allocate(pool, tc.bits, used)
			if tc.want == "" {
				if !errors.Is(err, ErrPoolExhausted) {
					t.Fatalf("Allocate = %s, %v; want ErrPoolExhausted", got, err)
				}
				return
			}
			if err != nil || got != pfx(tc.want) {
				t.Fatalf("Allocate = %s, %v; want %s", got, err, tc.want)
			}
			for _, u := range used {
				if Overlaps(got, u) {
					t.Errorf("%s overlaps %s, which is used", got, u)
				}
			}
		})
	}
}

// TestAllocateManyPeers: every peer gets a range of its own, never one in
// use, until the pool is exhausted.
func TestAllocateManyPeers(t *testing.T) {
	pool := []netip.Prefix{pfx("10.64.0.0/12")}
	used := []netip.Prefix{pfx("10.70.0.0/16")} // the local external CIDR, inside the pool
	for i := range 15 {
		got, err := Allocate(pool, 16, used)
		if err != nil {
			t.Fatalf("peer %d: %v", i, err)
		}
		for _, u := range used {
			if Overlaps(got, u) {
				t.Fatalf("peer %d got %s, which overlaps %s", i, got, u)
			}
		}
		used = append(used, got)
	}
	if got, err := Allocate(pool, 16, used); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("17th /16 of a /12: %s, %v; want ErrPoolExhausted", got, err)
	}
}

func TestRemap(t *testing.T) {
	pool := []netip.Prefix{pfx("10.64.0.0/10")}
	local := []netip.Prefix{pfx("10.100.0.0/14"), pfx("10.96.0.0/12"), pfx("10.70.0.0/16")}
	for _, tc := range []struct {
		name, peer, previous string
		used                 []netip.Prefix
		want                 string
	}{
		{"no overlap: seen as it is", "172.16.0.0/16", "", local, "172.16.0.0/16"},
		{"overlap: a range of the pool", "10.100.0.0/14", "", local, "10.64.0.0/14"},
		{"a previous choice stays", "10.100.0.0/14", "10.112.0.0/14", local, "10.112.0.0/14"},
		{"a previous choice now in use is replaced", "10.100.0.0/14", "10.64.0.0/14", append(local, pfx("10.64.0.0/16")), "10.72.0.0/14"},
		{"a previous choice of another size is replaced", "10.100.0.0/16", "10.112.0.0/14", local, "10.64.0.0/16"},
		{"a previous choice out of the pool is replaced", "10.100.0.0/16", "192.168.0.0/16", local, "10.64.0.0/16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var previous netip.Prefix
			if tc.previous != "" {
				previous = pfx(tc.previous)
			}
			got, err := Remap(pfx(tc.peer), previous, pool, tc.used)
			if err != nil || got != pfx(tc.want) {
				t.Fatalf("Remap = %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}

func TestParsePrefixesNamesTheBadOne(t *testing.T) {
	_, err := ParsePrefixes([]string{"10.0.0.0/8", "10.0.0.0/33"})
	if err == nil || !strings.Contains(err.Error(), `"10.0.0.0/33"`) {
		t.Fatalf("err = %v, want one naming 10.0.0.0/33", err)
	}
}
