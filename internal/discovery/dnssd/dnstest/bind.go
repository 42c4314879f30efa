// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package dnstest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/miekg/dns"

	"github.com/liqo-go/liqo/internal/discovery/dnssd"
)

// Bind runs ISC BIND 9's named (Debian package bind9) on a loopback port,
// authoritative for one zone read from a zone file, as an operator's DNS
// server would be: no recursion, no notifies, nothing sent anywhere.
// Records are changed by writing the zone file again and restarting it
// on the same port.
type Bind struct {
	*server
	zone string
	ttl  uint32
}

// StartBind starts named serving zone (e.g. "bind.test.") with no
// instances, its records with ttl. Close stops it.
func StartBind(zone string, ttl uint32) (*Bind, error) {
	srv, err := newServer("named", "bind9")
	if err != nil {
		return nil, err
	}
	b := &Bind{server: srv, zone: dns.Fqdn(zone), ttl: ttl}
	if err := b.Serve(nil); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Serve restarts named with a zone file holding instances, and lines
// (zone file records, e.g. a malformed TXT) besides.
func (b *Bind) Serve(instances []*dnssd.Instance, lines ...string) error {
	zone := []string{
		fmt.Sprintf("$TTL %d", b.ttl),
		fmt.Sprintf("%s IN SOA ns.%s hostmaster.%s 1 3600 600 86400 %d", b.zone, b.zone, b.zone, b.ttl),
		fmt.Sprintf("%s IN NS ns.%s", b.zone, b.zone),
		fmt.Sprintf("ns.%s IN A 127.0.0.1", b.zone),
	}
	for _, inst := range instances {
		for _, rr := range inst.Records(b.ttl) {
			zone = append(zone, rr.String())
		}
	}
	zone = append(zone, lines...)
	zoneFile := filepath.Join(b.dir, "zone.db")
	if err := os.WriteFile(zoneFile, []byte(strings.Join(zone, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	conf := fmt.Sprintf(`options {
	directory %q;
	pid-file none;
	listen-on port %s { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	notify no;
	dnssec-validation no;
	allow-query { 127.0.0.1; };
};
controls { };
logging { channel out { file %q; severity info; }; category default { out; }; };
zone %q { type primary; file %q; };
`, b.dir, b.port(), filepath.Join(b.dir, "named.log"), strings.TrimSuffix(b.zone, "."), zoneFile)
	confFile := filepath.Join(b.dir, "named.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return err
	}
	// -g: in the foreground, logging to stderr, as the user who runs it.
	return b.restart(b.zone, "-g", "-c", confFile)
}
