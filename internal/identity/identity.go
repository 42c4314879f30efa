// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package identity creates the client identities peerings use: a private
// key and certificate signing request where the identity will be used, a
// certificate issued through the issuing cluster's own CSR API (signer
// kubernetes.io/kube-apiserver-client, so the cluster's real signer signs
// it), and the kubeconfig or rest.Config that carries it. Private keys never
// leave the cluster that generated them.
package identity

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Usernames of the identities a cluster issues to, or for, a peer. The
// prefix says who uses the identity; the suffix is the peer's ClusterID.
const (
	// ConsumerUserPrefix: issued by a provider to a consumer; may create
	// the consumer's PeeringRequest and nothing else.
	ConsumerUserPrefix = "liqo-consumer-"
	// ProviderUserPrefix: issued by a consumer to a provider; may manage
	// Advertisements in the consumer's tenant namespace for that provider.
	ProviderUserPrefix = "liqo-provider-"
	// VirtualKubeletUserPrefix: issued by a provider to a consumer's
	// virtual kubelet; bound to a Role in the provider's tenant namespace.
	VirtualKubeletUserPrefix = "liqo-virtual-kubelet-"
)

// DefaultLifetime is how long issued certificates are valid. Revocation
// does not wait for it: removing the RBAC bindings takes every right away
// (docs/security.md).
const DefaultLifetime = 365 * 24 * time.Hour

// NewKeyAndCSR generates a P-256 key and a CSR whose subject is username
// alone (no groups, no alternative names). Both are PEM.
func NewKeyAndCSR(username string) (keyPEM, csrPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating a key: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: username}}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating a CSR: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// CheckCSR parses csrPEM and makes sure it asks for exactly username: no
// groups (a group such as system:masters would be an escalation), no
// alternative names, a valid self-signature.
func CheckCSR(csrPEM []byte, username string) error {
	block, _ := pem.Decode(csrPEM)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return errors.New("the CSR is not a PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return fmt.Errorf("parsing the CSR: %w", err)
	}
	if err := req.CheckSignature(); err != nil {
		return fmt.Errorf("the CSR signature is invalid: %w", err)
	}
	s := req.Subject
	if s.CommonName != username {
		return fmt.Errorf("the CSR asks for user %q, only %q may be issued", s.CommonName, username)
	}
	if len(s.Organization) > 0 || len(s.OrganizationalUnit) > 0 || len(req.DNSNames) > 0 || len(req.IPAddresses) > 0 ||
		len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return errors.New("the CSR may carry only a common name: no groups (O), units or alternative names")
	}
	return nil
}

// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests,verbs=get;create;delete
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests/approval,verbs=update
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=signers,resourceNames=kubernetes.io/kube-apiserver-client,verbs=approve

// Issue has the cluster behind c sign csrPEM for username: it checks the
// CSR, creates a CertificateSigningRequest for the kube-apiserver-client
// signer, approves it, waits for the certificate and deletes the request.
// reader reads the request back (uncached); nil means c.
func Issue(ctx context.Context, c client.Client, reader client.Reader, csrPEM []byte, username string, lifetime time.Duration) ([]byte, error) {
	if err := CheckCSR(csrPEM, username); err != nil {
		return nil, err
	}
	if reader == nil {
		reader = c
	}
	if lifetime == 0 {
		lifetime = DefaultLifetime
	}
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return nil, err
	}
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{
			Name:   username + "-" + hex.EncodeToString(suffix),
			Labels: map[string]string{"app.kubernetes.io/managed-by": "liqo"},
		},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           csrPEM,
			SignerName:        certificatesv1.KubeAPIServerClientSignerName,
			ExpirationSeconds: ptr.To(int32(lifetime / time.Second)),
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
	if err := c.Create(ctx, csr); err != nil {
		return nil, fmt.Errorf("creating CertificateSigningRequest for %s: %w", username, err)
	}
	defer func() {
		// The certificate is all that is needed; kube-controller-manager
		// would remove the request within the hour anyway.
		del, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = c.Delete(del, csr)
	}()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
		Reason: "LiqoPeering", Message: "Issued by Liqo for a peering", LastUpdateTime: metav1.Now(),
	})
	if err := c.SubResource("approval").Update(ctx, csr); err != nil {
		return nil, fmt.Errorf("approving CertificateSigningRequest %s: %w", csr.Name, err)
	}
	var cert []byte
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		var got certificatesv1.CertificateSigningRequest
		if err := reader.Get(ctx, client.ObjectKeyFromObject(csr), &got); err != nil {
			if apierrors.IsNotFound(err) {
				return false, errors.New("the CertificateSigningRequest disappeared before it was signed")
			}
			return false, nil // transient: poll again
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == certificatesv1.CertificateFailed || cond.Type == certificatesv1.CertificateDenied {
				return false, fmt.Errorf("the signer refused CertificateSigningRequest %s: %s", csr.Name, cond.Message)
			}
		}
		cert = got.Status.Certificate
		return len(cert) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the certificate of %s (is kube-controller-manager's signer running?): %w", username, err)
	}
	return cert, nil
}

// CertificateUser returns the common name of a PEM certificate, and when
// it expires.
func CertificateUser(certPEM []byte) (string, time.Time, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return "", time.Time{}, errors.New("not a PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", time.Time{}, err
	}
	return cert.Subject.CommonName, cert.NotAfter, nil
}

// Credentials are what a client needs to act as an identity in a cluster.
type Credentials struct {
	// Server is the API server's URL.
	Server string
	// CACert is the PEM CA that signs the API server's certificate.
	CACert []byte
	// Certificate and Key are the PEM client certificate and its key.
	Certificate, Key []byte
}

// Equal says whether o holds the same credentials.
func (c *Credentials) Equal(o *Credentials) bool {
	return c.Server == o.Server && bytes.Equal(c.CACert, o.CACert) && bytes.Equal(c.Certificate, o.Certificate) && bytes.Equal(c.Key, o.Key)
}

// RESTConfig returns a rest.Config for the credentials, with a timeout so
// that an unreachable peer never blocks a reconcile for long.
func (c *Credentials) RESTConfig() *rest.Config {
	return &rest.Config{
		Host: c.Server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: c.CACert, CertData: c.Certificate, KeyData: c.Key,
		},
		Timeout: 10 * time.Second,
		QPS:     50,
		Burst:   100,
	}
}

// Kubeconfig renders the credentials as a kubeconfig file for user.
func (c *Credentials) Kubeconfig(user, namespace string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["peer"] = &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: c.CACert}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: c.Certificate, ClientKeyData: c.Key}
	cfg.Contexts[user] = &clientcmdapi.Context{Cluster: "peer", AuthInfo: user, Namespace: namespace}
	cfg.CurrentContext = user
	return clientcmd.Write(*cfg)
}

// Readyz asks the API server of cfg whether it is ready (GET /readyz: all
// its informers, RBAC's included, synced), within 3 s.
func Readyz(ctx context.Context, cfg *rest.Config) error {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 3 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return err
	}
	if string(body) != "ok" {
		return fmt.Errorf("/readyz answered %q", string(body))
	}
	return nil
}

// WhoAmI asks the API server of cfg which user it sees cfg's credentials
// as (a SelfSubjectReview), within 5 s. It uses the typed client: no API
// discovery, one request.
func WhoAmI(ctx context.Context, cfg *rest.Config) (string, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return review.Status.UserInfo.Username, nil
}
