// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package install

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/liqo-go/liqo/api"
)

func fakeClient(objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(objs...).Build()
}

func TestDetectedRanges(t *testing.T) {
	kcm := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager-cp", Namespace: "kube-system", Labels: map[string]string{"component": "kube-controller-manager"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kcm", Command: []string{
			"kube-controller-manager", "--allocate-node-cidrs=true", "--cluster-cidr=fd00::/48,192.168.0.0/16", "--service-cluster-ip-range=10.96.0.0/12",
		}}}},
	}
	svcCIDR := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.43.0.0/16"}}}
	for _, tc := range []struct {
		name                       string
		objs                       []client.Object
		profile                    Profile
		pod, podFrom, svc, svcFrom string
	}{
		{"kubeadm's static pod, IPv4 first", []client.Object{kcm, svcCIDR}, Distributions["kubeadm"],
			"192.168.0.0/16", "--cluster-cidr", "10.96.0.0/12", "--service-cluster-ip-range"},
		{"ServiceCIDR API over the distribution's default", []client.Object{svcCIDR}, Profile{PodCIDR: "10.42.0.0/16", ServiceCIDR: "10.99.0.0/16"},
			"10.42.0.0/16", "default", "10.43.0.0/16", "ServiceCIDR"},
		{"nothing known", nil, Distributions["generic"], "", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, podFrom, svc, svcFrom, err := detectedRanges(t.Context(), fakeClient(tc.objs...), tc.profile)
			if err != nil {
				t.Fatal(err)
			}
			if pod != tc.pod || svc != tc.svc || (tc.pod != "" && !strings.Contains(podFrom, tc.podFrom)) || (tc.svc != "" && !strings.Contains(svcFrom, tc.svcFrom)) {
				t.Errorf("pod %s (%s), service %s (%s); want %s (%s), %s (%s)", pod, podFrom, svc, svcFrom, tc.pod, tc.podFrom, tc.svc, tc.svcFrom)
			}
		})
	}
}

func TestAPIServerURL(t *testing.T) {
	cp := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "cp", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "cp"}, {Type: corev1.NodeInternalIP, Address: "172.18.0.2"}}},
	}
	worker := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "a-worker"},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.3"}}},
	}
	c := fakeClient(cp, worker)
	for _, tc := range []struct {
		server, distribution, want string
		warns                      bool
	}{
		{"https://api.example.com:6443/", "generic", "https://api.example.com:6443", false},
		{"https://127.0.0.1:41234", "kind", "https://172.18.0.2:6443", false},
		{"https://127.0.0.1:6443", "k3s", "https://172.18.0.2:6443", false},
		{"https://localhost:6443", "kubeadm", "https://localhost:6443", true},
		{"https://10.0.0.1:6443", "kind", "https://10.0.0.1:6443", false},
	} {
		got, warning, err := apiServerURL(t.Context(), c, tc.server, Distributions[tc.distribution])
		if err != nil || got != tc.want || (warning != "") != tc.warns {
			t.Errorf("%s on %s: %s, warning %q, %v; want %s (warning: %v)", tc.server, tc.distribution, got, warning, err, tc.want, tc.warns)
		}
	}
	if _, _, err := apiServerURL(t.Context(), fakeClient(worker), "https://127.0.0.1:6443", Distributions["k3s"]); err == nil || !strings.Contains(err.Error(), "--api-server-url") {
		t.Errorf("no control-plane node: %v, want an error telling to pass --api-server-url", err)
	}
}

// TestValues: the flags win over what was detected, -f and --set over the
// flags, and an unknown range is asked for by its flag.
func TestValues(t *testing.T) {
	o := &Options{ClusterName: "edge", ServiceCIDR: "10.1.0.0/16", AuthURL: "https://auth.example.com", Set: []string{"controllerManager.replicas=1", "auth.service.port=8443"}}
	var out strings.Builder
	values, err := o.Values(t.Context(), fakeClient(), "https://api.example.com", Profile{PodCIDR: "10.42.0.0/16", ServiceCIDR: "10.43.0.0/16", AuthServiceType: "NodePort"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	net := values["networking"].(map[string]any)
	auth := values["auth"].(map[string]any)
	svc := auth["service"].(map[string]any)
	if values["clusterName"] != "edge" || net["podCIDR"] != "10.42.0.0/16" || net["serviceCIDR"] != "10.1.0.0/16" ||
		auth["url"] != "https://auth.example.com" || svc["type"] != "NodePort" || svc["port"] != int64(8443) ||
		values["controllerManager"].(map[string]any)["replicas"] != int64(1) || values["apiServer"].(map[string]any)["url"] != "https://api.example.com" {
		t.Errorf("values %v", values)
	}
	if !strings.Contains(out.String(), "Service CIDR 10.1.0.0/16 (--service-cidr)") {
		t.Errorf("the report does not say where the service CIDR came from:\n%s", out.String())
	}

	o = &Options{ClusterName: "edge"}
	if _, err := o.Values(t.Context(), fakeClient(), "https://api.example.com", Distributions["generic"], &out); err == nil || !strings.Contains(err.Error(), "--pod-cidr") {
		t.Errorf("nothing detected: %v, want an error asking for --pod-cidr", err)
	}
	o = &Options{ClusterName: "edge", PodCIDR: "10.42.0.1/16", ServiceCIDR: "10.43.0.0/16"}
	if _, err := o.Values(t.Context(), fakeClient(), "https://api.example.com", Distributions["generic"], &out); err == nil || !strings.Contains(err.Error(), "--pod-cidr 10.42.0.1/16") {
		t.Errorf("a pod CIDR that is not a network: %v, want an error naming it", err)
	}
}

// TestBrokerValues: --broker turns the broker on with its modes, its
// image beside the controller manager's; a mode not built, or unknown, is
// refused by name.
func TestBrokerValues(t *testing.T) {
	o := &Options{ClusterName: "hub", Broker: "catalog, orchestrator,catalog", ImageRepository: "registry.example.com/liqo/liqo-controller-manager"}
	var out strings.Builder
	values, err := o.Values(t.Context(), fakeClient(), "https://api.example.com", Profile{PodCIDR: "10.42.0.0/16", ServiceCIDR: "10.43.0.0/16", AuthServiceType: "NodePort"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	b := values["broker"].(map[string]any)
	if b["enabled"] != true || fmt.Sprint(b["modes"]) != "[catalog orchestrator]" ||
		b["image"].(map[string]any)["repository"] != "registry.example.com/liqo/liqo-broker" {
		t.Errorf("broker values %v", b)
	}
	for flag, mention := range map[string]string{"catalog,dashboard": "--broker", "aggregate": "aggregator"} {
		o := &Options{ClusterName: "hub", Broker: flag}
		if _, err := o.Values(t.Context(), fakeClient(), "https://api.example.com", Profile{PodCIDR: "10.42.0.0/16", ServiceCIDR: "10.43.0.0/16"}, &out); err == nil || !strings.Contains(err.Error(), mention) {
			t.Errorf("--broker %s: %v, want an error saying %q", flag, err, mention)
		}
	}
}
