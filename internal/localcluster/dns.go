// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package localcluster

import (
	"context"
	"fmt"
	"net/netip"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// ClusterDNSAddress is the cluster DNS Service's address (kube-system/
// kube-dns), the tenth of ServiceCIDR as kubeadm gives it: the real nodes'
// kubelets hand it to pods when Options.ClusterDNSImage is set.
var ClusterDNSAddress = nthAddress(netip.MustParsePrefix(ServiceCIDR), 10).String()

// nthAddress is the address n after prefix's first.
func nthAddress(prefix netip.Prefix, n int) netip.Addr {
	a := prefix.Masked().Addr()
	for range n {
		a = a.Next()
	}
	return a
}

// clusterDNSLabels select the cluster DNS's pods, under the labels
// kubeadm's CoreDNS has.
var clusterDNSLabels = map[string]string{"k8s-app": "kube-dns"}

// corefile serves the cluster domain from the API server (pod records
// from their names, as kubeadm's does) and nothing else: there is no
// resolver upstream of a playground.
const corefile = `.:53 {
    errors
    health :8080
    ready :8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    cache 30
    loadbalance
}
`

// clusterDNS is the cluster DNS, as kubeadm installs CoreDNS: its
// identity and read access, its configuration, one replica on the first
// real node (placed there by name: the scheduler would also take a kwok or
// virtual node), and the kube-dns Service at ClusterDNSAddress.
type clusterDNS struct {
	sa      *corev1.ServiceAccount
	role    *rbacv1.ClusterRole
	binding *rbacv1.ClusterRoleBinding
	cm      *corev1.ConfigMap
	dep     *appsv1.Deployment
	svc     *corev1.Service
}

func newClusterDNS(image, node string) *clusterDNS {
	ns := metav1.NamespaceSystem
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: ns}}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}},
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: ns}, Data: map[string]string{"Corefile": corefile}}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: ns, Labels: clusterDNSLabels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: clusterDNSLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: clusterDNSLabels},
				Spec: corev1.PodSpec{
					NodeName:           node,
					ServiceAccountName: sa.Name,
					DNSPolicy:          corev1.DNSDefault,
					PriorityClassName:  "system-cluster-critical",
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name:            "coredns",
						Image:           image,
						ImagePullPolicy: corev1.PullNever,
						Args:            []string{"-conf", "/etc/coredns/Corefile"},
						Ports: []corev1.ContainerPort{
							{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
							{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
						},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}},
							PeriodSeconds: 1,
						},
						LivenessProbe: &corev1.Probe{
							ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8080)}},
							PeriodSeconds:    10,
							FailureThreshold: 5,
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name},
					}}}},
				},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: ns, Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
		Spec: corev1.ServiceSpec{
			ClusterIP: ClusterDNSAddress,
			Selector:  clusterDNSLabels,
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(53), Protocol: corev1.ProtocolUDP},
				{Name: "dns-tcp", Port: 53, TargetPort: intstr.FromInt32(53), Protocol: corev1.ProtocolTCP},
			},
		},
	}
	return &clusterDNS{sa: sa, role: role, binding: binding, cm: cm, dep: dep, svc: svc}
}

// startClusterDNS installs the cluster DNS (Options.ClusterDNSImage) and
// waits until it answers: its pod Ready, and the Service's endpoint.
func (c *Cluster) startClusterDNS(ctx context.Context) error {
	if c.opts.ClusterDNSImage == "" {
		return nil
	}
	cs, err := c.Client()
	if err != nil {
		return err
	}
	node := c.realNodes[0]
	dns := newClusterDNS(c.opts.ClusterDNSImage, node.name)
	dep := dns.dep
	// Each is created; one there already (a restart) is left as it is.
	for _, create := range []func() error{
		func() error {
			_, err := cs.CoreV1().ServiceAccounts(dns.sa.Namespace).Create(ctx, dns.sa, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, dns.role, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, dns.binding, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().ConfigMaps(dns.cm.Namespace).Create(ctx, dns.cm, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().Services(dns.svc.Namespace).Create(ctx, dns.svc, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.AppsV1().Deployments(dep.Namespace).Create(ctx, dep, metav1.CreateOptions{})
			return err
		},
	} {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("installing the cluster DNS: %w", err)
		}
	}
	err = waitFor(ctx, c.process(node.name), func() bool {
		d, err := cs.AppsV1().Deployments(dep.Namespace).Get(ctx, dep.Name, metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas > 0
	})
	if err != nil {
		return fmt.Errorf("the cluster DNS (image %s) did not become Ready: %w", c.opts.ClusterDNSImage, err)
	}
	return nil
}
