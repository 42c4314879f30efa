// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-go/liqo/internal/network/netcheck"
	"github.com/liqo-go/liqo/internal/playground"
)

// CheckPod runs `liqo-gateway check args...` (the image the real nodes
// have) in ns of m, as Pod Security restricted allows, and returns it
// once it has an address (or has ended).
func CheckPod(t testing.TB, m *playground.Member, ns, name string, nodeSelector map[string]string, args ...string) *corev1.Pod {
	t.Helper()
	c := Client(t, m)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			NodeSelector:    nodeSelector,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "check", Image: playground.GatewayImageRepository + ":" + playground.GatewayImageTag, ImagePullPolicy: corev1.PullNever,
				Args:            append([]string{"check"}, args...),
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	if err := c.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 2*time.Minute, func() error {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.PodIP == "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("pod %s/%s in %s: %s, no address yet", ns, name, m.Name, pod.Status.Phase)
		}
		return nil
	})
	return pod
}

// CheckResults waits for a `check get` pod to end and reads what it
// printed, by URL.
func CheckResults(t testing.TB, m *playground.Member, pod *corev1.Pod) map[string]netcheck.Result {
	t.Helper()
	c := Client(t, m)
	Eventually(t, 2*time.Minute, func() error {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("client %s: %s", pod.Name, pod.Status.Phase)
		}
		return nil
	})
	logs, err := Clientset(t, m).CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]netcheck.Result{}
	for _, r := range netcheck.ParseResults(logs) {
		out[r.URL] = r
	}
	return out
}

// NodeIP runs ip(8) in the network namespace of m's first real node.
func NodeIP(t testing.TB, m *playground.Member, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "ip", append([]string{"-n", m.RealNodeNetns(0)}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s on %s's node: %v: %s", strings.Join(args, " "), m.Name, err, out)
	}
	return string(out)
}
