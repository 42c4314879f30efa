// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package wgkey is WireGuard's keys: generation, the public key of a
// private one, and their text forms (base64, as wg(8) and the API objects
// write them; hex, as wireguard-go's configuration protocol does).
package wgkey

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"

	"golang.org/x/crypto/curve25519"
)

// KeyLen is the length of a WireGuard key, private or public.
const KeyLen = 32

// Key is a WireGuard (Curve25519) key. Its text form is base64, as wg(8)
// prints it and as the API objects carry it.
type Key [KeyLen]byte

// Generate returns a new private key, clamped as Curve25519 asks.
func Generate() (Key, error) {
	var k Key
	if _, err := rand.Read(k[:]); err != nil {
		return Key{}, fmt.Errorf("generating a WireGuard key: %w", err)
	}
	k[0] &= 248
	k[31] = k[31]&127 | 64
	return k, nil
}

// Parse reads a key in base64, naming what is wrong with it. The all-zero
// key is refused: it is what an unset key reads as, and no peer has it.
func Parse(s string) (Key, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return Key{}, fmt.Errorf("a WireGuard key is base64: %w", err)
	}
	if len(b) != KeyLen {
		return Key{}, fmt.Errorf("a WireGuard key has %d bytes, not %d", KeyLen, len(b))
	}
	if Key(b).IsZero() {
		return Key{}, errors.New("the all-zero key is no WireGuard key")
	}
	return Key(b), nil
}

// Public is the public key of the private key k.
func (k Key) Public() Key {
	pub, err := curve25519.X25519(k[:], curve25519.Basepoint)
	if err != nil {
		// Only a low-order result fails, which a clamped private key
		// cannot give.
		return Key{}
	}
	return Key(pub)
}

// IsZero says whether k is unset.
func (k Key) IsZero() bool { return k == Key{} }

// String is the base64 form of k.
func (k Key) String() string { return base64.StdEncoding.EncodeToString(k[:]) }

// Hex is the form of the WireGuard configuration protocol.
func (k Key) Hex() string { return hex.EncodeToString(k[:]) }

// ParseHex reads a key in the form of the configuration protocol.
func ParseHex(s string) (Key, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != KeyLen {
		return Key{}, fmt.Errorf("%q is not a key of the WireGuard configuration protocol (64 hex digits)", s)
	}
	return Key(b), nil
}

// MarshalText writes k in base64.
func (k Key) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads k from base64.
func (k *Key) UnmarshalText(b []byte) error {
	parsed, err := Parse(string(b))
	if err != nil {
		return err
	}
	*k = parsed
	return nil
}
