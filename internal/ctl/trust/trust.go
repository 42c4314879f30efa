// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package trust implements `liqoctl trust` and `liqoctl untrust`: an
// operator trusts the CA or auth service key a remote cluster now presents,
// or withdraws trust in its CA, after seeing the fingerprints and what
// changes. They write the ForeignCluster's trust annotations, which the
// controller manager acts on, and wait until it has.
package trust

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	"github.com/liqo-go/liqo/internal/ctl/kubeclient"
	"github.com/liqo-go/liqo/internal/foreigncluster"
)

// Options of `liqoctl trust` and `liqoctl untrust`.
type Options struct {
	// Kubeconfig is this cluster's kubeconfig; empty means the usual rules.
	Kubeconfig string
	// Cluster is the remote cluster's ID or ForeignCluster name.
	Cluster string
	// Yes skips the confirmation.
	Yes bool
	// CA, when set, is the fingerprint the operator expects of the CA to
	// trust (checked out of band): anything else is refused.
	CA string
	// AuthKey, when set, is the fingerprint the operator expects of the
	// auth service key to trust.
	AuthKey string
	// Timeout bounds the wait for the controller manager; 0 does not wait.
	Timeout time.Duration
	// In is where the confirmation is read from (standard input).
	In io.Reader
}

// NewCommands returns `liqoctl trust` and `liqoctl untrust`.
func NewCommands(ctx context.Context) []*cobra.Command {
	return []*cobra.Command{newTrust(ctx), newUntrust(ctx)}
}

func newTrust(ctx context.Context) *cobra.Command {
	o := &Options{Timeout: 30 * time.Second}
	cmd := &cobra.Command{
		Use:   "trust CLUSTER",
		Short: "Trust the CA or auth service key a cluster now presents (its ClusterID or ForeignCluster name)",
		Long: `Trust what a remote cluster now presents in place of what was pinned: a CA
that changed (condition CATrusted=False, reason CAChanged), an auth service
key that changed (Reachable=False, reason AuthServiceKeyChanged), or a CA an
operator marked untrusted with liqoctl untrust.

The command shows the fingerprints, old and new, and asks for confirmation
unless --yes is given. Check the new fingerprints with the remote cluster's
operator first: a changed key or CA is what an impostor presents too.
--ca and --auth-key name the fingerprints you checked: the command refuses
any other, and refuses to trust along with them anything they do not name.`,
		Example: `  liqoctl trust provider-1
  liqoctl trust provider-1 --ca 3f1c...e09a --yes`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Cluster, o.In = args[0], cmd.InOrStdin()
			return o.Trust(ctx, cmd.OutOrStdout())
		},
	}
	o.flags(cmd)
	cmd.Flags().StringVar(&o.CA, "ca", "", "Fingerprint of the CA to trust, as checked out of band (refuse any other)")
	cmd.Flags().StringVar(&o.AuthKey, "auth-key", "", "Fingerprint of the auth service key to trust, as checked out of band (refuse any other)")
	return cmd
}

func newUntrust(ctx context.Context) *cobra.Command {
	o := &Options{Timeout: 30 * time.Second}
	cmd := &cobra.Command{
		Use:   "untrust CLUSTER",
		Short: "Withdraw trust in a cluster's CA (its ClusterID or ForeignCluster name)",
		Long: `Withdraw trust in a remote cluster's CA: CATrusted turns False, no new
credentials are asked of the cluster and nothing is sent to it, until
liqoctl trust. The command shows the fingerprint and asks for confirmation
unless --yes is given.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Cluster, o.In = args[0], cmd.InOrStdin()
			return o.Untrust(ctx, cmd.OutOrStdout())
		},
	}
	o.flags(cmd)
	return cmd
}

func (o *Options) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of this cluster")
	cmd.Flags().BoolVarP(&o.Yes, "yes", "y", false, "Do not ask for confirmation")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "How long to wait for the controller manager to act (0: do not wait)")
}

// Change is one thing trust or untrust changes.
type Change struct {
	// What is changed: "CA" or "auth service key".
	What string
	// From and To describe the state before and after.
	From, To string
	// Annotation is set to Value, or removed when Value is empty.
	Annotation, Value string
}

// Plan returns what trusting fc changes. caWant and keyWant, when
// not empty, are the fingerprints the operator checked: a pending one that
// differs is an error, and so is one that fc neither presents nor trusts.
func Plan(fc *discoveryv1alpha1.ForeignCluster, caWant, keyWant string) ([]Change, error) {
	var plan []Change
	st := fc.Status
	if fc.Annotations[discoveryv1alpha1.UntrustedCAAnnotation] == "true" {
		if caWant != "" && st.PendingCAFingerprint == "" && caWant != st.TrustedCAFingerprint {
			return nil, fmt.Errorf("the CA of %s is %s, not %s: not trusted", fc.Name, orNone(st.TrustedCAFingerprint), caWant)
		}
		plan = append(plan, Change{What: "CA", From: "untrusted by an operator (trusted before: " + orNone(st.TrustedCAFingerprint) + ")", To: "trusted again",
			Annotation: discoveryv1alpha1.UntrustedCAAnnotation})
	}
	for _, f := range []struct{ what, heldAs, held, pending, want, annotation string }{
		{"CA", "trusted", st.TrustedCAFingerprint, st.PendingCAFingerprint, caWant, discoveryv1alpha1.TrustCAAnnotation},
		{"auth service key", "pinned", st.AuthServiceKeyFingerprint, st.PendingAuthKeyFingerprint, keyWant, discoveryv1alpha1.TrustAuthKeyAnnotation},
	} {
		ch, err := presented(fc.Name, f.what, f.heldAs, f.held, f.pending, f.want, f.annotation)
		if err != nil {
			return nil, err
		}
		if ch != nil {
			plan = append(plan, *ch)
		}
	}
	// A fingerprint named on the command line says what was checked:
	// nothing else is trusted along with it.
	if caWant != "" || keyWant != "" {
		for _, ch := range plan {
			switch {
			case ch.Annotation == discoveryv1alpha1.TrustAuthKeyAnnotation && keyWant == "":
				return nil, fmt.Errorf("%s also presents a new auth service key, %s, which --auth-key does not name: nothing trusted", fc.Name, ch.Value)
			case ch.Annotation != discoveryv1alpha1.TrustAuthKeyAnnotation && caWant == "":
				return nil, fmt.Errorf("trusting %s also changes its CA (%s -> %s), which --ca does not name: nothing trusted", fc.Name, ch.From, ch.To)
			}
		}
	}
	return plan, nil
}

// presented is the change from the fingerprint held (trusted or pinned)
// to the one presented, nil when none is pending; want, when set, is the
// fingerprint the operator checked, and anything else is an error.
func presented(name, what, heldAs, held, pending, want, annotation string) (*Change, error) {
	switch {
	case pending != "":
		if want != "" && want != pending {
			return nil, fmt.Errorf("%s presents the %s %s, not %s: not trusted", name, what, pending, want)
		}
		return &Change{What: what, From: orNone(held) + " (" + heldAs + ")", To: pending + " (presented now)", Annotation: annotation, Value: pending}, nil
	case want != "" && want != held:
		return nil, fmt.Errorf("%s presents no %s %s (%s: %s)", name, what, want, heldAs, orNone(held))
	}
	return nil, nil
}

// UntrustPlan returns what untrusting fc changes: nothing when an operator
// already did.
func UntrustPlan(fc *discoveryv1alpha1.ForeignCluster) []Change {
	if fc.Annotations[discoveryv1alpha1.UntrustedCAAnnotation] == "true" {
		return nil
	}
	return []Change{{What: "CA", From: orNone(fc.Status.TrustedCAFingerprint) + " (trusted)", To: "untrusted: nothing is sent to the cluster until liqoctl trust",
		Annotation: discoveryv1alpha1.UntrustedCAAnnotation, Value: "true"}}
}

func orNone(fp string) string {
	if fp == "" {
		return "none"
	}
	return fp
}

// Trust trusts what the cluster presents now.
func (o *Options) Trust(ctx context.Context, out io.Writer) error {
	return o.run(ctx, out, "Trust", func(fc *discoveryv1alpha1.ForeignCluster) ([]Change, error) {
		return Plan(fc, o.CA, o.AuthKey)
	}, trusted)
}

// Untrust withdraws trust in the cluster's CA.
func (o *Options) Untrust(ctx context.Context, out io.Writer) error {
	return o.run(ctx, out, "Untrust", func(fc *discoveryv1alpha1.ForeignCluster) ([]Change, error) {
		return UntrustPlan(fc), nil
	}, untrusted)
}

// run shows the plan, asks, writes the annotations, and waits for done.
func (o *Options) run(ctx context.Context, out io.Writer, verb string, planOf func(*discoveryv1alpha1.ForeignCluster) ([]Change, error),
	done func(*discoveryv1alpha1.ForeignCluster, []Change) (bool, string)) error {
	c, _, err := kubeclient.New(o.Kubeconfig, 30*time.Second)
	if err != nil {
		return err
	}
	fc, err := foreigncluster.Lookup(ctx, c, o.Cluster)
	if err != nil {
		return err
	}
	plan, err := planOf(fc)
	if err != nil {
		return err
	}
	if len(plan) == 0 {
		_, err := fmt.Fprintf(out, "Nothing to %s for %s: CA %s (%s), auth service key %s.\n", strings.ToLower(verb), fc.Name,
			orNone(fc.Status.TrustedCAFingerprint), caState(fc), orNone(fc.Status.AuthServiceKeyFingerprint))
		return err
	}
	Describe(out, fc, plan)
	if !o.Yes {
		ok, err := confirm(o.In, out, verb+"?")
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("not confirmed: nothing changed")
		}
	}
	if err := o.apply(ctx, c, fc.Name, plan, planOf); err != nil {
		return err
	}
	if o.Timeout == 0 {
		_, err := fmt.Fprintf(out, "Done; follow it with: liqoctl status -v\n")
		return err
	}
	var msg string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, o.Timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(fc), fc); err != nil {
			return false, err
		}
		var ok bool
		ok, msg = done(fc, plan)
		return ok, nil
	})
	if err != nil {
		return errors.Join(fmt.Errorf("the controller manager did not act within %s: %s", o.Timeout, msg), err)
	}
	_, err = fmt.Fprintln(out, msg)
	return err
}

// apply writes the plan's annotations, only if the plan still holds: a
// fingerprint that changed after the operator saw it is not trusted.
func (o *Options) apply(ctx context.Context, c client.Client, name string, plan []Change, planOf func(*discoveryv1alpha1.ForeignCluster) ([]Change, error)) error {
	for attempt := 0; ; attempt++ {
		var fc discoveryv1alpha1.ForeignCluster
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &fc); err != nil {
			return err
		}
		now, err := planOf(&fc)
		if err != nil {
			return err
		}
		if !same(now, plan) {
			return fmt.Errorf("what %s presents changed while you were deciding: nothing changed, run the command again", name)
		}
		patch := client.MergeFromWithOptions(fc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if fc.Annotations == nil {
			fc.Annotations = map[string]string{}
		}
		for _, ch := range plan {
			if ch.Value == "" {
				delete(fc.Annotations, ch.Annotation)
			} else {
				fc.Annotations[ch.Annotation] = ch.Value
			}
		}
		err = c.Patch(ctx, &fc, patch)
		if apierrors.IsConflict(err) && attempt < 5 {
			continue // the status moved on: check the plan again
		}
		if err != nil {
			return fmt.Errorf("updating ForeignCluster %s: %w", name, err)
		}
		return nil
	}
}

func same(a, b []Change) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Describe writes the cluster and the plan.
func Describe(out io.Writer, fc *discoveryv1alpha1.ForeignCluster, plan []Change) {
	fmt.Fprintf(out, "ForeignCluster %s (cluster ID %s), auth service %s\n", fc.Name, fc.Spec.ClusterIdentity.ClusterID, fc.Spec.ForeignAuthURL)
	width := 0
	for _, ch := range plan {
		width = max(width, len(ch.What))
	}
	for _, ch := range plan {
		fmt.Fprintf(out, "  %-*s  %s\n  %*s  -> %s\n", width, ch.What+":", ch.From, width, "", ch.To)
	}
}

// confirm asks question and reads a yes or no.
func confirm(in io.Reader, out io.Writer, question string) (bool, error) {
	if in == nil {
		return false, errors.New("confirmation needed and no input: pass --yes")
	}
	fmt.Fprintf(out, "%s [y/N]: ", question)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

func caState(fc *discoveryv1alpha1.ForeignCluster) string {
	cond := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionCATrusted)
	if cond == nil {
		return "not checked yet"
	}
	if cond.Status == metav1.ConditionTrue {
		return "trusted, " + cond.Reason
	}
	return "not trusted, " + cond.Reason
}

// trusted is done once every change of plan took effect.
func trusted(fc *discoveryv1alpha1.ForeignCluster, plan []Change) (bool, string) {
	for _, ch := range plan {
		switch ch.Annotation {
		case discoveryv1alpha1.UntrustedCAAnnotation, discoveryv1alpha1.TrustCAAnnotation:
			cond := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionCATrusted)
			if cond == nil || cond.Status != metav1.ConditionTrue || (ch.Value != "" && fc.Status.TrustedCAFingerprint != ch.Value) {
				return false, conditionText(discoveryv1alpha1.ConditionCATrusted, cond)
			}
		case discoveryv1alpha1.TrustAuthKeyAnnotation:
			if fc.Status.AuthServiceKeyFingerprint != ch.Value {
				return false, conditionText(discoveryv1alpha1.ConditionReachable, meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionReachable))
			}
		}
	}
	return true, fmt.Sprintf("Trusted: %s presents CA %s (%s) and auth service key %s.", fc.Name,
		fc.Status.TrustedCAFingerprint, caState(fc), orNone(fc.Status.AuthServiceKeyFingerprint))
}

// untrusted is done once the CA is no longer trusted.
func untrusted(fc *discoveryv1alpha1.ForeignCluster, _ []Change) (bool, string) {
	cond := meta.FindStatusCondition(fc.Status.Conditions, discoveryv1alpha1.ConditionCATrusted)
	if cond == nil || cond.Status == metav1.ConditionTrue {
		return false, conditionText(discoveryv1alpha1.ConditionCATrusted, cond)
	}
	return true, fmt.Sprintf("Untrusted: %s %s=%s (%s).", fc.Name, discoveryv1alpha1.ConditionCATrusted, cond.Status, cond.Reason)
}

func conditionText(t string, cond *metav1.Condition) string {
	if cond == nil {
		return t + " not set yet"
	}
	return fmt.Sprintf("%s=%s (%s): %s", t, cond.Status, cond.Reason, cond.Message)
}
