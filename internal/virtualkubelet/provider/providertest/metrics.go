// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package providertest

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MetricsAPIName is the CustomResourceDefinition MetricsAPI makes.
const MetricsAPIName = "pods.metrics.k8s.io"

// MetricsAPI makes the API server of c serve metrics.k8s.io/v1beta1 pods
// (PodMetrics) as a custom resource, in place of metrics-server: what a
// provider's metrics API answers, written by a test (WritePodMetrics).
// It returns once the API is served; the caller deletes the
// CustomResourceDefinition (MetricsAPIName) when done.
func MetricsAPI(ctx context.Context, c client.Client) error {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	container := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"name":  str,
		"usage": {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &str}},
	}}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name: MetricsAPIName,
			// A k8s.io group is served from a CRD only with this.
			Annotations: map[string]string{"api-approved.kubernetes.io": "unapproved, a test's stand-in for metrics-server"},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "metrics.k8s.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "pods", Singular: "podmetrics", Kind: "PodMetrics", ListKind: "PodMetricsList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1beta1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"timestamp": str, "window": str,
						"containers": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: ptr.To(container)}},
					},
				}},
			}},
		},
	}
	if err := c.Create(ctx, crd); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	for {
		var got apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), &got); err != nil {
			return err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not established: %w", crd.Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WritePodMetrics writes, through c, that pod in ns used usage (by
// container) over the 10 s before at, as metrics-server reports it.
func WritePodMetrics(ctx context.Context, c client.Client, ns, pod string, at time.Time, usage map[string]corev1.ResourceList) error {
	containers := []any{}
	for name, u := range usage {
		l := map[string]any{}
		for r, q := range u {
			l[string(r)] = q.String()
		}
		containers = append(containers, map[string]any{"name": name, "usage": l})
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
		"metadata":  map[string]any{"namespace": ns, "name": pod},
		"timestamp": at.UTC().Format(time.RFC3339), "window": "10s", "containers": containers,
	}}
	var old unstructured.Unstructured
	old.SetGroupVersionKind(obj.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), &old)
	switch {
	case apierrors.IsNotFound(err):
		return c.Create(ctx, obj)
	case err != nil:
		return err
	}
	obj.SetResourceVersion(old.GetResourceVersion())
	return c.Update(ctx, obj)
}
