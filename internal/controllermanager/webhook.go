// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package controllermanager

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/offloading"
	"github.com/liqo-go/liqo/internal/peering"
)

const (
	// webhookCASecret keeps the webhook CA across restarts, so that the
	// caBundle registered in the API server stays valid while a new
	// replica starts.
	webhookCASecret = "liqo-webhook-ca" //nolint:gosec // a Secret's name, not a credential
	// WebhookConfigurationName is the ValidatingWebhookConfiguration the
	// controller manager registers and keeps current.
	WebhookConfigurationName = "liqo-peeringrequests"
	// PodWebhookConfigurationName is the MutatingWebhookConfiguration that
	// lets the pods of offloaded namespaces onto virtual nodes.
	PodWebhookConfigurationName = "liqo-pods"
	// EndpointSliceWebhookConfigurationName is the
	// ValidatingWebhookConfiguration that bounds the addresses of the
	// EndpointSlices consumers write here.
	EndpointSliceWebhookConfigurationName = "liqo-offloaded-endpointslices"
	// BindingWebhookConfigurationName is the
	// ValidatingWebhookConfiguration that keeps a pod off a virtual node
	// whose offer cannot run it in one piece.
	BindingWebhookConfigurationName = "liqo-pod-bindings"
)

// The controller manager reads and changes its own webhook configurations
// alone, by name; creating one cannot be limited to a name.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=create
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,resourceNames=liqo-peeringrequests;liqo-offloaded-endpointslices;liqo-pod-bindings,verbs=get;update;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,resourceNames=liqo-pods,verbs=get;update;patch

// webhookSetup is what the manager needs to serve the webhooks.
type webhookSetup struct {
	server   webhook.Server
	caBundle []byte
	caKey    []byte
	// base is how the API server reaches the webhook server: a URL, or a
	// Service in the Liqo namespace; each webhook has a path under it.
	base admissionregistrationv1.WebhookClientConfig
}

// clientConfig is how the API server calls the webhook at path, trusting
// caBundle.
func clientConfig(base admissionregistrationv1.WebhookClientConfig, path string, caBundle []byte) admissionregistrationv1.WebhookClientConfig {
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: caBundle}
	if base.Service != nil {
		svc := *base.Service
		svc.Path = ptr.To(path)
		cc.Service = &svc
		return cc
	}
	cc.URL = ptr.To(ptr.Deref(base.URL, "") + path)
	return cc
}

// describe names where the API server calls the webhooks, for the logs.
func (w *webhookSetup) describe() string {
	if w.base.Service != nil {
		return fmt.Sprintf("service %s/%s:%d", w.base.Service.Namespace, w.base.Service.Name, ptr.Deref(w.base.Service.Port, 443))
	}
	return ptr.Deref(w.base.URL, "")
}

// newWebhookServer loads (or creates) the webhook CA, signs a serving
// certificate for the advertised host, and returns the server.
func newWebhookServer(ctx context.Context, c client.Client, o *Options) (*webhookSetup, error) {
	host, portStr, err := net.SplitHostPort(o.WebhookBindAddress)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address %q: %w", o.WebhookBindAddress, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("--webhook-bind-address %q has an invalid port", o.WebhookBindAddress)
	}
	if o.WebhookService != "" {
		// In a pod: the API server calls the Service, which it resolves
		// itself, and checks its DNS name.
		if errs := validation.IsDNS1035Label(o.WebhookService); len(errs) > 0 {
			return nil, fmt.Errorf("--webhook-service %q: %s", o.WebhookService, strings.Join(errs, "; "))
		}
		caCert, caKey, err := ensureWebhookCA(ctx, c, o.Namespace)
		if err != nil {
			return nil, err
		}
		svc := o.WebhookService + "." + o.Namespace + ".svc"
		cert, err := auth.ServingCertificate(caCert, caKey, []string{svc, svc + ".cluster.local", "localhost", "127.0.0.1"})
		if err != nil {
			return nil, err
		}
		return &webhookSetup{
			server: newServer(host, port, cert), caBundle: caCert, caKey: caKey,
			base: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
				Namespace: o.Namespace, Name: o.WebhookService, Port: ptr.To(int32(443)),
			}},
		}, nil
	}
	base := o.WebhookURL
	if base == "" {
		h := host
		if h == "" || net.ParseIP(h) != nil && net.ParseIP(h).IsUnspecified() {
			if h, err = os.Hostname(); err != nil {
				return nil, fmt.Errorf("--webhook-url not set and the host name is unknown: %w", err)
			}
		}
		base = "https://" + net.JoinHostPort(h, portStr)
	}
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return nil, fmt.Errorf("--webhook-url %q must be an https URL with a host", base)
	}
	caCert, caKey, err := ensureWebhookCA(ctx, c, o.Namespace)
	if err != nil {
		return nil, err
	}
	cert, err := auth.ServingCertificate(caCert, caKey, []string{u.Hostname(), "localhost", "127.0.0.1"})
	if err != nil {
		return nil, err
	}
	return &webhookSetup{
		server: newServer(host, port, cert), caBundle: caCert, caKey: caKey,
		base: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(u.String())},
	}, nil
}

// newServer is the webhook server, serving cert.
func newServer(host string, port int, cert tls.Certificate) webhook.Server {
	return webhook.NewServer(webhook.Options{
		Host: host,
		Port: port,
		TLSOpts: []func(*tls.Config){func(cfg *tls.Config) {
			cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }
		}},
	})
}

func ensureWebhookCA(ctx context.Context, c client.Client, namespace string) (certPEM, keyPEM []byte, err error) {
	key := client.ObjectKey{Namespace: namespace, Name: webhookCASecret}
	var secret corev1.Secret
	err = c.Get(ctx, key, &secret)
	if err == nil && len(secret.Data["ca.crt"]) > 0 && len(secret.Data["ca.key"]) > 0 {
		return secret.Data["ca.crt"], secret.Data["ca.key"], nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, nil, fmt.Errorf("reading the webhook CA: %w", err)
	}
	certPEM, keyPEM, err = auth.NewCA("liqo-webhook-ca")
	if err != nil {
		return nil, nil, err
	}
	secret = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: webhookCASecret},
		Data:       map[string][]byte{"ca.crt": certPEM, "ca.key": keyPEM},
	}
	if err := c.Create(ctx, &secret); err != nil {
		if apierrors.IsAlreadyExists(err) { // another replica was first
			return ensureWebhookCA(ctx, c, namespace)
		}
		return nil, nil, fmt.Errorf("storing the webhook CA: %w", err)
	}
	return certPEM, keyPEM, nil
}

// webhookRegistrar keeps the webhook configurations pointing at this
// controller manager with the current CA bundle, repairing drift.
type webhookRegistrar struct {
	client   client.Client
	caBundle []byte
	// base is how the API server reaches the webhooks; each adds its path.
	base  admissionregistrationv1.WebhookClientConfig
	every time.Duration
	// whoAmI learns this controller manager's user name, which alone may
	// delete virtual nodes; self caches it.
	whoAmI func(ctx context.Context) (string, error)
	self   string
}

func (w *webhookRegistrar) ensure(ctx context.Context) error {
	if err := w.ensurePeeringRequests(ctx); err != nil {
		return fmt.Errorf("registering the PeeringRequest webhook: %w", err)
	}
	if err := w.ensurePods(ctx); err != nil {
		return fmt.Errorf("registering the pod webhook: %w", err)
	}
	if err := w.ensureEndpointSlices(ctx); err != nil {
		return fmt.Errorf("registering the EndpointSlice webhook: %w", err)
	}
	if err := w.ensureBindings(ctx); err != nil {
		return fmt.Errorf("registering the binding webhook: %w", err)
	}
	return w.ensureVirtualNodePolicy(ctx)
}

// ensurePods registers the pod webhook for the namespaces labelled as
// offloaded only, and for those a broker marked orchestrated before it
// offloads them: if this controller manager is down, pods elsewhere are
// created as usual, and pods of those namespaces wait (failure policy
// Fail) rather than land where their strategy forbids.
// podWebhookCondition lets the pod webhook see every creation, and the
// updates that drop the virtual-node toleration the pod had.
var podWebhookCondition = fmt.Sprintf(`request.operation == 'CREATE' || `+
	`(has(oldObject.spec.tolerations) && oldObject.spec.tolerations.exists(t, has(t.key) && t.key == %[1]q) && `+
	`!(has(object.spec.tolerations) && object.spec.tolerations.exists(t, has(t.key) && t.key == %[1]q)))`, offloadingv1alpha1.VirtualNodeTaint)

func (w *webhookRegistrar) ensurePods(ctx context.Context) error {
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: PodWebhookConfigurationName}}
	cc := clientConfig(w.base, offloading.MutatePodPath, w.caBundle)
	hook := func(name string, selector *metav1.LabelSelector) admissionregistrationv1.MutatingWebhook {
		return admissionregistrationv1.MutatingWebhook{
			Name:         name,
			ClientConfig: cc,
			// Updates only when they drop the virtual-node toleration: the
			// webhook puts it back, as the API server's own admission does
			// with the tolerations it adds; every other update goes by
			// without a call.
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "create-or-drops-toleration", Expression: podWebhookCondition}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			NamespaceSelector:       selector,
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To(int32(5)),
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
		}
	}
	want := []admissionregistrationv1.MutatingWebhook{
		hook("pods.offloading.liqo.io", &metav1.LabelSelector{MatchLabels: map[string]string{offloadingv1alpha1.OffloadingEnabledLabel: "true"}}),
		// The two selectors exclude each other: no pod is mutated twice.
		hook("orchestrated-pods.offloading.liqo.io", &metav1.LabelSelector{
			MatchLabels: map[string]string{brokerv1alpha1.OrchestratedLabel: brokerv1alpha1.OrchestratedValue},
			MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: offloadingv1alpha1.OffloadingEnabledLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"},
			}},
		}),
	}
	_, err := controllerutil.CreateOrUpdate(ctx, w.client, mwc, func() error {
		mwc.Labels = map[string]string{discoveryv1alpha1.ManagedByLabel: discoveryv1alpha1.ManagedByValue}
		if len(mwc.Webhooks) == len(want) {
			same := true
			for i := range want {
				got := mwc.Webhooks[i]
				same = same && got.Name == want[i].Name && equality.Semantic.DeepEqual(got.ClientConfig, cc) &&
					equality.Semantic.DeepEqual(got.NamespaceSelector, want[i].NamespaceSelector) &&
					ptr.Deref(got.FailurePolicy, "") == admissionregistrationv1.Fail &&
					equality.Semantic.DeepEqual(got.Rules, want[i].Rules) && equality.Semantic.DeepEqual(got.MatchConditions, want[i].MatchConditions)
			}
			if same {
				return nil
			}
		}
		mwc.Webhooks = want
		return nil
	})
	return err
}

// endpointSliceWebhookCondition: the webhook sees the writes of the
// consumers' virtual kubelets alone.
var endpointSliceWebhookCondition = "request.userInfo.username.startsWith('" + identity.VirtualKubeletUserPrefix + "')"

// ensureEndpointSlices registers the EndpointSlice webhook: what a
// consumer's virtual kubelet writes is checked against this cluster's
// own view of that consumer's addresses; while this controller manager
// is down no such write passes (failure policy Fail; the virtual kubelet
// retries), and nobody else's goes through it.
func (w *webhookRegistrar) ensureEndpointSlices(ctx context.Context) error {
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: EndpointSliceWebhookConfigurationName}}
	want := w.validating("endpointslices.offloading.liqo.io", offloading.ValidateEndpointSlicePath, admissionregistrationv1.Fail, admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{discoveryv1.GroupName}, APIVersions: []string{"v1"},
			Resources: []string{"endpointslices"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	})
	want.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "virtual-kubelet", Expression: endpointSliceWebhookCondition}}
	return w.ensureValidating(ctx, vwc, want)
}

// ensureBindings registers the binding webhook for the offloaded
// namespaces alone, failing open (Ignore): while this controller manager
// is down a pod binds as it did before the bound, and may wait in the
// provider instead of here; nothing else is at stake.
func (w *webhookRegistrar) ensureBindings(ctx context.Context) error {
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: BindingWebhookConfigurationName}}
	want := w.validating("bindings.offloading.liqo.io", offloading.ValidateBindingPath, admissionregistrationv1.Ignore, admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{""}, APIVersions: []string{"v1"},
			Resources: []string{"pods/binding"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	})
	want.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{offloadingv1alpha1.OffloadingEnabledLabel: "true"}}
	return w.ensureValidating(ctx, vwc, want)
}

// validating is a webhook of this controller manager at path, for rule,
// with failure policy failure: no side effects, 5 s, equivalent
// versions matched.
func (w *webhookRegistrar) validating(name, path string, failure admissionregistrationv1.FailurePolicyType, rule admissionregistrationv1.RuleWithOperations) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name:                    name,
		ClientConfig:            clientConfig(w.base, path, w.caBundle),
		Rules:                   []admissionregistrationv1.RuleWithOperations{rule},
		FailurePolicy:           ptr.To(failure),
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
		TimeoutSeconds:          ptr.To(int32(5)),
		MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
	}
}

func (w *webhookRegistrar) ensurePeeringRequests(ctx context.Context) error {
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: WebhookConfigurationName}}
	// No PeeringRequest enters unchecked, also while the controller
	// manager is down: consumers retry.
	want := w.validating("peeringrequests.discovery.liqo.io", peering.ValidatePath, admissionregistrationv1.Fail, admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{discoveryv1alpha1.GroupVersion.Group}, APIVersions: []string{discoveryv1alpha1.GroupVersion.Version},
			Resources: []string{"peeringrequests"}, Scope: ptr.To(admissionregistrationv1.ClusterScope),
		},
	})
	// The controller manager's own metadata updates (its finalizer) do
	// not need it: removing a finalizer must work while the webhook is
	// down or uninstalled.
	want.MatchConditions = []admissionregistrationv1.MatchCondition{{
		Name:       "spec-or-consumer",
		Expression: "request.operation == 'CREATE' || request.userInfo.username.startsWith('" + identity.ConsumerUserPrefix + "') || object.spec != oldObject.spec",
	}}
	return w.ensureValidating(ctx, vwc, want)
}

// ensureValidating makes vwc (a ValidatingWebhookConfiguration of the
// controller manager's) hold want alone. A webhook already there with
// want's name, client configuration, rules, failure policy and match
// conditions is left as it is, with the API server's defaults
// (namespaceSelector, ...).
func (w *webhookRegistrar) ensureValidating(ctx context.Context, vwc *admissionregistrationv1.ValidatingWebhookConfiguration, want admissionregistrationv1.ValidatingWebhook) error {
	_, err := controllerutil.CreateOrUpdate(ctx, w.client, vwc, func() error {
		vwc.Labels = map[string]string{discoveryv1alpha1.ManagedByLabel: discoveryv1alpha1.ManagedByValue}
		if len(vwc.Webhooks) == 1 {
			got := vwc.Webhooks[0]
			if got.Name == want.Name && equality.Semantic.DeepEqual(got.ClientConfig, want.ClientConfig) && equality.Semantic.DeepEqual(got.Rules, want.Rules) &&
				ptr.Deref(got.FailurePolicy, "") == ptr.Deref(want.FailurePolicy, "") && equality.Semantic.DeepEqual(got.MatchConditions, want.MatchConditions) &&
				// The API server makes a selector left out an empty one.
				(want.NamespaceSelector == nil || equality.Semantic.DeepEqual(got.NamespaceSelector, want.NamespaceSelector)) {
				return nil
			}
		}
		vwc.Webhooks = []admissionregistrationv1.ValidatingWebhook{want}
		return nil
	})
	return err
}

// Start registers the webhook, then checks it every period until ctx ends.
func (w *webhookRegistrar) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("webhook")
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		if err := w.ensure(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "Registering the webhooks")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection is false: every replica serves the webhook.
func (w *webhookRegistrar) NeedLeaderElection() bool { return false }
