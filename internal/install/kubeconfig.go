// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package install

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ControllerManagerKubeconfig returns a kubeconfig that authenticates as the
// controller manager's ServiceAccount, with a token valid for ttl. It is how
// a controller manager running outside the cluster (the playground's) gets
// exactly the rights it would have in a pod.
func ControllerManagerKubeconfig(ctx context.Context, cfg *rest.Config, opts Options, ttl time.Duration) ([]byte, error) {
	return ServiceAccountKubeconfig(ctx, cfg, opts.namespace(), ControllerManagerName, ttl)
}

// ServiceAccountKubeconfig returns a kubeconfig that authenticates as the
// ServiceAccount namespace/name, with a token valid for ttl.
func ServiceAccountKubeconfig(ctx context.Context, cfg *rest.Config, namespace, name string, ttl time.Duration) ([]byte, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	seconds := int64(ttl.Seconds())
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: name, Namespace: namespace}
	kc.CurrentContext = "default"
	return clientcmd.Write(*kc)
}
