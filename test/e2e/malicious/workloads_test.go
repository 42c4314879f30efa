// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package malicious_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/offloading"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// TestOffloadedWorkloadsStayInTheirBox: the provider namespace of an
// offloaded namespace enforces the baseline pod security level, so that
// the consumer's virtual kubelet, used directly, can create neither a pod
// that reaches the provider's hosts nor a Service that opens its nodes'
// ports or claims an external IP; a pod asking for the host's network in
// the consumer fails there, saying that the provider rejected it, and
// nothing of it runs in the provider; an ordinary pod still runs; its
// ephemeral containers and resizes are held to the same rules and to
// the quota.
func TestOffloadedWorkloadsStayInTheirBox(t *testing.T) {
	peered(t)
	a, b, _ := members()
	ctx := t.Context()
	const ns = "boxed"
	remoteNS := remoteNamespaceOf(t, offload(t, ns, offloadingv1alpha1.NamespaceOffloadingSpec{}, 2), b.ClusterID)
	inA, inB := framework.Client(t, a), framework.Client(t, b)
	vk := framework.ClientFor(t, framework.VirtualKubeletConfig(t, a, b))

	t.Run("the provider namespace enforces the baseline level", func(t *testing.T) {
		var n corev1.Namespace
		if err := inB.Get(ctx, client.ObjectKey{Name: remoteNS}, &n); err != nil {
			t.Fatal(err)
		}
		if got := n.Labels[offloading.PodSecurityEnforceLabel]; got != "baseline" {
			t.Fatalf("namespace %s in %s: %s=%q, want baseline", remoteNS, b.Name, offloading.PodSecurityEnforceLabel, got)
		}
	})

	// Created directly in the provider (named direct-*, apart from the
	// consumer's pods below), each is refused; what slipped through goes
	// with the namespace when the test ends.
	t.Run("the virtual kubelet cannot create pods that reach the provider's hosts", func(t *testing.T) {
		framework.Allowed(t, "an ordinary pod (dry run)", vk.Create(ctx, labelled(pausePod(remoteNS, "direct-ordinary"), a), client.DryRunAll))
		for _, tc := range []struct {
			name   string
			mutate func(*corev1.PodSpec)
		}{
			{"privileged", func(s *corev1.PodSpec) {
				s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
			}},
			{"host-network", func(s *corev1.PodSpec) { s.HostNetwork = true }},
			{"host-pid", func(s *corev1.PodSpec) { s.HostPID = true }},
			{"host-path", func(s *corev1.PodSpec) {
				s.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
				s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: "/host"}}
			}},
			{"sys-admin", func(s *corev1.PodSpec) {
				s.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				pod := labelled(pausePod(remoteNS, "direct-"+tc.name), a)
				tc.mutate(&pod.Spec)
				framework.Refused(t, "creating a "+tc.name+" pod", vk.Create(ctx, pod))
			})
		}
	})

	t.Run("the virtual kubelet cannot expose the provider's nodes", func(t *testing.T) {
		port := []corev1.ServicePort{{Name: "http", Port: 80}}
		plain := labelled(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: "plain"}, Spec: corev1.ServiceSpec{Ports: port}}, a)
		framework.Allowed(t, "creating a ClusterIP Service", vk.Create(ctx, plain))
		// The consumer's own reflector may remove it first: it stands
		// for no Service of the consumer's.
		framework.Allowed(t, "deleting it", client.IgnoreNotFound(vk.Delete(ctx, plain)))
		for _, tc := range []struct {
			name string
			spec corev1.ServiceSpec
		}{
			{"node-port", corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: port}},
			{"load-balancer", corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: port}},
			{"external-ip", corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: port, ExternalIPs: []string{"203.0.113.10"}}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				svc := labelled(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: tc.name}, Spec: tc.spec}, a)
				framework.Refused(t, "creating a "+tc.name+" Service", vk.Create(ctx, svc))
			})
		}
	})

	// The virtual kubelet asks for the cluster IP a Service has in the
	// consumer; the provider refuses the band its allocator keeps for
	// addresses chosen by hand (the playground's range is 10.96.0.0/16:
	// 10.96.0.1 to 10.96.1.0).
	t.Run("the virtual kubelet cannot take a cluster IP of the band the provider keeps for its administrators", func(t *testing.T) {
		port := []corev1.ServicePort{{Name: "http", Port: 80}}
		withIP := func(name, ip string) *corev1.Service {
			return labelled(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: name}, Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: port}}, a)
		}
		framework.Allowed(t, "asking for an address of the range's dynamic part (dry run)", vk.Create(ctx, withIP("direct-dynamic", "10.96.201.17"), client.DryRunAll))
		framework.Allowed(t, "asking for the first address after the band (dry run)", vk.Create(ctx, withIP("direct-after-band", "10.96.1.1"), client.DryRunAll))
		// Free addresses the allocator would grant to anyone who names
		// them: the policy refuses them. Addresses outside the range or
		// of another family: the allocator refuses them first.
		for _, tc := range []struct {
			name, ip string
			policy   bool
		}{
			{"static-band", "10.96.0.53", true},
			{"static-band-end", "10.96.1.0", true}, // the 256th after the network address
			{"outside-the-range", "10.200.0.5", false},
			{"ipv6", "fd00::5", false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := vk.Create(ctx, withIP("direct-"+tc.name, tc.ip))
				framework.Refused(t, "asking for "+tc.ip, err)
				if !strings.Contains(err.Error(), "spec.clusterIP") || (tc.policy && !strings.Contains(err.Error(), "keeps for addresses chosen by hand")) {
					t.Errorf("asking for %s: %v, want a refusal naming spec.clusterIP (the policy's: %t)", tc.ip, err, tc.policy)
				}
			})
		}
		// Nor by turning the copy of an ExternalName Service (the
		// consumer's, so that its reflector keeps it) into a ClusterIP one.
		ext := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "external"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com", Ports: port}}
		if err := inA.Create(ctx, ext); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 30*time.Second, func() error {
			var cp corev1.Service
			if err := vk.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: ext.Name}, &cp); err != nil {
				return err
			}
			cp.Spec.Type, cp.Spec.ExternalName, cp.Spec.ClusterIP = corev1.ServiceTypeClusterIP, "", "10.96.0.54"
			err := vk.Update(ctx, &cp)
			if apierrors.IsConflict(err) {
				return err // the reflector wrote meanwhile: again
			}
			framework.Refused(t, "turning the copy of an ExternalName Service into a ClusterIP one at 10.96.0.54", err)
			if !strings.Contains(err.Error(), "spec.clusterIP") || !strings.Contains(err.Error(), "keeps for addresses chosen by hand") {
				t.Errorf("turning an ExternalName Service into one at 10.96.0.54: %v, want the policy's refusal naming spec.clusterIP", err)
			}
			return nil
		})
		// The provider's own administrators keep the band.
		mine := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: "direct-admin"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.53", Ports: port}}
		framework.Allowed(t, "the provider's administrator asking for 10.96.0.53 (dry run)", inB.Create(ctx, mine, client.DryRunAll))
	})

	// What a consumer writes here carries its own ID: the controller
	// manager caches none of it (cache.go), and the exposure and the
	// quota count it as that consumer's.
	t.Run("the virtual kubelet cannot write objects that pass for the provider's or another consumer's", func(t *testing.T) {
		_, _, c := members()
		objects := func() []client.Object {
			return []client.Object{
				pausePod(remoteNS, "direct-unlabelled"),
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: "direct-unlabelled"}, StringData: map[string]string{"k": "v"}},
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: "direct-unlabelled"}, Data: map[string]string{"k": "v"}},
				&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: remoteNS, Name: "direct-unlabelled"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}},
			}
		}
		for _, obj := range objects() {
			what := fmt.Sprintf("creating a %T with no origin label", obj)
			err := vk.Create(ctx, obj)
			framework.Refused(t, what, err)
			if !strings.Contains(err.Error(), "metadata.labels[offloading.liqo.io/origin-cluster-id]") {
				t.Errorf("%s: %v, want the refusal to name the label", what, err)
			}
		}
		for _, obj := range objects() {
			framework.Refused(t, fmt.Sprintf("creating a %T labelled as %s's", obj, c.Name), vk.Create(ctx, labelled(obj, c)))
		}
	})

	// Bound straight to B's virtual node, as the scheduler would: the
	// toleration is the offloading webhook's, here written out.
	node, err := framework.VirtualNode(inA, b.ClusterID)
	if err != nil {
		t.Fatal(err)
	}
	bound := func(name string) *corev1.Pod {
		pod := pausePod(ns, name)
		pod.Spec.NodeName = node.Name
		pod.Spec.Tolerations = []corev1.Toleration{{Key: offloadingv1alpha1.VirtualNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
		return pod
	}

	t.Run("a consumer pod on the host's network fails as rejected by the provider", func(t *testing.T) {
		pod := bound("host-network")
		pod.Spec.HostNetwork = true
		if err := inA.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 30*time.Second, func() error {
			if err := inA.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			if pod.Status.Phase != corev1.PodFailed || pod.Status.Reason != offloadingv1alpha1.ReasonProviderRejected || pod.Status.Message == "" {
				return fmt.Errorf("pod %s: phase %s, reason %q, message %q; want Failed, %s, and why", pod.Name, pod.Status.Phase, pod.Status.Reason, pod.Status.Message, offloadingv1alpha1.ReasonProviderRejected)
			}
			return nil
		})
		t.Logf("the pod failed with: %s", pod.Status.Message)
		if err := inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: pod.Name}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
			t.Fatalf("pod %s/%s exists in %s (%v), want none", remoteNS, pod.Name, b.Name, err)
		}
	})

	t.Run("an ordinary pod still runs in the provider", func(t *testing.T) {
		pod := bound("ordinary")
		if err := inA.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 30*time.Second, func() error {
			if err := inA.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			if pod.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s: phase %s (%s), want Running", pod.Name, pod.Status.Phase, pod.Status.Message)
			}
			return nil
		})
		var remote corev1.Pod
		if err := inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: pod.Name}, &remote); err != nil {
			t.Fatalf("the provider copy of %s: %v", pod.Name, err)
		}
		if got := remote.Annotations[offloadingv1alpha1.OriginUIDAnnotation]; got != string(pod.UID) {
			t.Fatalf("provider pod %s/%s backs UID %q, want %s", remoteNS, remote.Name, got, pod.UID)
		}
	})

	// kubectl debug reaches the provider through the pods'
	// ephemeralcontainers subresource: the same checks hold there, on
	// the provider copy of a consumer's pod.
	t.Run("the virtual kubelet cannot add ephemeral containers that reach the provider's hosts", func(t *testing.T) {
		pod := bound("debugged")
		if err := inA.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 30*time.Second, func() error {
			return inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: pod.Name}, &corev1.Pod{})
		})
		// Read, add, write, again if the pod moved on (its status does as
		// it starts): a refusal is not a conflict, and ends the retries.
		debug := func(name string, sc *corev1.SecurityContext) error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				var cur corev1.Pod
				if err := vk.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: pod.Name}, &cur); err != nil {
					return err
				}
				cur.Spec.EphemeralContainers = append(cur.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
					Name: name, Image: "registry.k8s.io/pause:3.10", SecurityContext: sc, TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent,
				}})
				return vk.SubResource("ephemeralcontainers").Update(ctx, &cur)
			})
		}
		framework.Refused(t, "adding a privileged ephemeral container", debug("privileged", &corev1.SecurityContext{Privileged: ptr.To(true)}))
		framework.Refused(t, "adding an ephemeral container with SYS_ADMIN", debug("sys-admin",
			&corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}))
		framework.Allowed(t, "adding an ordinary ephemeral container", debug("ordinary", nil))
	})

	// An in-place resize reaches the provider through the pods' resize
	// subresource: the consumer's quota there counts the new resources.
	t.Run("the virtual kubelet cannot resize a pod beyond what was offered, nor the provider inflate what the consumer counts of it", func(t *testing.T) {
		pod := bound("resized")
		small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")}
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: small, Limits: small.DeepCopy()}
		if err := inA.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		// The provider's node runs it, and reports its containers'
		// resources as a kubelet that resizes does (KWOK's do not; the
		// API server refuses to resize a pod running on a node that does
		// not).
		framework.Eventually(t, 30*time.Second, func() error {
			var cur corev1.Pod
			if err := inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: pod.Name}, &cur); err != nil {
				return err
			}
			if len(cur.Status.ContainerStatuses) != 1 || cur.Status.ContainerStatuses[0].State.Running == nil {
				return fmt.Errorf("provider pod %s/%s not running yet: %+v", remoteNS, pod.Name, cur.Status.ContainerStatuses)
			}
			cur.Status.ContainerStatuses[0].Resources = cur.Spec.Containers[0].Resources.DeepCopy()
			return inB.Status().Update(ctx, &cur)
		})
		var pr discoveryv1alpha1.PeeringRequest
		if err := inB.Get(ctx, client.ObjectKey{Name: a.ClusterID}, &pr); err != nil {
			t.Fatal(err)
		}
		resize := func(cpu resource.Quantity) error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				var cur corev1.Pod
				if err := vk.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: pod.Name}, &cur); err != nil {
					return err
				}
				r := &cur.Spec.Containers[0].Resources
				r.Requests[corev1.ResourceCPU], r.Limits[corev1.ResourceCPU] = cpu, cpu
				return vk.SubResource("resize").Update(ctx, &cur)
			})
		}
		more := pr.Status.OfferedResources.Cpu().DeepCopy()
		more.Add(resource.MustParse("1"))
		if err := resize(more); err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") {
			t.Fatalf("resizing the provider pod to %s CPU, %s offered: %v, want refused for the quota", more.String(), pr.Status.OfferedResources.Cpu().String(), err)
		}
		framework.Allowed(t, "resizing it within the offer", resize(resource.MustParse("20m")))
		// Not the consumer's resize: its virtual kubelet puts the
		// provider pod back as the consumer's spec has it.
		framework.Eventually(t, 30*time.Second, func() error {
			var cur corev1.Pod
			if err := inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: pod.Name}, &cur); err != nil {
				return err
			}
			if got := cur.Spec.Containers[0].Resources.Requests.Cpu(); got.MilliValue() != 10 {
				return fmt.Errorf("provider pod requests %s CPU, want the consumer's 10m back", got.String())
			}
			return nil
		})
		// The provider's status cannot inflate what the consumer counts
		// of the pod (its quota and scheduler take the larger of spec
		// and status): written by the provider's admin, as a hostile
		// kubelet would report it.
		framework.Eventually(t, 30*time.Second, func() error {
			var cur corev1.Pod
			if err := inB.Get(ctx, client.ObjectKey{Namespace: remoteNS, Name: pod.Name}, &cur); err != nil {
				return err
			}
			huge := resource.MustParse("64")
			cs := &cur.Status.ContainerStatuses[0]
			cs.AllocatedResources = corev1.ResourceList{corev1.ResourceCPU: huge, corev1.ResourceMemory: resource.MustParse("1Ti")}
			cs.Resources = &corev1.ResourceRequirements{Requests: cs.AllocatedResources.DeepCopy(), Limits: cs.AllocatedResources.DeepCopy()}
			cur.Status.Message = "inflated"
			return inB.Status().Update(ctx, &cur)
		})
		framework.Eventually(t, 30*time.Second, func() error {
			var cur corev1.Pod
			if err := inA.Get(ctx, client.ObjectKeyFromObject(pod), &cur); err != nil {
				return err
			}
			if cur.Status.Message != "inflated" || len(cur.Status.ContainerStatuses) != 1 {
				return fmt.Errorf("the provider's status not reflected yet: %q", cur.Status.Message)
			}
			cs := cur.Status.ContainerStatuses[0]
			if cs.AllocatedResources.Cpu().MilliValue() > 10 || cs.AllocatedResources.Memory().Cmp(resource.MustParse("32Mi")) > 0 ||
				cs.Resources == nil || cs.Resources.Requests.Cpu().MilliValue() > 10 || cs.Resources.Limits.Memory().Cmp(resource.MustParse("32Mi")) > 0 {
				return fmt.Errorf("the consumer's pod shows allocated %v, resources %v; want no more than its spec's 10m and 32Mi", cs.AllocatedResources, cs.Resources)
			}
			return nil
		})
	})
}
