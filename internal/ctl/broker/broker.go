// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

// Package broker implements `liqoctl broker`: a consumer's user logs in to
// a broker its cluster peers with, and reads and changes the providers the
// broker orchestrates its pods to. Everything is done from the consumer's
// own kubeconfig: the token comes from the consumer cluster's identity in
// the broker, which only that cluster holds.
package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	configv1alpha1 "github.com/liqo-go/liqo/api/config/v1alpha1"
	discoveryv1alpha1 "github.com/liqo-go/liqo/api/discovery/v1alpha1"
	brokerapi "github.com/liqo-go/liqo/internal/broker"
	"github.com/liqo-go/liqo/internal/ctl/add"
	"github.com/liqo-go/liqo/internal/ctl/kubeclient"
	"github.com/liqo-go/liqo/internal/ctl/printer"
	"github.com/liqo-go/liqo/internal/identity"
	"github.com/liqo-go/liqo/internal/install"
)

// Options are the flags every broker verb shares.
type Options struct {
	// Kubeconfig is the consumer cluster's.
	Kubeconfig string
	// Namespace is the consumer's Liqo namespace.
	Namespace string
	// Broker is the broker's ClusterID.
	Broker string
	// URL is the broker's API.
	URL string
	// TTL is how long a login's token lasts.
	TTL time.Duration
	// Timeout bounds the command.
	Timeout time.Duration
}

// NewCommand returns `liqoctl broker`.
func NewCommand(ctx context.Context) *cobra.Command {
	o := &Options{Namespace: install.DefaultNamespace, TTL: 24 * time.Hour, Timeout: 30 * time.Second}
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Use a broker this cluster peers with: log in, choose the providers it orchestrates this cluster's pods to",
	}
	f := cmd.PersistentFlags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of the consumer cluster")
	f.StringVarP(&o.Namespace, "namespace", "n", o.Namespace, "The consumer's Liqo namespace")
	f.StringVar(&o.Broker, "broker", o.Broker, "ClusterID of the broker (required)")
	f.StringVar(&o.URL, "url", o.URL, "URL of the broker's API (its liqo-broker Service; the playground's is in broker.url); required but by login")
	f.DurationVar(&o.Timeout, "timeout", o.Timeout, "Give up after this long")
	login := &cobra.Command{
		Use:   "login",
		Short: "Print a token of this cluster's user in the broker, for the broker's API (a dashboard, curl)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token, err := o.Login(ctx)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), token)
			return err
		},
	}
	login.Flags().DurationVar(&o.TTL, "ttl", o.TTL, "How long the token lasts")
	toggle := func(enable bool) *cobra.Command {
		verb := map[bool]string{true: "enable", false: "disable"}[enable]
		return &cobra.Command{
			Use:   verb + " PROVIDER-ID",
			Short: map[bool]string{true: "Let the broker offload this cluster's pods to a provider", false: "Move this cluster's pods off a provider and offload none there"}[enable],
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return o.Toggle(ctx, args[0], enable, cmd.OutOrStdout())
			},
		}
	}
	var output string
	selection := &cobra.Command{
		Use:   "selection",
		Short: "Show the providers the broker orchestrates this cluster's pods to, and how each serves",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.Show(ctx, output, cmd.OutOrStdout())
		},
	}
	selection.Flags().StringVarP(&output, "output", "o", "", "Output format: json or yaml (default: a table)")
	wait := time.Minute
	peer := &cobra.Command{
		Use:   "peer PROVIDER-ID",
		Short: "Peer with a provider of the broker's catalog: the broker introduces this cluster, the provider's own policy answers",
		Long: `Ask the broker to introduce this cluster to a provider of its catalog, wait for
the provider's answer (its ClusterConfig lists the brokers whose introductions
it accepts), and peer with it as 'liqoctl add' does, with a token that works
for this cluster alone. No token is copied by hand.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.Peer(ctx, args[0], wait, cmd.OutOrStdout())
		},
	}
	peer.Flags().DurationVar(&wait, "wait", wait, "How long to wait for the peering to be requested (0: do not wait)")
	cmd.AddCommand(login, toggle(true), toggle(false), selection, peer, o.clustersCommand(ctx), o.explainCommand(ctx), o.policyCommand(ctx))
	return cmd
}

func (o *Options) validate(needURL bool) error {
	if errs := validation.IsDNS1123Label(o.Broker); len(errs) > 0 {
		return fmt.Errorf("--broker %q: want the broker's ClusterID (liqoctl status lists the peers)", o.Broker)
	}
	if needURL {
		u, err := url.Parse(o.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--url %q: want the broker API's http(s) URL", o.URL)
		}
	}
	return nil
}

// Login returns a token of the consumer's service account in the broker,
// requested with the consumer cluster's own identity there.
func (o *Options) Login(ctx context.Context) (string, error) {
	if err := o.validate(false); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	c, _, err := kubeclient.New(o.Kubeconfig, o.Timeout)
	if err != nil {
		return "", err
	}
	var cfg configv1alpha1.ClusterConfig
	if err := c.Get(ctx, client.ObjectKey{Name: configv1alpha1.ClusterConfigName}, &cfg); err != nil || cfg.Status.ClusterID == "" {
		return "", fmt.Errorf("reading this cluster's ClusterID (is Liqo installed?): %w", err)
	}
	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.RemoteSecretName(o.Broker)}, &secret); err != nil {
		return "", fmt.Errorf("this cluster has no identity in broker %s (does it peer with it? liqoctl status): %w", o.Broker, err)
	}
	creds, err := identity.ConsumerCredentials(&secret)
	if err != nil {
		return "", fmt.Errorf("this cluster's identity in broker %s is not complete yet (%w): wait until the peering is established", o.Broker, err)
	}
	rc := creds.RESTConfig()
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return "", err
	}
	seconds := int64(o.TTL.Seconds())
	tr, err := cs.CoreV1().ServiceAccounts(discoveryv1alpha1.TenantNamespace(cfg.Status.ClusterID)).CreateToken(ctx, brokerv1alpha1.ConsumerServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token in broker %s (is it a broker, with the orchestrator?): %w", o.Broker, err)
	}
	return tr.Status.Token, nil
}

// Toggle enables or disables provider, and prints the providers enabled.
func (o *Options) Toggle(ctx context.Context, provider string, enable bool, out io.Writer) error {
	if errs := validation.IsDNS1123Label(provider); len(errs) > 0 {
		return fmt.Errorf("%q is not a provider's ClusterID", provider)
	}
	v, err := o.call(ctx, http.MethodPost, fmt.Sprintf("/api/toggle?id=%s&enable=%v", url.QueryEscape(provider), enable))
	if err != nil {
		return err
	}
	// The status the answer carries is from before the change: the
	// broker reports on it a moment later (liqoctl broker selection).
	enabled := "none"
	if len(v.Providers) > 0 {
		enabled = strings.Join(v.Providers, ", ")
	}
	_, err = fmt.Fprintf(out, "Providers enabled for %s: %s\n", v.Consumer, enabled)
	return err
}

// Show prints the selection: a table, or the whole as json or yaml.
func (o *Options) Show(ctx context.Context, output string, out io.Writer) error {
	if err := checkOutput(output, false); err != nil {
		return err
	}
	v, err := o.call(ctx, http.MethodGet, "/api/v1/selection")
	if err != nil {
		return err
	}
	if output != "" {
		return printObject(out, output, v)
	}
	return printSelection(out, v)
}

// call logs in and asks the broker's API for its selection.
func (o *Options) call(ctx context.Context, method, path string) (*brokerapi.SelectionView, error) {
	if err := o.validate(true); err != nil {
		return nil, err
	}
	token, err := o.Login(ctx)
	if err != nil {
		return nil, err
	}
	var v brokerapi.SelectionView
	if err := o.ask(ctx, token, method, path, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// ask calls the broker's API with token and decodes a 200 or 202 answer
// into out.
func (o *Options) ask(ctx context.Context, token, method, path string, out any) error {
	return o.askWith(ctx, token, method, path, nil, out)
}

// askWith is ask with a JSON body.
func (o *Options) askWith(ctx context.Context, token, method, path string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(o.URL, "/")+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("asking the broker at %s: %w", o.URL, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		var st metav1.Status
		if json.Unmarshal(answer, &st) == nil && st.Message != "" {
			return fmt.Errorf("the broker answered %d: %s", resp.StatusCode, st.Message)
		}
		return fmt.Errorf("the broker answered %d", resp.StatusCode)
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return fmt.Errorf("the broker's answer: %w", err)
	}
	return nil
}

// Introduction asks the broker to introduce this cluster to provider and
// waits, within the timeout, for the provider's answer: the introduction
// when accepted, an error with the provider's reason when refused.
func (o *Options) Introduction(ctx context.Context, provider string, progress io.Writer) (*brokerapi.IntroductionView, error) {
	if errs := validation.IsDNS1123Label(provider); len(errs) > 0 {
		return nil, fmt.Errorf("%q is not a provider's ClusterID", provider)
	}
	if err := o.validate(true); err != nil {
		return nil, err
	}
	token, err := o.Login(ctx)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(o.Timeout)
	said := false
	for {
		var v brokerapi.IntroductionView
		if err := o.ask(ctx, token, http.MethodPost, "/api/v1/clusters/"+provider+"/introduction", &v); err != nil {
			return nil, err
		}
		switch v.State {
		case brokerv1alpha1.IntroductionAccepted:
			if v.Token == "" || v.AuthURL == "" {
				return nil, fmt.Errorf("the broker's introduction to %s has no token or auth URL", provider)
			}
			return &v, nil
		case brokerv1alpha1.IntroductionRefused:
			return nil, fmt.Errorf("provider %s refused the introduction: %s", provider, v.Message)
		}
		if !said {
			fmt.Fprintf(progress, "Waiting for %s to answer the broker's introduction...\n", provider)
			said = true
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("provider %s did not answer the introduction within %s: %s", provider, o.Timeout, v.Message)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Peer has the broker introduce this cluster to provider, then peers with
// it as liqoctl add does, with the introduction's token: no token is
// copied by hand.
func (o *Options) Peer(ctx context.Context, provider string, wait time.Duration, out io.Writer) error {
	v, err := o.Introduction(ctx, provider, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "The broker introduced this cluster to %s (%s)\n", v.ClusterID, v.AuthURL)
	return (&add.Options{Kubeconfig: o.Kubeconfig, Namespace: o.Namespace, AuthURL: v.AuthURL, ClusterID: v.ClusterID, Token: v.Token,
		Timeout: o.Timeout, Wait: wait}).Run(ctx, out)
}

func printSelection(out io.Writer, v *brokerapi.SelectionView) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PROVIDER\tSTATE\tPODS\tHELD")
	seen := map[string]bool{}
	for _, p := range v.Status.Providers {
		seen[p.ClusterID] = true
		printer.Row(w, p.ClusterID, string(p.State), fmt.Sprint(p.Pods), fmt.Sprint(p.Held))
	}
	for _, p := range v.Providers {
		if !seen[p] {
			printer.Row(w, p, "(not reported yet)", "-", "-")
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, c := range v.Status.Conditions {
		if c.Type == brokerapi.ConditionReady {
			_, err := fmt.Fprintf(out, "Ready=%s (%s): %s\n", c.Status, printer.Safe(c.Reason), printer.Safe(c.Message))
			return err
		}
	}
	return nil
}
