// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package token projects a pod's service account tokens into the
// provider: the consumer's API server issues them, bound to the pod, and
// the provider pod reads them from a Secret the pod reflector keeps
// current, as a kubelet renews the tokens it projects.
package token

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/virtualkubelet/forge"
	"github.com/liqo-go/liqo/internal/virtualkubelet/provider"
)

// The right to request tokens is bound to the controller manager in each
// namespace it offloads, and there alone (offloading.TokenRequesterRole).

const (
	// defaultTokenSeconds is the lifetime asked for when the pod's volume
	// does not say.
	defaultTokenSeconds = 3600
	// extendedTokenSeconds is the lifetime of the kube-api-access volume,
	// which the API server extends to a year.
	extendedTokenSeconds = 3607
	// Keys of the token Secret (each token's key ends in tokenKey).
	tokenKey     = "token"
	caKey        = "ca.crt"
	namespaceKey = "namespace"
)

// Requested says whether pod asks for its service account token in
// the provider.
func Requested(pod *corev1.Pod) bool {
	return pod.Annotations[offloadingv1alpha1.ServiceAccountTokenAnnotation] == "true"
}

// SecretName is the provider Secret holding the token of pod name.
func SecretName(pod string) string {
	name := pod + "-liqo-token"
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(pod))
	return pod[:200] + "-" + hex.EncodeToString(sum[:8]) + "-liqo-token"
}

// tokenSource is one service account token projection of a pod, and the
// key of the token Secret that holds its token.
type tokenSource struct {
	key  string
	proj *corev1.ServiceAccountTokenProjection
}

// tokenKeyFor is the key of the token Secret holding the token of source
// i of volume: each projection has its own audience and lifetime.
func tokenKeyFor(volume string, i int) string { return fmt.Sprintf("%s.%d.%s", volume, i, tokenKey) }

// sources returns every service account token projection of spec.
func sources(spec *corev1.PodSpec) []tokenSource {
	var out []tokenSource
	for _, v := range spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for i, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				out = append(out, tokenSource{key: tokenKeyFor(v.Name, i), proj: s.ServiceAccountToken})
			}
		}
	}
	return out
}

// Volume rewrites a projected volume holding a service account token
// so that the token, the consumer's CA and the namespace come from the
// token Secret: the consumer's token is valid against the consumer's API
// server only, whose CA and namespace the provider does not know.
func Volume(name string, v *corev1.ProjectedVolumeSource, secret string) *corev1.ProjectedVolumeSource {
	out := v.DeepCopy()
	var items []corev1.KeyToPath
	var sources []corev1.VolumeProjection
	for i, s := range out.Sources {
		switch {
		case s.ServiceAccountToken != nil:
			items = append(items, corev1.KeyToPath{Key: tokenKeyFor(name, i), Path: s.ServiceAccountToken.Path})
		case s.ConfigMap != nil && s.ConfigMap.Name == forge.RootCAConfigMap:
			for _, it := range s.ConfigMap.Items {
				if it.Key == caKey {
					items = append(items, corev1.KeyToPath{Key: caKey, Path: it.Path, Mode: it.Mode})
				}
			}
		case s.DownwardAPI != nil:
			var kept []corev1.DownwardAPIVolumeFile
			for _, f := range s.DownwardAPI.Items {
				if f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.namespace" {
					items = append(items, corev1.KeyToPath{Key: namespaceKey, Path: f.Path, Mode: f.Mode})
					continue
				}
				kept = append(kept, f)
			}
			if len(kept) > 0 {
				s.DownwardAPI.Items = kept
				sources = append(sources, s)
			}
		default:
			sources = append(sources, s)
		}
	}
	out.Sources = append([]corev1.VolumeProjection{{Secret: &corev1.SecretProjection{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Items: items,
	}}}, sources...)
	return out
}

// Ensure keeps the provider Secret with pod's tokens current: one
// token per projection, bound to the pod, requested when there is none
// for this pod or when four fifths of the lifetime asked for are gone
// (at most a day), as a kubelet renews them. It returns when to look
// again; a pod with no token projection gets nothing.
// c reads the consumer's CA bundle and requests the tokens; consumerID
// labels the Secret.
func Ensure(ctx context.Context, c client.Client, pns provider.Namespace, pod *corev1.Pod, consumerID string) (time.Duration, error) {
	srcs := sources(&pod.Spec)
	if len(srcs) == 0 {
		return 0, nil
	}
	name := SecretName(pod.Name)
	existing, _ := pns.Get(provider.Secrets, name).(*corev1.Secret)
	if existing != nil {
		if existing.Annotations[offloadingv1alpha1.OriginUIDAnnotation] == string(pod.UID) {
			if at, err := time.Parse(time.RFC3339, existing.Annotations[forge.TokenRefreshAnnotation]); err == nil && time.Until(at) > 0 {
				return time.Until(at), nil
			}
		}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	var ca corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: forge.RootCAConfigMap}, &ca); client.IgnoreNotFound(err) != nil {
		return 0, err
	}
	data := map[string][]byte{caKey: []byte(ca.Data[caKey]), namespaceKey: []byte(pod.Namespace)}
	issued := time.Now()
	refreshAt := issued.Add(24 * time.Hour)
	for _, src := range srcs {
		seconds := ptr.Deref(src.proj.ExpirationSeconds, defaultTokenSeconds)
		if seconds == extendedTokenSeconds {
			// The API server would make this a year-long token; one that
			// leaves the cluster lives the hour asked for.
			seconds = defaultTokenSeconds
		}
		var audiences []string
		if src.proj.Audience != "" {
			audiences = []string{src.proj.Audience}
		}
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			Audiences: audiences, ExpirationSeconds: ptr.To(seconds),
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		}}
		if err := c.SubResource("token").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: sa}}, tr); err != nil {
			return 0, fmt.Errorf("requesting a token of service account %s/%s: %w", pod.Namespace, sa, err)
		}
		data[src.key] = []byte(tr.Status.Token)
		if at := issued.Add(time.Duration(seconds) * time.Second * 4 / 5); at.Before(refreshAt) {
			refreshAt = at
		}
	}
	remoteNS := pns.Name()
	meta := forge.Meta(&pod.ObjectMeta, remoteNS, consumerID)
	meta.Name = name
	meta.Annotations[forge.TokenForPodAnnotation] = pod.Name
	meta.Annotations[forge.TokenRefreshAnnotation] = refreshAt.UTC().Format(time.RFC3339)
	secret := &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeOpaque, Data: data}
	var err error
	if existing != nil {
		secret.ResourceVersion = existing.ResourceVersion
		err = pns.Update(ctx, secret)
		if apierrors.IsNotFound(err) { // the watch still showed a deleted one
			secret.ResourceVersion = ""
			existing = nil
		}
	}
	if existing == nil {
		err = pns.Create(ctx, secret)
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return 0, fmt.Errorf("writing the token of pod %s to %s/%s in %s: %w", pod.Name, remoteNS, name, pns.Provider(), err)
	}
	return time.Until(refreshAt), nil
}

// Delete deletes, in every provider, the token Secret of the local pod
// ns/name unless it holds the token of keepUID in keepProvider.
func Delete(ctx context.Context, providers provider.Providers, ns, name, keepProvider, keepUID string) error {
	for _, pns := range providers.Open(ns) {
		s, ok := pns.Get(provider.Secrets, SecretName(name)).(*corev1.Secret)
		if !ok {
			continue
		}
		if s.Annotations[forge.TokenForPodAnnotation] != name || (pns.Provider() == keepProvider && s.Annotations[offloadingv1alpha1.OriginUIDAnnotation] == keepUID) {
			continue
		}
		if err := pns.Delete(ctx, provider.Secrets, s.Name, s.UID, nil); err != nil {
			return fmt.Errorf("deleting token %s/%s in %s: %w", s.Namespace, s.Name, pns.Provider(), err)
		}
	}
	return nil
}
