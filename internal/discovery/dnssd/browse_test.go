// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package dnssd_test

import (
	"errors"
	"net"
	"testing"

	"github.com/liqo-go/liqo/internal/discovery/dnssd"
	"github.com/liqo-go/liqo/internal/discovery/dnssd/dnstest"
)

// TestBrowseNXDomainOfTheServiceIsAnEmptyList: a server answers the
// service's name with NXDOMAIN once its last instance is gone; in a domain
// that exists that is an empty list (what was listed is withdrawn), in one
// that does not it is the DNS error (nothing is withdrawn).
func TestBrowseNXDomainOfTheServiceIsAnEmptyList(t *testing.T) {
	srv, err := dnstest.Start("liqo.test.")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r := &dnssd.Resolver{Server: srv.Addr}
	inst := &dnssd.Instance{
		Name: "rome", Service: dnssd.DefaultService, Domain: "liqo.test.", Host: "rome", Port: 8443, IPs: []net.IP{net.ParseIP("127.0.0.1")},
		Announcement: dnssd.Announcement{ClusterID: "rome", AuthURL: "https://127.0.0.1:8443"},
	}
	srv.Register(inst, 30)
	found, drops, err := r.Browse(t.Context(), "liqo.test.", dnssd.DefaultService)
	if err != nil || len(drops) != 0 || len(found) != 1 || found[0].Announcement == nil || found[0].Announcement.ClusterID != "rome" {
		t.Fatalf("Browse with one instance = %+v, %v, %v", found, drops, err)
	}

	// The test server forgets the service's name with its last instance,
	// as real servers do: the name does not exist any more.
	srv.Deregister(inst)
	found, drops, err = r.Browse(t.Context(), "liqo.test.", dnssd.DefaultService)
	if err != nil || len(found) != 0 || len(drops) != 0 {
		t.Fatalf("Browse of a domain that lists nothing = %+v, %v, %v; want an empty list", found, drops, err)
	}

	_, _, err = r.Browse(t.Context(), "nothere.liqo.test.", dnssd.DefaultService)
	var de *dnssd.DNSError
	if !errors.As(err, &de) {
		t.Fatalf("Browse of a domain that does not exist = %v, want a DNSError", err)
	}
}
