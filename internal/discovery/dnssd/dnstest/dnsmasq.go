// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package dnstest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/liqo-go/liqo/internal/discovery/dnssd"
)

// Dnsmasq runs Debian's dnsmasq (package dnsmasq-base) on a loopback
// port, as a DNS server this project did not write: it serves the local
// records it is given the way dnsmasq does by default (TTL 0), and
// forwards the zones it is told to forward, without caching. Records are
// changed by restarting it on the same port.
type Dnsmasq struct {
	*server
	forward map[string]string
}

// StartDnsmasq starts dnsmasq with no local records, forwarding each zone
// of forward to its server (host:port). Close stops it.
func StartDnsmasq(forward map[string]string) (*Dnsmasq, error) {
	srv, err := newServer("dnsmasq", "dnsmasq-base")
	if err != nil {
		return nil, err
	}
	d := &Dnsmasq{server: srv, forward: forward}
	if err := d.Serve(nil); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Serve restarts dnsmasq serving instances, and lines (dnsmasq
// configuration, e.g. a malformed txt-record) besides.
func (d *Dnsmasq) Serve(instances []*dnssd.Instance, lines ...string) error {
	conf := []string{
		"port=" + d.port(),
		"listen-address=127.0.0.1",
		"bind-interfaces",
		"no-resolv",
		"no-hosts",
		"no-poll",
		"cache-size=0",
		"user=root",
		"log-facility=" + filepath.Join(d.dir, "dnsmasq.log"),
	}
	for zone, server := range d.forward {
		host, p, err := net.SplitHostPort(server)
		if err != nil {
			return fmt.Errorf("forwarding %s: %w", zone, err)
		}
		conf = append(conf, fmt.Sprintf("server=/%s/%s#%s", strings.TrimSuffix(zone, "."), host, p))
	}
	for _, inst := range instances {
		conf = append(conf, instanceConfig(inst)...)
	}
	conf = append(conf, lines...)
	path := filepath.Join(d.dir, "dnsmasq.conf")
	if err := os.WriteFile(path, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	return d.restart("", "--keep-in-foreground", "--pid-file", "--conf-file="+path)
}

// instanceConfig is the dnsmasq configuration that serves an instance's
// PTR, SRV, TXT and A records.
func instanceConfig(inst *dnssd.Instance) []string {
	name := func(fqdn string) string { return strings.TrimSuffix(fqdn, ".") }
	quoted := make([]string, 0, len(inst.Announcement.TXT()))
	for _, s := range inst.Announcement.TXT() {
		quoted = append(quoted, strconv.Quote(s))
	}
	out := []string{
		"ptr-record=" + name(inst.ServiceFQDN()) + "," + name(inst.InstanceFQDN()),
		fmt.Sprintf("srv-host=%s,%s,%d", name(inst.InstanceFQDN()), name(inst.HostFQDN()), inst.Port),
		"txt-record=" + name(inst.InstanceFQDN()) + "," + strings.Join(quoted, ","),
	}
	for _, ip := range inst.IPs {
		out = append(out, "host-record="+name(inst.HostFQDN())+","+ip.String())
	}
	return out
}
