// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package install

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	offloadingv1alpha1 "github.com/liqo-go/liqo/api/offloading/v1alpha1"
	"github.com/liqo-go/liqo/internal/localcluster"
	"github.com/liqo-go/liqo/test/e2e/framework"
)

// kubectlVerbs are the kubelet verbs an operator meets first, with the
// real kubectl on the consumer, on pods that run in real containers on
// the provider's node (the probe image: its serve echoes a POST, and it
// is also cat, test and tar): port-forward carries 10 MB each way to the
// container; cp copies a file in and back out; run -i --rm passes the
// operator's input to a new pod's container, shows its output and
// removes the pod; attach -i does the same for a running pod; debug adds
// an ephemeral container, in the pod's network (with the baseline
// profile: the default one adds SYS_PTRACE, which the provider refuses,
// and the pod's status says so). A user allowed to read the pods and
// their logs, and nothing more, gets the logs (through the virtual
// kubelet) and is refused (403) each of the others, and the virtual
// node's kubelet API through the node proxy: the consumer's API server
// refuses them, as for any node, before the virtual kubelet is asked (its
// own check of its callers, nodes/proxy, is TestKubectlLogsAndExec's, in
// test/e2e/offloading).
func (e *realEnv) kubectlVerbs(pod *corev1.Pod) {
	t := e.t
	t.Helper()
	ctx := t.Context()
	cc := ctrlClient(t, e.consumer)
	kc := e.consumer.KubeconfigPath
	ns := pod.Namespace
	kubectl := func(stdin string, args ...string) (string, error) {
		return framework.KubectlAt(t, kc, stdin, append([]string{"--namespace", ns}, args...)...)
	}
	probeContainer := func(name string, args ...string) corev1.Container {
		return corev1.Container{
			Name: name, Image: localcluster.ProbeImage, ImagePullPolicy: corev1.PullNever, Command: args,
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
		}
	}

	t.Run("kubectl port-forward carries 10 MB each way to the container", func(t *testing.T) {
		lines := framework.KubectlStreamAt(t, kc, "--namespace", ns, "port-forward", "pod/"+pod.Name, "--address", "127.0.0.1", ":8080")
		port := framework.ForwardedPort(t, lines, 8080)
		payload := make([]byte, 10<<20)
		if _, err := rand.Read(payload); err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Timeout: 2 * time.Minute}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+net.JoinHostPort("127.0.0.1", port)+"/", bytes.NewReader(payload))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		back, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the echo of 10 MB through the port-forward: %s, %d bytes, %v", resp.Status, len(back), err)
		}
		if !bytes.Equal(back, payload) {
			t.Fatalf("the %d bytes that came back through the port-forward differ from the %d sent", len(back), len(payload))
		}
	})

	t.Run("kubectl cp copies a file into the container and back", func(t *testing.T) {
		dir := t.TempDir()
		data := make([]byte, 1<<20)
		if _, err := rand.Read(data); err != nil {
			t.Fatal(err)
		}
		in, out := filepath.Join(dir, "in.bin"), filepath.Join(dir, "out.bin")
		if err := os.WriteFile(in, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if o, err := kubectl("", "cp", in, pod.Name+":/tmp/copied.bin"); err != nil {
			t.Fatalf("%v\n%s", err, o)
		}
		if o, err := kubectl("", "cp", pod.Name+":/tmp/copied.bin", out); err != nil {
			t.Fatalf("%v\n%s", err, o)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("copied back %d bytes that differ from the %d copied in", len(got), len(data))
		}
	})

	t.Run("kubectl run -i --rm passes input to a new pod's container and removes the pod", func(t *testing.T) {
		const text = "through the virtual kubelet and back\n"
		o, err := kubectl(text, "run", "once", "--image="+localcluster.ProbeImage, "--image-pull-policy=Never", "--restart=Never", "-i", "--rm", "--command", "--", "/cat")
		if err != nil {
			t.Fatalf("%v\n%s", err, o)
		}
		if !strings.Contains(o, strings.TrimSpace(text)) {
			t.Fatalf("kubectl run -i printed %q, want the input echoed", o)
		}
		framework.Eventually(t, time.Minute, func() error {
			err := cc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "once"}, &corev1.Pod{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("pod once still there after kubectl run --rm (%w)", err)
		})
	})

	t.Run("kubectl attach -i passes input to a running container and shows its output", func(t *testing.T) {
		echo := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}, Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{probeContainer("cat", "/cat")},
		}}
		echo.Spec.Containers[0].Stdin, echo.Spec.Containers[0].StdinOnce = true, true
		if err := cc.Create(ctx, echo); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 2*time.Minute, func() error {
			if err := cc.Get(ctx, client.ObjectKeyFromObject(echo), echo); err != nil {
				return err
			}
			if echo.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod echo: %s", echo.Status.Phase)
			}
			return nil
		})
		const text = "attached across clusters\n"
		o, err := kubectl(text, "attach", "-i", "echo")
		if err != nil {
			t.Fatalf("%v\n%s", err, o)
		}
		if !strings.Contains(o, strings.TrimSpace(text)) {
			t.Fatalf("kubectl attach -i printed %q, want the input echoed", o)
		}
	})

	t.Run("kubectl debug adds an ephemeral container in the pod's network, and says why the provider refuses one", func(t *testing.T) {
		// kubectl's default profile (general) adds SYS_PTRACE, which the
		// provider's baseline level refuses: the pod says so.
		if o, err := kubectl("", "debug", pod.Name, "--image="+localcluster.ProbeImage, "--image-pull-policy=Never", "--container=ptrace",
			"--", "/probe", "get", "http://127.0.0.1:8080/"); err != nil {
			t.Fatalf("%v\n%s", err, o)
		}
		framework.Eventually(t, time.Minute, func() error {
			var cur corev1.Pod
			if err := cc.Get(ctx, client.ObjectKeyFromObject(pod), &cur); err != nil {
				return err
			}
			for _, cs := range cur.Status.EphemeralContainerStatuses {
				if cs.Name == "ptrace" && cs.State.Waiting != nil && cs.State.Waiting.Reason == offloadingv1alpha1.ReasonProviderRejected &&
					strings.Contains(cs.State.Waiting.Message, "SYS_PTRACE") {
					return nil
				}
			}
			return fmt.Errorf("ephemeral container statuses %+v, want ptrace rejected by the provider for SYS_PTRACE", cur.Status.EphemeralContainerStatuses)
		})
		if o, err := kubectl("", "debug", pod.Name, "--profile=baseline", "--image="+localcluster.ProbeImage, "--image-pull-policy=Never", "--container=debugger",
			"--", "/probe", "get", "http://127.0.0.1:8080/"); err != nil {
			t.Fatalf("%v\n%s", err, o)
		}
		framework.Eventually(t, 2*time.Minute, func() error {
			o, err := kubectl("", "logs", pod.Name, "--container=debugger")
			if err != nil {
				return err
			}
			if !strings.Contains(o, "hello from the provider") {
				return fmt.Errorf("the debugger's log %q, want the pod's answer on its own loopback", o)
			}
			return nil
		})
	})

	t.Run("a user who may only read pods is refused each verb", func(t *testing.T) {
		viewer := e.viewerKubeconfig(ns)
		as := func(args ...string) (string, error) {
			return framework.KubectlAt(t, viewer, "", append([]string{"--namespace", ns}, args...)...)
		}
		if o, err := as("logs", pod.Name); err != nil || !strings.Contains(o, "serving on :8080") {
			t.Fatalf("the viewer's kubectl logs: %v\n%s", err, o)
		}
		vnode, err := framework.VirtualNode(cc, clusterID(t, ctrlClient(t, e.provider)))
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"exec", pod.Name, "--", "/test", "-d", "/tmp"},
			{"attach", pod.Name},
			{"port-forward", "pod/" + pod.Name, "--address", "127.0.0.1", ":8080"},
			{"cp", pod.Name + ":/tmp/copied.bin", filepath.Join(t.TempDir(), "stolen.bin")},
			{"debug", pod.Name, "--image=" + localcluster.ProbeImage, "--container=intruder", "--", "/probe", "api"},
			{"get", "--raw", "/api/v1/nodes/" + vnode.Name + "/proxy/pods"},
		} {
			o, err := as(args...)
			if err == nil || !strings.Contains(strings.ToLower(err.Error()+o), "forbidden") {
				t.Errorf("the viewer's kubectl %s: %v\n%s; want Forbidden", strings.Join(args, " "), err, o)
			}
		}
	})
}

// viewerKubeconfig writes a kubeconfig for a ServiceAccount of ns that
// may get, list and watch pods and read their logs there, and nothing
// else.
func (e *realEnv) viewerKubeconfig(ns string) string {
	t := e.t
	t.Helper()
	ctx := t.Context()
	cc := ctrlClient(t, e.consumer)
	const name = "pod-viewer"
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods", "pods/log"}, Verbs: []string{"get", "list", "watch"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}},
	} {
		if err := cc.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	tr, err := clientset(t, e.consumer).CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["consumer"] = &clientcmdapi.Cluster{Server: e.consumer.RESTConfig.Host, CertificateAuthorityData: e.consumer.RESTConfig.CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "consumer", AuthInfo: name, Namespace: ns}
	cfg.CurrentContext = name
	path := filepath.Join(t.TempDir(), "viewer.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
