// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package chart loads Liqo's Helm chart (deployments/liqo, embedded) and
// renders it as `helm template` does, with the values checked against the
// chart's values.schema.json. liqoctl installs it with the Helm SDK; the
// playground and the tests install what Render gives, so that every test
// exercises the manifests users get.
package chart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/liqo-go/liqo/deployments"
)

// Root is the chart's directory in deployments.Chart.
const Root = "liqo"

// Load returns the embedded chart.
func Load() (*chartv2.Chart, error) {
	var files []*archive.BufferedFile
	err := fs.WalkDir(deployments.Chart, Root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := deployments.Chart.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, &archive.BufferedFile{Name: strings.TrimPrefix(p, Root+"/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the embedded chart: %w", err)
	}
	c, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("loading the embedded chart: %w", err)
	}
	return c, nil
}

// Release says what is rendered: a release name and namespace, and the
// values over the chart's defaults.
type Release struct {
	Name      string
	Namespace string
	Values    map[string]any
	// KubeVersion is the cluster's version ("v1.37.1"); empty means
	// Helm's default.
	KubeVersion string
}

// Render renders the chart for r, after checking r's values against the
// chart's schema (an error names the offending value). It returns each
// template's output by file name, as Helm does.
func Render(c *chartv2.Chart, r Release) (map[string]string, error) {
	caps := common.DefaultCapabilities.Copy()
	if r.KubeVersion != "" {
		kv, err := common.ParseKubeVersion(r.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("kubernetes version %q: %w", r.KubeVersion, err)
		}
		caps.KubeVersion = *kv
	}
	vals, err := chartutil.ToRenderValuesWithSchemaValidation(c, r.Values,
		common.ReleaseOptions{Name: r.Name, Namespace: r.Namespace, IsInstall: true, Revision: 1}, caps, false)
	if err != nil {
		return nil, fmt.Errorf("the values of chart %s: %w", c.Name(), err)
	}
	out, err := engine.Render(c, vals)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", c.Name(), err)
	}
	return out, nil
}

// Objects renders the chart for r and decodes its manifests, in the order
// of their template files, then of the documents in each.
func Objects(c *chartv2.Chart, r Release) ([]*unstructured.Unstructured, error) {
	out, err := Render(c, r)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if path.Ext(name) != ".yaml" || path.Base(name) == "NOTES.txt" {
			continue
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(out[name])), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("decoding %s: %w", name, err)
			}
			if len(u.Object) == 0 {
				continue // an empty document
			}
			objs = append(objs, &u)
		}
	}
	return objs, nil
}
