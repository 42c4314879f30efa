// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package envtest

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/liqo-go/liqo/internal/localcluster"
)

// StartCluster is Start, returning the cluster itself: its directory holds
// the CA that SignCSRs signs with.
func StartCluster(tb testing.TB, name string) *localcluster.Cluster {
	tb.Helper()
	if testing.Short() {
		tb.Skip("starts a real API server; skipped with -short")
	}
	c, err := localcluster.Start(tb.Context(), localcluster.Options{
		Name: name, Dir: tb.TempDir(), APIServerOnly: true, StartTimeout: time.Minute,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("stopping the API server: %v", err)
		}
	})
	return c
}

// SignCSRs does, until tb ends, what kube-controller-manager's signer does
// for the kubernetes.io/kube-apiserver-client signer, which an API server
// alone lacks: every approved CertificateSigningRequest gets a client
// certificate from the cluster's CA, for the lifetime it asks (an hour by
// default).
func SignCSRs(tb testing.TB, c *localcluster.Cluster) {
	tb.Helper()
	ca, key, err := loadCA(filepath.Join(c.Dir, "pki"))
	if err != nil {
		tb.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(c.RESTConfig))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			list, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // the API server may be stopping: look again
			}
			for i := range list.Items {
				csr := &list.Items[i]
				if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName || len(csr.Status.Certificate) > 0 || !approved(csr) {
					continue
				}
				cert, err := sign(ca, key, csr)
				if err != nil {
					tb.Errorf("signing CSR %s: %v", csr.Name, err)
					continue
				}
				csr.Status.Certificate = cert
				if _, err := cs.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
					continue // changed meanwhile: the next look signs it
				}
			}
			return false, nil
		})
	}()
	tb.Cleanup(func() { cancel(); <-done })
}

func approved(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func loadCA(dir string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("the cluster's CA files are not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("the CA key is a %T", k)
	}
	return cert, signer, nil
}

func sign(ca *x509.Certificate, key crypto.Signer, csr *certificatesv1.CertificateSigningRequest) ([]byte, error) {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		return nil, errors.New("the request is not PEM")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, err
	}
	if err := req.CheckSignature(); err != nil {
		return nil, err
	}
	lifetime := time.Hour
	if s := csr.Spec.ExpirationSeconds; s != nil {
		lifetime = time.Duration(*s) * time.Second
	}
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: sn, Subject: req.Subject,
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(lifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, req.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// CountQuotas does, until tb ends, the first thing kube-controller-manager's
// quota controller does for a new ResourceQuota, which an API server alone
// lacks: it records the quota's hard limits in its status, with nothing
// used. Reconcilers that wait for a quota to be counted go on.
func CountQuotas(tb testing.TB, c *localcluster.Cluster) {
	tb.Helper()
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(c.RESTConfig))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			list, err := cs.CoreV1().ResourceQuotas(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // the API server may be stopping: look again
			}
			for i := range list.Items {
				q := &list.Items[i]
				if equality.Semantic.DeepEqual(q.Status.Hard, q.Spec.Hard) {
					continue
				}
				q.Status.Hard = q.Spec.Hard.DeepCopy()
				if q.Status.Used == nil {
					q.Status.Used = corev1.ResourceList{}
				}
				for name := range q.Spec.Hard {
					if _, ok := q.Status.Used[name]; !ok {
						q.Status.Used[name] = resource.Quantity{}
					}
				}
				_, _ = cs.CoreV1().ResourceQuotas(q.Namespace).UpdateStatus(ctx, q, metav1.UpdateOptions{}) // changed meanwhile: the next look
			}
			return false, nil
		})
	}()
	tb.Cleanup(func() { cancel(); <-done })
}
