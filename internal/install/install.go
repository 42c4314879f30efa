// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package install puts Liqo's cluster-wide pieces into a cluster: the CRDs,
// the Liqo namespace, and the controller manager's ServiceAccount bound to
// the ClusterRole (and the Role in the Liqo namespace) generated from the
// controllers' RBAC markers. liqoctl,
// the playground and the end-to-end tests all install through it.
package install

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/liqo-go/liqo/api"
	"github.com/liqo-go/liqo/deployments"
)

const (
	// DefaultNamespace is where Liqo's own objects live.
	DefaultNamespace = "liqo"
	// ControllerManagerName names the controller manager's ServiceAccount,
	// ClusterRole and ClusterRoleBinding.
	ControllerManagerName = "liqo-controller-manager"
	// BrokerName names liqo-broker's ServiceAccount, ClusterRole and
	// Deployment (the chart's broker.enabled).
	BrokerName = "liqo-broker"
	// MetricsReaderName is the ClusterRole that may scrape the controller
	// manager's metrics: bind it to Prometheus's ServiceAccount.
	MetricsReaderName = "liqo-metrics-reader"
	fieldOwner        = "liqo-install"
)

// Options says where to install.
type Options struct {
	// Namespace is the Liqo namespace; defaults to DefaultNamespace.
	Namespace string
}

func (o *Options) namespace() string {
	if o.Namespace == "" {
		return DefaultNamespace
	}
	return o.Namespace
}

// CRDs returns the generated CustomResourceDefinitions.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(deployments.Chart, "liqo/files/crds/*.yaml")
	if err != nil {
		return nil, err
	}
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(files))
	for _, f := range files {
		data, err := deployments.Chart.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", f, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

// ClusterRole returns the controller manager's generated ClusterRole.
func ClusterRole() (*rbacv1.ClusterRole, error) {
	role := &rbacv1.ClusterRole{}
	if err := generatedRole("ClusterRole", role); err != nil {
		return nil, err
	}
	return role, nil
}

// Role returns the controller manager's generated Role: what it may do in
// the Liqo namespace alone (its namespace is the marker's; the caller
// puts it where Liqo is).
func Role() (*rbacv1.Role, error) {
	role := &rbacv1.Role{}
	if err := generatedRole("Role", role); err != nil {
		return nil, err
	}
	return role, nil
}

// generatedRole decodes into out the document of kind of rbac/role.yaml.
func generatedRole(kind string, out any) error {
	data, err := deployments.Chart.ReadFile("liqo/files/rbac/role.yaml")
	if err != nil {
		return err
	}
	for doc := range strings.SplitSeq(string(data), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return fmt.Errorf("decoding rbac/role.yaml: %w", err)
		}
		if meta.Kind != kind {
			continue
		}
		if err := yaml.UnmarshalStrict([]byte(doc), out); err != nil {
			return fmt.Errorf("decoding rbac/role.yaml: %w", err)
		}
		return nil
	}
	return fmt.Errorf("rbac/role.yaml has no %s", kind)
}

// PeerRoles returns the ClusterRoles the controller manager binds, in the
// namespaces it makes for consumers and in those it offloads, without
// holding their rights (files/rbac/peers.yaml).
func PeerRoles() ([]*rbacv1.ClusterRole, error) {
	data, err := deployments.Chart.ReadFile("liqo/files/rbac/peers.yaml")
	if err != nil {
		return nil, err
	}
	var roles []*rbacv1.ClusterRole
	for doc := range strings.SplitSeq(string(data), "\n---\n") {
		role := &rbacv1.ClusterRole{}
		if err := yaml.UnmarshalStrict([]byte(doc), role); err != nil {
			return nil, fmt.Errorf("decoding rbac/peers.yaml: %w", err)
		}
		roles = append(roles, role)
	}
	return roles, nil
}

// AdmissionPolicies returns the ValidatingAdmissionPolicies and their
// bindings that hold peers to what their peering granted.
func AdmissionPolicies() ([]client.Object, error) {
	files, err := fs.Glob(deployments.Chart, "liqo/files/admission/*.yaml")
	if err != nil {
		return nil, err
	}
	decoder := serializer.NewCodecFactory(api.NewScheme(), serializer.EnableStrict).UniversalDeserializer()
	var objects []client.Object
	for _, f := range files {
		data, err := deployments.Chart.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for doc := range strings.SplitSeq(string(data), "\n---\n") {
			obj, _, err := decoder.Decode([]byte(doc), nil, nil)
			if err != nil {
				return nil, fmt.Errorf("decoding %s: %w", f, err)
			}
			objects = append(objects, obj.(client.Object))
		}
	}
	return objects, nil
}

// Install creates or updates the CRDs (waiting until they are served), the
// namespace, the controller manager's identity and rights, and the
// admission policies for peers.
func Install(ctx context.Context, cfg *rest.Config, opts Options) error {
	c, err := newClient(cfg)
	if err != nil {
		return err
	}
	crds, err := CRDs()
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if err := apply(ctx, c, crd); err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	if err := waitEstablished(ctx, c, crds); err != nil {
		return err
	}

	ns := opts.namespace()
	role, err := ClusterRole()
	if err != nil {
		return err
	}
	role.Name = ControllerManagerName
	nsRole, err := Role()
	if err != nil {
		return err
	}
	nsRole.Name, nsRole.Namespace = ControllerManagerName, ns
	objects := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ControllerManagerName, Namespace: ns}},
		role,
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ControllerManagerName},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ControllerManagerName},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ControllerManagerName, Namespace: ns}},
		},
		nsRole,
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ControllerManagerName, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: ControllerManagerName},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ControllerManagerName, Namespace: ns}},
		},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: MetricsReaderName},
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		},
	}
	peerRoles, err := PeerRoles()
	if err != nil {
		return err
	}
	for _, r := range peerRoles {
		objects = append(objects, r)
	}
	policies, err := AdmissionPolicies()
	if err != nil {
		return err
	}
	for _, obj := range append(objects, policies...) {
		if err := apply(ctx, c, obj); err != nil {
			return fmt.Errorf("installing %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

func newClient(cfg *rest.Config) (client.Client, error) {
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	return c, nil
}

// apply creates obj, or replaces the existing object's spec with it.
func apply(ctx context.Context, c client.Client, obj client.Object) error {
	err := c.Create(ctx, obj, client.FieldOwner(fieldOwner))
	if err == nil || !apierrors.IsAlreadyExists(err) {
		return err
	}
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return err
	}
	existing, err := c.Scheme().New(gvk)
	if err != nil {
		return err
	}
	current := existing.(client.Object)
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
		return err
	}
	if _, isNamespace := obj.(*corev1.Namespace); isNamespace {
		return nil // nothing of ours to update
	}
	if _, isSA := obj.(*corev1.ServiceAccount); isSA {
		return nil
	}
	obj.SetResourceVersion(current.GetResourceVersion())
	return c.Update(ctx, obj, client.FieldOwner(fieldOwner))
}

func waitEstablished(ctx context.Context, c client.Client, crds []*apiextensionsv1.CustomResourceDefinition) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, want := range crds {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKeyFromObject(want), &crd); err != nil {
				last = err
				return false, nil //nolint:nilerr // polled again; the last error is returned on timeout
			}
			if !established(&crd) {
				last = fmt.Errorf("CRD %s is not Established yet", crd.Name)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return errors.Join(fmt.Errorf("waiting for CRDs: %w", err), last)
	}
	return nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established {
			return cond.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
