// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package peering

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/identity"
)

// refusalGrace is how long a provider that is not ready must keep
// refusing the identity before this cluster authenticates again; a ready
// provider that refuses it has revoked it, and is answered at once.
const refusalGrace = 10 * time.Second

// credentials loads the identity in the provider, or returns nil when a
// new one is needed (none yet, expiring, or for another API server or CA).
func (r *Outgoing) credentials(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster) (*identity.Credentials, *corev1.Secret, error) {
	creds, secret, err := r.storedCredentials(ctx, fc.Spec.ClusterIdentity.ClusterID)
	if creds == nil || err != nil {
		return nil, nil, err
	}
	if !usable(creds, secret, fc) {
		return nil, nil, nil
	}
	return creds, secret, nil
}

// usable tells whether stored credentials can still be used with fc: a
// readable certificate valid for a day more, the provider's certificate
// kept, and the same API server.
func usable(creds *identity.Credentials, secret *corev1.Secret, fc *discoveryv1alpha1.ForeignCluster) bool {
	_, notAfter, err := identity.CertificateUser(creds.Certificate)
	return err == nil && time.Until(notAfter) >= 24*time.Hour && len(secret.Data[identity.ProviderCertKey]) > 0 && creds.Server == fc.Status.APIServerURL
}

// storedCredentials loads the identity in provider as stored, usable or
// not (an expired one still tries to delete the PeeringRequest); nil when
// there is none.
func (r *Outgoing) storedCredentials(ctx context.Context, provider string) (*identity.Credentials, *corev1.Secret, error) {
	var secret corev1.Secret
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: identity.RemoteSecretName(provider)}, &secret)
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	d := secret.Data
	if len(d[identity.KeyKey]) == 0 || len(d[identity.CertKey]) == 0 || len(d[identity.ServerKey]) == 0 {
		return nil, nil, nil
	}
	return &identity.Credentials{Server: string(d[identity.ServerKey]), CACert: d[identity.CAKey], Certificate: d[identity.CertKey], Key: d[identity.KeyKey]}, &secret, nil
}

// authenticate runs the token exchange with the provider's auth service,
// issues the provider's identity in this cluster, and stores both.
func (r *Outgoing) authenticate(ctx context.Context, fc *discoveryv1alpha1.ForeignCluster) (*identity.Credentials, *corev1.Secret, error) {
	provider := fc.Spec.ClusterIdentity.ClusterID
	fail := func(reason string, err error) (*identity.Credentials, *corev1.Secret, error) {
		setCondition(fc, discoveryv1alpha1.ConditionAuthenticated, metav1.ConditionFalse, reason, err.Error())
		setCondition(fc, discoveryv1alpha1.ConditionPeeringRequested, metav1.ConditionFalse, reason, "Not requested: authentication failed")
		return nil, nil, err
	}
	local, err := r.Local(ctx)
	if err != nil {
		return fail(discoveryv1alpha1.ReasonAuthFailed, fmt.Errorf("this cluster's identity is not available yet: %w", err))
	}
	var tokenSecret corev1.Secret
	token := ""
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: auth.RemoteTokenSecretName(provider)}, &tokenSecret); err == nil {
		token = string(tokenSecret.Data[auth.TokenKey])
	} else if !apierrors.IsNotFound(err) {
		return nil, nil, err
	}
	step := newSteps(ctx, "authenticate", "provider", provider)
	key, csr, err := identity.NewKeyAndCSR(identity.ConsumerUserPrefix + r.LocalClusterID)
	if err != nil {
		return nil, nil, err
	}
	step("key and CSR")
	resp, err := auth.RequestIdentity(ctx, fc.Spec.ForeignAuthURL, token, &auth.IdentityRequest{
		ClusterID: r.LocalClusterID, ClusterName: local.ClusterName, AuthURL: r.LocalAuthURL,
		Namespace: r.Namespace, CACert: local.CACert, CSR: string(csr),
	}, auth.ClientOptions{
		InsecureSkipVerify: fc.Spec.InsecureSkipTLSVerify != nil && *fc.Spec.InsecureSkipTLSVerify,
		// Nothing is sent to an auth service other than the one pinned.
		PinnedKey: fc.Status.AuthServiceKeyFingerprint,
	})
	if err != nil {
		var ee *auth.ExchangeError
		if errors.As(err, &ee) && ee.Reason == auth.ReasonPolicy {
			return fail(discoveryv1alpha1.ReasonRefusedByProvider, err)
		}
		if errors.As(err, &ee) && knownExchangeReasons[ee.Reason] {
			return fail(ee.Reason, err)
		}
		return fail(discoveryv1alpha1.ReasonAuthFailed, err)
	}
	step("token exchange")
	// The provider must be the cluster this ForeignCluster trusts: same ID,
	// same CA bundle and API server as pinned at discovery.
	same, err := samePinnedCA(ctx, r.Client, r.Namespace, provider, []byte(resp.CACert))
	if err != nil {
		return nil, nil, err
	}
	switch {
	case resp.ClusterID != provider:
		return fail(discoveryv1alpha1.ReasonAuthFailed, fmt.Errorf("the auth service answered as cluster %s, not %s", resp.ClusterID, provider))
	case !same:
		return fail(discoveryv1alpha1.ReasonCAMismatch, fmt.Errorf("the provider's CA is not the one pinned for it (%s): see the CATrusted condition", fc.Status.TrustedCAFingerprint))
	case resp.APIServerURL != fc.Status.APIServerURL:
		return fail(discoveryv1alpha1.ReasonAuthFailed, fmt.Errorf("the auth service names API server %s, not %s as discovered", resp.APIServerURL, fc.Status.APIServerURL))
	}
	user, _, err := identity.CertificateUser([]byte(resp.Certificate))
	if err != nil || user != identity.ConsumerUserPrefix+r.LocalClusterID {
		return fail(discoveryv1alpha1.ReasonAuthFailed, fmt.Errorf("the provider issued a certificate for %q, not %s", user, identity.ConsumerUserPrefix+r.LocalClusterID))
	}
	// Before this cluster signs anything for the answer: the certificate
	// must work on the pinned API server, which only the provider's own
	// signer can arrange. Without a token, nothing else proves the answer
	// came from the provider.
	creds := &identity.Credentials{Server: resp.APIServerURL, CACert: []byte(resp.CACert), Certificate: []byte(resp.Certificate), Key: key}
	// Both checks only read from the provider: they run at once.
	var checks errgroup.Group
	checks.Go(func() error { return r.checkIdentity(ctx, creds, identity.ConsumerUserPrefix+r.LocalClusterID) })
	checks.Go(func() error { return r.checkProviderCSR(ctx, creds, resp.ProviderCSR) })
	if err := checks.Wait(); err != nil {
		return fail(discoveryv1alpha1.ReasonAuthFailed, err)
	}
	step("identity and provider CSR checked at the provider")
	providerCert, err := identity.Issue(ctx, r.Client, nil, []byte(resp.ProviderCSR), identity.ProviderUserPrefix+provider, r.Lifetime)
	if err != nil {
		return fail(discoveryv1alpha1.ReasonAuthFailed, fmt.Errorf("issuing the provider's identity in this cluster: %w", err))
	}
	step("provider identity issued")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: identity.RemoteSecretName(provider)}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, secret, func() error {
		secret.Labels = peerLabels(provider)
		if secret.Annotations == nil {
			secret.Annotations = map[string]string{}
		}
		secret.Annotations[discoveryv1alpha1.AuthenticatedByAnnotation] = resp.AuthenticatedBy
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		secret.Data[identity.KeyKey] = key
		secret.Data[identity.CertKey] = []byte(resp.Certificate)
		secret.Data[identity.CAKey] = []byte(resp.CACert)
		secret.Data[identity.ServerKey] = []byte(resp.APIServerURL)
		secret.Data[identity.ProviderCertKey] = providerCert
		if len(secret.Data[identity.VirtualKubeletKeyKey]) == 0 {
			vkKey, vkCSR, err := identity.NewKeyAndCSR(identity.VirtualKubeletUserPrefix + r.LocalClusterID)
			if err != nil {
				return err
			}
			secret.Data[identity.VirtualKubeletKeyKey], secret.Data[identity.VirtualKubeletCSRKey] = vkKey, vkCSR
		}
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("storing the identity in %s: %w", provider, err)
	}
	step("identity stored")
	setCondition(fc, discoveryv1alpha1.ConditionAuthenticated, metav1.ConditionTrue, "IdentityIssued",
		fmt.Sprintf("%s issued the identity %s%s (authenticated by %s)", provider, identity.ConsumerUserPrefix, r.LocalClusterID, resp.AuthenticatedBy))
	return creds, secret, nil
}

// storeVirtualKubeletIdentity keeps, next to its key, the certificate the
// provider issued to the virtual kubelet, and the kubeconfig made of both
// (key identity.VirtualKubeletKubeconfigKey), which the provider's Advertisement
// points at.
func (r *Outgoing) storeVirtualKubeletIdentity(ctx context.Context, secret *corev1.Secret, creds *identity.Credentials, pr *discoveryv1alpha1.PeeringRequest) error {
	cert := []byte(pr.Status.VirtualKubeletCertificate)
	if len(cert) == 0 || bytes.Equal(secret.Data[identity.VirtualKubeletCertKey], cert) || !samePublicKey(string(secret.Data[identity.VirtualKubeletCSRKey]), string(cert)) {
		return nil
	}
	vk := &identity.Credentials{Server: creds.Server, CACert: creds.CACert, Certificate: cert, Key: secret.Data[identity.VirtualKubeletKeyKey]}
	kubeconfig, err := vk.Kubeconfig(identity.VirtualKubeletUserPrefix+r.LocalClusterID, discoveryv1alpha1.TenantNamespace(r.LocalClusterID))
	if err != nil {
		return err
	}
	secret.Data[identity.VirtualKubeletCertKey] = cert
	secret.Data[identity.VirtualKubeletKubeconfigKey] = kubeconfig
	return r.Client.Update(ctx, secret)
}

// knownExchangeReasons are the refusals an auth service may name that are
// used as condition reasons as they are; anything else a remote party says
// becomes AuthenticationFailed.
var knownExchangeReasons = map[string]bool{
	auth.ReasonBadRequest: true, auth.ReasonTokenRequired: true, auth.ReasonWrongToken: true, auth.ReasonReplayed: true,
	auth.ReasonExpired: true, auth.ReasonNotReady: true, auth.ReasonInternal: true, auth.ReasonTooMany: true,
}

// errNotVerified says the provider could not verify this cluster with the
// current PeeringRequest: a new token exchange is needed.
var errNotVerified = errors.New("the provider could not verify this cluster")

// checkIdentity asks the API server who creds are.
func (r *Outgoing) checkIdentity(ctx context.Context, creds *identity.Credentials, want string) error {
	got, err := identity.WhoAmI(ctx, creds.RESTConfig())
	if err != nil {
		return fmt.Errorf("the issued certificate does not work on the provider's API server %s: %w", creds.Server, err)
	}
	if got != want {
		return fmt.Errorf("the provider's API server sees the issued certificate as %q, not %q", got, want)
	}
	return nil
}

// checkProviderCSR makes sure csr, which the answer asks this cluster to
// sign, is the one the provider published for this cluster on its own API
// server (annotation ProviderCSRAnnotation of ClusterRole
// liqo-consumer-<this cluster>), reached with the pinned CA as the
// identity just issued: the answer itself is authenticated only with a
// token. A new grant may take a moment to reach the provider's authorizer.
func (r *Outgoing) checkProviderCSR(ctx context.Context, creds *identity.Credentials, csr string) error {
	cfg := creds.RESTConfig()
	cfg.Timeout = 5 * time.Second
	// The typed client: no API discovery in the provider for one read.
	remote, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var role *rbacv1.ClusterRole
	var last error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		role, last = remote.RbacV1().ClusterRoles().Get(ctx, ConsumerRBACName(r.LocalClusterID), metav1.GetOptions{})
		if apierrors.IsForbidden(last) {
			waits.WithLabelValues(waitRBACPropagation).Inc()
			return false, nil
		}
		return true, nil
	})
	if last != nil || err != nil {
		return fmt.Errorf("reading the provider's CSR on its API server %s: %w", creds.Server, errors.Join(last, err))
	}
	if role.Annotations[discoveryv1alpha1.ProviderCSRAnnotation] != csr {
		return errors.New("the answer asks this cluster to sign a CSR that is not the one the provider published for it on its API server: " +
			"someone between the two clusters may have changed the answer")
	}
	return nil
}
