// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package dnssd

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// DefaultService is the DNS-SD service type clusters announce.
const DefaultService = "_liqo_auth._tcp"

// TXT keys of an announcement.
const (
	KeyClusterID   = "id"
	KeyClusterName = "name"
	KeyAuthURL     = "url"
	KeyNamespace   = "ns"
)

// Limits on what is accepted from the network. A TXT string cannot exceed
// 255 bytes on the wire; the others bound what a peer can make us store.
const (
	maxTXTStrings   = 16
	maxTXTString    = 255
	maxClusterName  = 253
	maxAuthURL      = 255 - len(KeyAuthURL) - 1
	maxDNSLabel     = 63
	maxInstanceName = 63
)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Announcement is what a cluster says about itself, in its TXT record.
type Announcement struct {
	// ClusterID is the cluster's stable identity (a DNS label).
	ClusterID string
	// ClusterName is the human-readable name; optional.
	ClusterName string
	// AuthURL is the https URL of the cluster's auth service. A URL rather
	// than an IP address, so that clusters may be reached by host name.
	AuthURL string
	// Namespace is the Liqo namespace of the cluster; optional.
	Namespace string
}

// Drop reasons, the values of the reason label of the dropped-input metric.
const (
	ReasonMalformed  = "malformed"  // not a DNS message, or a TXT string not key=value
	ReasonTruncated  = "truncated"  // the message ends early
	ReasonOversized  = "oversized"  // over a size limit
	ReasonDuplicate  = "duplicate"  // a key, or a record, given twice with different values
	ReasonInvalid    = "invalid"    // a value that breaks its rule
	ReasonMissing    = "missing"    // a required key is absent
	ReasonIncomplete = "incomplete" // an instance without its TXT record
	ReasonOverloaded = "overloaded" // more sightings waiting than are recorded
	// The ForeignCluster registry's refusals of well-formed sightings are
	// counted under its own reasons (foreigncluster.Refused*).
)

// DropError says why network input was dropped.
type DropError struct {
	// Reason is one of the Reason* constants.
	Reason string
	// Detail explains it to a human.
	Detail string
}

func (e *DropError) Error() string { return e.Reason + ": " + e.Detail }

func drop(reason, format string, args ...any) *DropError {
	return &DropError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Validate checks an announcement as ParseTXT would, so that a cluster never
// announces what its peers would drop.
func (a *Announcement) Validate() error {
	if a.ClusterID == "" {
		return drop(ReasonMissing, "no %q key", KeyClusterID)
	}
	if len(a.ClusterID) > maxDNSLabel || !dnsLabel.MatchString(a.ClusterID) {
		return drop(ReasonInvalid, "%s %q is not a DNS label", KeyClusterID, a.ClusterID)
	}
	if len(a.ClusterName) > maxClusterName {
		return drop(ReasonOversized, "%s is %d bytes, over %d", KeyClusterName, len(a.ClusterName), maxClusterName)
	}
	if a.AuthURL == "" {
		return drop(ReasonMissing, "no %q key", KeyAuthURL)
	}
	if len(a.AuthURL) > maxAuthURL {
		return drop(ReasonOversized, "%s is %d bytes, over %d", KeyAuthURL, len(a.AuthURL), maxAuthURL)
	}
	u, err := url.Parse(a.AuthURL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return drop(ReasonInvalid, "%s %q is not an https URL with a host", KeyAuthURL, a.AuthURL)
	}
	if a.Namespace != "" && (len(a.Namespace) > maxDNSLabel || !dnsLabel.MatchString(a.Namespace)) {
		return drop(ReasonInvalid, "%s %q is not a DNS label", KeyNamespace, a.Namespace)
	}
	return nil
}

// TXT encodes the announcement as TXT strings, keys sorted.
func (a *Announcement) TXT() []string {
	kv := map[string]string{KeyClusterID: a.ClusterID, KeyAuthURL: a.AuthURL}
	if a.ClusterName != "" {
		kv[KeyClusterName] = a.ClusterName
	}
	if a.Namespace != "" {
		kv[KeyNamespace] = a.Namespace
	}
	out := make([]string, 0, len(kv))
	for k, v := range kv {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// ParseTXT decodes TXT strings into an announcement. Unknown keys are
// ignored (a newer peer may add some); a repeated key, a string that is not
// key=value, and any invalid value make the whole record dropped.
func ParseTXT(txt []string) (*Announcement, error) {
	if len(txt) > maxTXTStrings {
		return nil, drop(ReasonOversized, "%d TXT strings, over %d", len(txt), maxTXTStrings)
	}
	seen := make(map[string]bool, len(txt))
	a := &Announcement{}
	for _, s := range txt {
		if len(s) > maxTXTString {
			return nil, drop(ReasonOversized, "TXT string of %d bytes, over %d", len(s), maxTXTString)
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, drop(ReasonMalformed, "TXT string %q is not key=value", s)
		}
		k = strings.ToLower(k) // RFC 6763 §6.4: keys are case-insensitive
		if seen[k] {
			return nil, drop(ReasonDuplicate, "TXT key %q given twice", k)
		}
		seen[k] = true
		switch k {
		case KeyClusterID:
			a.ClusterID = v
		case KeyClusterName:
			a.ClusterName = v
		case KeyAuthURL:
			a.AuthURL = v
		case KeyNamespace:
			a.Namespace = v
		}
	}
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return a, nil
}
