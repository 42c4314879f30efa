// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package add implements `liqoctl add`: it records a remote cluster by hand
// (a ForeignCluster of discovery type Manual, with its peering token in a
// Secret) and asks to join it.
package add

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/auth"
	"github.com/liqo-go/liqo/internal/ctl/kubeclient"
	"github.com/liqo-go/liqo/internal/foreigncluster"
	"github.com/liqo-go/liqo/internal/install"
)

// TokenSecretName is the Secret, in the Liqo namespace, holding the peering
// token of a remote cluster.
func TokenSecretName(clusterID string) string { return auth.RemoteTokenSecretName(clusterID) }

// Options are the command's settings.
type Options struct {
	// Kubeconfig is this cluster's kubeconfig; empty means the usual rules.
	Kubeconfig string
	// Namespace is the Liqo namespace.
	Namespace string
	// AuthURL, ClusterID and Token come from the remote cluster's
	// `liqoctl generate-add-command`.
	AuthURL, ClusterID, Token string
	// Timeout bounds the check of the remote auth service.
	Timeout time.Duration
	// Wait is how long to wait for the peering to be authenticated and
	// requested, so that a wrong token is reported here; 0 does not wait.
	Wait time.Duration
}

// NewCommand returns `liqoctl add`.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &Options{Namespace: install.DefaultNamespace, Timeout: 10 * time.Second, Wait: time.Minute}
	cmd := &cobra.Command{
		Use:   "add --auth-url URL --id ID --token TOKEN",
		Short: "Add a remote cluster by hand and ask to peer with it",
		Long: `Add a remote cluster by hand, with the line its 'liqoctl generate-add-command'
printed. The remote auth service is asked first, so that a wrong URL or ID is
reported here rather than later.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(ctx, cmd.OutOrStdout()) },
	}
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of this cluster")
	cmd.Flags().StringVarP(&o.Namespace, "namespace", "n", o.Namespace, "The Liqo namespace")
	cmd.Flags().StringVar(&o.AuthURL, "auth-url", "", "The remote cluster's auth service URL")
	cmd.Flags().StringVar(&o.ClusterID, "id", "", "The remote cluster's ClusterID")
	cmd.Flags().StringVar(&o.Token, "token", "", "The remote cluster's peering token")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "How long to wait for the remote auth service")
	cmd.Flags().DurationVar(&o.Wait, "wait", o.Wait, "How long to wait for the peering to be requested (0: do not wait)")
	return cmd
}

// Run adds the cluster.
func (o *Options) Run(ctx context.Context, out io.Writer) error {
	if o.AuthURL == "" || o.ClusterID == "" || o.Token == "" {
		return errors.New("--auth-url, --id and --token are all required: copy them from the remote cluster's `liqoctl generate-add-command`")
	}
	// A service just exposed may refuse for a moment (a node port not
	// programmed yet): ask again until the timeout.
	var resp *auth.Response
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, o.Timeout, true, func(ctx context.Context) (bool, error) {
		resp, last = auth.GetIdentity(ctx, o.AuthURL, auth.ClientOptions{InsecureSkipVerify: true, Timeout: o.Timeout})
		return last == nil, nil
	})
	if err != nil {
		if last == nil {
			last = err
		}
		return fmt.Errorf("the remote cluster cannot be reached: %w", last)
	}
	if resp.Identity.ClusterID != o.ClusterID {
		return fmt.Errorf("the auth service at %s belongs to cluster %s, not %s: check --auth-url and --id", o.AuthURL, resp.Identity.ClusterID, o.ClusterID)
	}

	c, _, err := kubeclient.New(o.Kubeconfig, 30*time.Second)
	if err != nil {
		return err
	}
	if err := checkPinnedCA(ctx, c, o.Namespace, o.ClusterID, []byte(resp.Identity.CACert)); err != nil {
		return err
	}

	// A previous attempt's verdict must not be taken for this one's.
	if err := clearAuthenticated(ctx, c, o.ClusterID); err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: o.Namespace, Name: TokenSecretName(o.ClusterID),
			Labels: map[string]string{discoveryv1alpha1.ClusterIDLabel: o.ClusterID},
		},
		Data: map[string][]byte{auth.TokenKey: []byte(o.Token)},
	}
	if err := c.Create(ctx, secret); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("storing the peering token: %w", err)
		}
		if err := c.Update(ctx, secret); err != nil {
			return fmt.Errorf("updating the peering token: %w", err)
		}
	}

	fc, err := foreigncluster.Find(ctx, c, o.ClusterID)
	if err != nil {
		return err
	}
	if fc == nil {
		fc = &discoveryv1alpha1.ForeignCluster{
			ObjectMeta: metav1.ObjectMeta{Name: o.ClusterID, Labels: map[string]string{
				discoveryv1alpha1.ClusterIDLabel:     o.ClusterID,
				discoveryv1alpha1.DiscoveryTypeLabel: string(discoveryv1alpha1.ManualDiscovery),
			}},
			Spec: discoveryv1alpha1.ForeignClusterSpec{
				ClusterIdentity:       discoveryv1alpha1.ClusterIdentity{ClusterID: o.ClusterID, ClusterName: resp.Identity.ClusterName},
				ForeignAuthURL:        o.AuthURL,
				InsecureSkipTLSVerify: ptr.To(true),
				Join:                  true,
			},
		}
		if err := c.Create(ctx, fc); err != nil {
			return fmt.Errorf("creating the ForeignCluster: %w", err)
		}
	} else {
		// Known already (discovered): the operator's word makes it manual.
		patch := client.MergeFrom(fc.DeepCopy())
		fc.Labels[discoveryv1alpha1.DiscoveryTypeLabel] = string(discoveryv1alpha1.ManualDiscovery)
		fc.Spec.ForeignAuthURL = o.AuthURL
		fc.Spec.Join = true
		if err := c.Patch(ctx, fc, patch); err != nil {
			return fmt.Errorf("updating ForeignCluster %s: %w", fc.Name, err)
		}
	}
	if _, err := fmt.Fprintf(out, "Added cluster %s (%s) and asked to join it\n", resp.Identity.ClusterName, o.ClusterID); err != nil {
		return err
	}
	if o.Wait == 0 {
		_, err = fmt.Fprintf(out, "Follow the peering with: liqoctl status\n")
		return err
	}
	return waitPeered(ctx, c, fc.Name, o.Wait, out)
}

// clearAuthenticated removes the ForeignCluster's Authenticated condition.
// The patch replaces the whole condition list, so it holds the optimistic
// lock, and a controller writing the status meanwhile makes it read again
// rather than fail.
func clearAuthenticated(ctx context.Context, c client.Client, clusterID string) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		fc, err := foreigncluster.Find(ctx, c, clusterID)
		if err != nil || fc == nil {
			return err
		}
		if meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionAuthenticated) == nil {
			return nil
		}
		patch := client.MergeFromWithOptions(fc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		meta.RemoveStatusCondition(&fc.Status.Conditions, discoveryv1alpha1.ConditionAuthenticated)
		if err := c.Status().Patch(ctx, fc, patch); err != nil {
			return fmt.Errorf("resetting the Authenticated condition of %s: %w", fc.Name, err)
		}
		return nil
	})
}

// checkPinnedCA refuses to go on when the cluster is known with another CA.
func checkPinnedCA(ctx context.Context, c client.Client, namespace, clusterID string, served []byte) error {
	var secret corev1.Secret
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: foreigncluster.CASecretName(clusterID)}, &secret)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	trusted, _ := auth.Fingerprint(secret.Data[foreigncluster.CASecretKey])
	fp, err := auth.Fingerprint(served)
	if err != nil {
		return fmt.Errorf("the remote cluster serves an invalid CA: %w", err)
	}
	if trusted != fp {
		return fmt.Errorf("CA mismatch: cluster %s is trusted with CA %s but now presents %s; if that is expected, check the new one out of band and trust it with: liqoctl trust %s --ca %s",
			clusterID, trusted, fp, clusterID, fp)
	}
	return nil
}

// definitive are the Authenticated reasons that retrying will not fix.
var definitive = map[string]bool{
	auth.ReasonWrongToken: true, auth.ReasonTokenRequired: true, auth.ReasonPolicy: true,
	discoveryv1alpha1.ReasonRefusedByProvider: true, discoveryv1alpha1.ReasonCAMismatch: true, discoveryv1alpha1.ReasonCANotTrusted: true, auth.ReasonExpired: true,
}

// waitPeered waits until the ForeignCluster shows the PeeringRequest
// admitted, or an authentication failure that retrying will not fix.
func waitPeered(ctx context.Context, c client.Client, name string, timeout time.Duration, out io.Writer) error {
	var fc discoveryv1alpha1.ForeignCluster
	var failure error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &fc); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		authn := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionAuthenticated)
		if authn != nil && authn.Status == metav1.ConditionFalse && definitive[authn.Reason] {
			failure = fmt.Errorf("the peering with %s failed: %s", name, authn.Message)
			return true, nil
		}
		return meta.IsStatusConditionTrue(fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested), nil
	})
	if failure != nil {
		return failure
	}
	if err != nil {
		msg := ""
		for _, t := range []string{discoveryv1alpha1.ConditionReachable, discoveryv1alpha1.ConditionCATrusted, discoveryv1alpha1.ConditionAuthenticated, discoveryv1alpha1.ConditionPeeringRequested} {
			if cond := meta.FindStatusCondition(fc.Status.Conditions, t); cond != nil && cond.Status != metav1.ConditionTrue {
				msg += fmt.Sprintf("\n  %s: %s", t, cond.Message)
			}
		}
		return fmt.Errorf("the peering with %s was not requested within %s; the controller manager keeps trying%s", name, timeout, msg)
	}
	cond := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionPeeringRequested)
	_, err = fmt.Fprintf(out, "Peering requested: %s\n", cond.Message)
	return err
}
