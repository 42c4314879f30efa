// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package ipam

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
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
	pool := []netip.Prefix{pfx("10.64.0.0/10"), pfx("172.16.0.0/12")}
	local := []netip.Prefix{pfx("10.100.0.0/14"), pfx("10.96.0.0/12"), pfx("10.70.0.0/16")}
	for _, tc := range []struct {
		name, peer, previous string
		pool, used           []netip.Prefix
		want                 string
	}{
		{"in the pool, no overlap: seen as it is", "172.16.0.0/16", "", pool, local, "172.16.0.0/16"},
		{"overlap: a range of the pool", "10.100.0.0/14", "", pool, local, "10.64.0.0/14"},
		{"outside the pool: a range of the pool", "192.168.0.0/16", "", pool, local, "10.64.0.0/16"},
		{"a public range is remapped", "8.8.8.0/30", "", pool, local, "10.64.0.0/30"},
		{"a public range in the pool is remapped all the same", "8.8.8.0/30", "", []netip.Prefix{pfx("0.0.0.0/0")}, local, "1.0.0.0/30"},
		{"loopback is remapped", "127.0.0.0/16", "", pool, local, "10.64.0.0/16"},
		{"link-local is remapped", "169.254.169.252/30", "", pool, local, "10.64.0.0/30"},
		{"a pool of everything never yields a special range", "10.0.0.0/8", "", []netip.Prefix{pfx("0.0.0.0/0")}, []netip.Prefix{pfx("10.0.0.0/8")}, "1.0.0.0/8"},
		{"a previous choice stays", "10.100.0.0/14", "10.112.0.0/14", pool, local, "10.112.0.0/14"},
		{"a previous choice now in use is replaced", "10.100.0.0/14", "10.64.0.0/14", pool, append(local, pfx("10.64.0.0/16")), "10.72.0.0/14"},
		{"a previous choice of another size is replaced", "10.100.0.0/16", "10.112.0.0/14", pool, local, "10.64.0.0/16"},
		{"a previous choice out of the pool is replaced", "10.100.0.0/16", "192.168.0.0/16", pool, local, "10.64.0.0/16"},
		{"a previous as-stated choice of a public range is replaced", "8.8.8.0/30", "8.8.8.0/30", []netip.Prefix{pfx("0.0.0.0/0")}, local, "1.0.0.0/30"},
		{"a node's route is never taken as stated", "10.254.0.0/16", "", []netip.Prefix{pfx("10.0.0.0/8")}, append(local, pfx("10.254.0.0/16")), "10.0.0.0/16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var previous netip.Prefix
			if tc.previous != "" {
				previous = pfx(tc.previous)
			}
			got, err := Remap(pfx(tc.peer), previous, tc.pool, tc.used)
			if err != nil || got != pfx(tc.want) {
				t.Fatalf("Remap = %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}

// TestRemapProperties: for random stated ranges (any length, any
// address), random previous choices, pools and ranges in use, a range
// Remap returns has the stated size, lies inside the pool, overlaps
// nothing in use (local ranges and addresses, node routes, reserved
// ranges, other peers) and no special range, and is the stated range
// itself only when that is private. When it fails, the pool had no room.
func TestRemapProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano()))) //nolint:gosec // random ranges for a property test, not secrets
	for i := range 20000 {
		checkRemap(t, randomPrefix(rng, 0), randomPrefix(rng, 0), randomPool(rng), randomUsed(rng), i)
	}
}

// FuzzRemap checks the same properties on inputs the fuzzer picks.
func FuzzRemap(f *testing.F) {
	f.Add(uint32(0x0a000000), uint8(8), uint32(0x0a640000), uint8(14), uint32(0x0a000000), uint8(8), uint32(0x0a640000), uint8(14), uint32(0x0afe0000), uint8(16))
	f.Add(uint32(0x08080800), uint8(30), uint32(0), uint8(0), uint32(0), uint8(0), uint32(0x0a000000), uint8(8), uint32(0x7f000000), uint8(8))
	f.Fuzz(func(t *testing.T, stated uint32, statedBits uint8, previous uint32, previousBits uint8, pool uint32, poolBits uint8, used1 uint32, used1Bits uint8, used2 uint32, used2Bits uint8) {
		p := func(a uint32, bits uint8) netip.Prefix {
			return netip.PrefixFrom(addr4(a), int(bits%33)).Masked()
		}
		checkRemap(t, p(stated, statedBits), p(previous, previousBits), []netip.Prefix{p(pool, poolBits)},
			[]netip.Prefix{p(used1, used1Bits), p(used2, used2Bits)}, 0)
	})
}

func checkRemap(t *testing.T, stated, previous netip.Prefix, pool, used []netip.Prefix, i int) {
	t.Helper()
	got, err := Remap(stated, previous, pool, used)
	if err != nil {
		if !errors.Is(err, ErrPoolExhausted) {
			t.Fatalf("#%d Remap(%s, %s, %v, %v): %v, want a range or ErrPoolExhausted", i, stated, previous, pool, used, err)
		}
		return
	}
	switch {
	case got.Bits() != stated.Bits():
		t.Fatalf("#%d Remap(%s, ...) = %s: not the stated size", i, stated, got)
	case !Within(got, pool):
		t.Fatalf("#%d Remap(%s, %s, pool %v, ...) = %s: outside the pool", i, stated, previous, pool, got)
	case got == stated.Masked() && !Within(got, DefaultPool):
		// Only when the pool's own choice happens to be that range.
		if first, _ := Allocate(pool, stated.Bits(), used); first != got {
			t.Fatalf("#%d Remap(%s, ...) = %s: a non-private range taken as stated (the pool's first free range is %s)", i, stated, got, first)
		}
	}
	for _, u := range append(slices.Clip(used), Special...) {
		if Overlaps(got, u) {
			t.Fatalf("#%d Remap(%s, %s, %v, used %v) = %s: overlaps %s", i, stated, previous, pool, used, got, u)
		}
	}
}

// randomPrefix is any IPv4 range of at least minBits, any address.
func randomPrefix(rng *rand.Rand, minBits int) netip.Prefix {
	return netip.PrefixFrom(addr4(rng.Uint32()), minBits+rng.IntN(33-minBits)).Masked()
}

// addr4 is the IPv4 address of a.
func addr4(a uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], a)
	return netip.AddrFrom4(b)
}

// randomPool is, most often, a usual pool (RFC 1918, or a part of it),
// else any range.
func randomPool(rng *rand.Rand) []netip.Prefix {
	switch rng.IntN(3) {
	case 0:
		return DefaultPool
	case 1:
		return []netip.Prefix{netip.PrefixFrom(DefaultPool[rng.IntN(3)].Addr(), 8+rng.IntN(17)).Masked()}
	default:
		return []netip.Prefix{randomPrefix(rng, 0), randomPrefix(rng, 0)}
	}
}

// randomUsed is a few ranges in use: long ones (addresses, small node
// subnets) and short ones (pod and service ranges), biased towards the
// private ranges where pools are.
func randomUsed(rng *rand.Rand) []netip.Prefix {
	var used []netip.Prefix
	for range rng.IntN(8) {
		p := randomPrefix(rng, 8)
		if rng.IntN(2) == 0 {
			base := DefaultPool[rng.IntN(3)]
			a := p.Addr().As4()
			b := base.Addr().As4()
			for i := range base.Bits() / 8 {
				a[i] = b[i]
			}
			p = netip.PrefixFrom(netip.AddrFrom4(a), max(p.Bits(), base.Bits())).Masked()
		}
		used = append(used, p)
	}
	return used
}

func TestParsePrefixesNamesTheBadOne(t *testing.T) {
	_, err := ParsePrefixes([]string{"10.0.0.0/8", "10.0.0.0/33"})
	if err == nil || !strings.Contains(err.Error(), `"10.0.0.0/33"`) {
		t.Fatalf("err = %v, want one naming 10.0.0.0/33", err)
	}
}
