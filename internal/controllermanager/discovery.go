// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package controllermanager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/clusterconfig"
	"github.com/liqo-go/liqo/internal/discovery/dnssd"
	"github.com/liqo-go/liqo/internal/discovery/lan"
	"github.com/liqo-go/liqo/internal/discovery/wan"
	"github.com/liqo-go/liqo/internal/foreigncluster"
)

// rootCAConfigMap is published in every namespace by the cluster's
// controller manager; it holds the CA peers need to trust this cluster.
const rootCAConfigMap = "kube-root-ca.crt"

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=list;watch

// setupDiscovery adds the auth service, the ForeignCluster controllers and
// LAN discovery to the manager, and returns the auth service's URL.
func setupDiscovery(ctx context.Context, mgr ctrl.Manager, o *Options, cfg *rest.Config, direct client.Client, clusterID string, store *clusterconfig.Store) (string, *auth.Server, error) {
	// The key is kept across restarts: peers pin it.
	servingKey, err := auth.EnsureServingKey(ctx, direct, o.Namespace)
	if err != nil {
		return "", nil, err
	}
	var lc net.ListenConfig
	listener, err := lc.Listen(ctx, "tcp", o.AuthBindAddress)
	if err != nil {
		return "", nil, fmt.Errorf("listening for the auth service on %s: %w", o.AuthBindAddress, err)
	}
	announced := o.AuthURL
	if announced == "" && o.AuthService != "" {
		if announced, err = authURLOfService(ctx, direct, o.Namespace, o.AuthService); err != nil {
			_ = listener.Close()
			return "", nil, err
		}
	}
	authURL, host, port, err := advertisedAuthURL(announced, listener.Addr().(*net.TCPAddr))
	if err != nil {
		_ = listener.Close()
		return "", nil, err
	}
	cert, err := auth.SelfSignedCertificateFor(servingKey, []string{host, "localhost", "127.0.0.1"})
	if err != nil {
		_ = listener.Close()
		return "", nil, err
	}
	apiServerURL := o.APIServerURL
	if apiServerURL == "" {
		apiServerURL = cfg.Host
	}
	c := mgr.GetClient()
	clusterName := func() string { return clusterconfig.EffectiveClusterName(o.ClusterName, store.Get(), clusterID) }
	identity := func(ctx context.Context) (*auth.Identity, error) {
		var ca corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: rootCAConfigMap}, &ca); err != nil {
			return nil, fmt.Errorf("reading the cluster CA from ConfigMap %s/%s: %w", o.Namespace, rootCAConfigMap, err)
		}
		if ca.Data["ca.crt"] == "" {
			return nil, errors.New("the cluster CA ConfigMap has no ca.crt")
		}
		return &auth.Identity{
			ClusterID: clusterID, ClusterName: clusterName(), APIServerURL: apiServerURL,
			Namespace: o.Namespace, CACert: ca.Data["ca.crt"],
		}, nil
	}
	authServer := &auth.Server{Listener: listener, Certificate: cert, Identity: identity}
	if err := mgr.Add(authServer); err != nil {
		return "", nil, err
	}
	ctrl.Log.WithName("setup").Info("Auth service listening", "address", listener.Addr().String(), "url", authURL)

	choices := &foreigncluster.Choices{Client: c, Namespace: o.Namespace}
	policy := func() foreigncluster.CheckPolicy {
		p := foreigncluster.CheckPolicy{Interval: 30 * time.Second, MaxMissed: 3}
		if cc := store.Get(); cc != nil {
			p.Interval = time.Duration(cc.Spec.DiscoveryConfig.HealthCheckIntervalSeconds) * time.Second
			p.MaxMissed = cc.Spec.DiscoveryConfig.MaxMissedHealthChecks
		}
		return p
	}
	registry := &foreigncluster.Registry{
		Client: c, APIReader: mgr.GetAPIReader(), LocalClusterID: clusterID, Choices: choices,
		AutoJoin: func() bool {
			cc := store.Get()
			return cc != nil && cc.Spec.DiscoveryConfig.AutoJoin != nil && *cc.Spec.DiscoveryConfig.AutoJoin
		},
		// A sighting is written often enough for the checker never to see
		// a live cluster as missing.
		RefreshEvery: func() time.Duration { return policy().Interval / 3 },
		MaxDiscovered: func() int {
			if cc := store.Get(); cc != nil {
				return int(cc.Spec.DiscoveryConfig.MaxDiscoveredClusters)
			}
			return 0
		},
	}
	if err := (&foreigncluster.Reconciler{
		Client: c, APIReader: mgr.GetAPIReader(), Namespace: o.Namespace, LocalClusterID: clusterID, Choices: choices,
	}).SetupWithManager(mgr); err != nil {
		return "", nil, fmt.Errorf("setting up the ForeignCluster controller: %w", err)
	}
	if err := mgr.Add(&foreigncluster.Checker{Client: c, APIReader: mgr.GetAPIReader(), Policy: policy}); err != nil {
		return "", nil, err
	}
	if err := (&wan.Reconciler{
		Client: c, Registry: registry, Resolver: &dnssd.Resolver{Server: o.DNSServer},
		Service: func() string {
			if cc := store.Get(); cc != nil && cc.Spec.DiscoveryConfig.ServiceName != "" {
				return cc.Spec.DiscoveryConfig.ServiceName
			}
			return dnssd.DefaultService
		},
		// Resolved twice per health-check interval, so that a listed
		// cluster never looks missed.
		Interval: func() time.Duration { return max(policy().Interval/2, 250*time.Millisecond) },
	}).SetupWithManager(mgr); err != nil {
		return "", nil, fmt.Errorf("setting up the SearchDomain controller: %w", err)
	}
	return authURL, authServer, mgr.Add(&lan.Discovery{
		Store: store, Registry: registry, AuthPort: port, NetworkNamespace: o.MDNSNetworkNamespace,
		Self: func() dnssd.Announcement {
			return dnssd.Announcement{ClusterID: clusterID, ClusterName: clusterName(), AuthURL: authURL, Namespace: o.Namespace}
		},
	})
}

// advertisedAuthURL returns the auth service's URL, host and port as peers
// see them.
func advertisedAuthURL(flag string, bound *net.TCPAddr) (authURL, host string, port uint16, err error) {
	if flag != "" {
		u, err := url.Parse(flag)
		if err != nil || u.Scheme != "https" || u.Hostname() == "" {
			return "", "", 0, fmt.Errorf("--auth-url %q must be an https URL with a host", flag)
		}
		p := bound.Port
		if u.Port() != "" {
			if p, err = strconv.Atoi(u.Port()); err != nil {
				return "", "", 0, fmt.Errorf("--auth-url %q has an invalid port", flag)
			}
		}
		return flag, u.Hostname(), uint16(p), nil //nolint:gosec // a TCP port
	}
	host = bound.IP.String()
	if bound.IP.IsUnspecified() {
		if host, err = os.Hostname(); err != nil {
			return "", "", 0, fmt.Errorf("--auth-url not set and the host name is unknown: %w", err)
		}
	}
	port = uint16(bound.Port) //nolint:gosec // a TCP port
	return "https://" + net.JoinHostPort(host, strconv.Itoa(bound.Port)), host, port, nil
}
