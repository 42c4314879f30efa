// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package api registers every Liqo API group, together with the built-in
// Kubernetes kinds and CustomResourceDefinitions, in one scheme that controllers, tests and liqoctl share.
package api

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	netv1alpha1 "github.com/liqo-go/liqo/api/net/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	sharingv1alpha1 "github.com/liqo-go/liqo/api/sharing/v1alpha1"
)

var schemeBuilder = runtime.NewSchemeBuilder(
	clientgoscheme.AddToScheme,
	apiextensionsv1.AddToScheme,
	brokerv1alpha1.AddToScheme,
	configv1alpha1.AddToScheme,
	discoveryv1alpha1.AddToScheme,
	netv1alpha1.AddToScheme,
	offloadingv1alpha1.AddToScheme,
	sharingv1alpha1.AddToScheme,
)

// AddToScheme adds the built-in Kubernetes kinds and every Liqo kind.
var AddToScheme = schemeBuilder.AddToScheme

// NewScheme returns a new scheme holding the built-in and the Liqo kinds.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(AddToScheme(s))
	return s
}
