// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	brokerv1alpha1 "github.com/liqo-go/liqo/api/broker/v1alpha1"
	brokerapi "github.com/liqo-go/liqo/internal/broker"
	"github.com/liqo-go/liqo/internal/ctl/printer"
)

// checkOutput checks an -o value: json, yaml, wide (when the table has a
// wide form), or empty.
func checkOutput(output string, wide bool) error {
	switch output {
	case "", "json", "yaml":
		return nil
	case "wide":
		if wide {
			return nil
		}
	}
	if wide {
		return fmt.Errorf("--output %q: want json, yaml or wide", output)
	}
	return fmt.Errorf("--output %q: want json or yaml", output)
}

// printObject prints v as json or yaml.
func printObject(out io.Writer, output string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if output == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
	} else {
		b = append(b, '\n')
	}
	_, err = out.Write(b)
	return err
}

func (o *Options) clustersCommand(ctx context.Context) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "clusters",
		Short: "List the broker's providers with what it measures of them: reachability, latency, uptime, free resources, price",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.Clusters(ctx, output, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: wide, json or yaml (default: a table)")
	return cmd
}

// Clusters prints the providers the broker offers this consumer.
func (o *Options) Clusters(ctx context.Context, output string, out io.Writer) error {
	if err := checkOutput(output, true); err != nil {
		return err
	}
	if err := o.validate(true); err != nil {
		return err
	}
	token, err := o.Login(ctx)
	if err != nil {
		return err
	}
	var list brokerapi.ClusterList
	if err := o.ask(ctx, token, http.MethodGet, "/api/v1/clusters", &list); err != nil {
		return err
	}
	if output == "json" || output == "yaml" {
		return printObject(out, output, list)
	}
	return printClusters(out, list.Items, output == "wide")
}

func printClusters(out io.Writer, cs []brokerapi.Cluster, wide bool) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	head := "PROVIDER\tNAME\tREACHABLE\tLATENCY\tUPTIME(24h)\tFREE CPU\tFREE MEMORY\tPRICE"
	if wide {
		head += "\tTUNNEL\tUPTIME(1h)\tUPTIME(7d)\tPODS(run/pend/fail)\tSTART\tZONE\tMEASURED"
	}
	fmt.Fprintln(w, head)
	for _, c := range cs {
		if !c.Provider {
			continue
		}
		k := c.KPIs
		if k == nil {
			k = &brokerapi.KPIs{}
		}
		reachable := "-"
		switch {
		case k.Measured == nil:
		case k.Reachable:
			reachable = "yes"
		case k.UnreachableSince != nil:
			reachable = "no, for " + time.Since(k.UnreachableSince.Time).Round(time.Second).String()
		default:
			reachable = "no"
		}
		free := func(name corev1.ResourceName) string {
			if q, ok := c.Free[name]; ok {
				return q.String()
			}
			return "-"
		}
		row := []string{c.ClusterID, c.ClusterName, reachable, millis(k.LatencyMillis), uptime(k.Uptime, brokerv1alpha1.Window24h),
			free(corev1.ResourceCPU), free(corev1.ResourceMemory), price(c.Offer)}
		if wide {
			start, zone, measured := "-", "-", "-"
			if k.Pods.StartMillis != nil {
				start = (time.Duration(*k.Pods.StartMillis) * time.Millisecond).Round(10 * time.Millisecond).String()
			}
			if c.Offer != nil && c.Offer.Labels[corev1.LabelTopologyZone] != "" {
				zone = c.Offer.Labels[corev1.LabelTopologyZone]
			}
			if k.AgeSeconds != nil {
				measured = time.Duration(*k.AgeSeconds*float64(time.Second)).Round(time.Second).String() + " ago"
			}
			row = append(row, millis(k.TunnelLatencyMillis), uptime(k.Uptime, brokerv1alpha1.Window1h), uptime(k.Uptime, brokerv1alpha1.Window7d),
				fmt.Sprintf("%d/%d/%d", k.Pods.Running, k.Pods.Pending, k.Pods.Failed), start, zone, measured)
		}
		printer.Row(w, row...)
	}
	return w.Flush()
}

func millis(ms *float64) string {
	if ms == nil {
		return "-"
	}
	return fmt.Sprintf("%.1fms", *ms)
}

func uptime(u map[brokerv1alpha1.UptimeWindow]float64, w brokerv1alpha1.UptimeWindow) string {
	v, ok := u[w]
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", v*100)
}

// price shows an offer's prices: "cpu 0.03, memory 0.004 EUR/Hour".
func price(o *brokerapi.Offer) string {
	if o == nil || len(o.Prices) == 0 {
		return "-"
	}
	var parts []string
	for name, q := range o.Prices {
		parts = append(parts, fmt.Sprintf("%s %v", name, q.AsApproximateFloat64()))
	}
	slices.Sort(parts)
	return fmt.Sprintf("%s %s/%s", strings.Join(parts, ", "), o.Currency, o.Period)
}

func (o *Options) explainCommand(ctx context.Context) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Explain the broker's last choice of providers under this cluster's policy: per provider, the criterion that ruled it out or each term of its score",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.Explain(ctx, output, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json or yaml (default: a table)")
	return cmd
}

// Explain prints the selection's decision.
func (o *Options) Explain(ctx context.Context, output string, out io.Writer) error {
	if err := checkOutput(output, false); err != nil {
		return err
	}
	v, err := o.call(ctx, http.MethodGet, "/api/v1/selection")
	if err != nil {
		return err
	}
	d := v.Status.Decision
	if v.Policy == nil {
		return fmt.Errorf("consumer %s has no policy: its providers are those it enabled by hand (%s); set one with liqoctl broker policy set",
			v.Consumer, strings.Join(v.Providers, ", "))
	}
	if d == nil {
		return fmt.Errorf("the broker has not decided under %s's policy yet", v.Consumer)
	}
	if output != "" {
		return printObject(out, output, d)
	}
	return printDecision(out, d)
}

func printDecision(out io.Writer, d *brokerv1alpha1.Decision) error {
	fmt.Fprintf(out, "Decided %s: %s\n", d.Time.UTC().Format(time.RFC3339), printer.Safe(d.Message))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PROVIDER\tVERDICT\tSCORE\tPRICE\tLATENCY\tUPTIME\tFREE\tSPREAD\tWHY")
	for _, p := range d.Providers {
		terms := map[string]string{}
		for _, t := range p.Terms {
			terms[t.Name] = fmt.Sprintf("%d×%d (%s)", t.Score, t.Weight, t.Measured)
		}
		cell := func(name string) string {
			if v, ok := terms[name]; ok {
				return v
			}
			return "-"
		}
		score := "-"
		if len(p.Terms) > 0 {
			score = fmt.Sprint(p.Score)
		}
		printer.Row(w, p.ClusterID, string(p.Verdict), score, cell("price"), cell("latency"), cell("uptime"), cell("free"), cell("spread"), p.Message)
	}
	return w.Flush()
}

func (o *Options) policyCommand(ctx context.Context) *cobra.Command {
	var output, file string
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Show this cluster's policy in the broker (how it chooses its providers)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.ShowPolicy(ctx, output, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "Output format: json or yaml")
	set := &cobra.Command{
		Use:   "set -f FILE",
		Short: "Have the broker choose this cluster's providers under the policy in FILE (YAML or JSON; - for stdin; docs/broker.md)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.SetPolicy(ctx, file, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	set.Flags().StringVarP(&file, "filename", "f", "", "The policy (required)")
	clear := &cobra.Command{
		Use:   "clear",
		Short: "Drop the policy: the providers are again those enabled by hand",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.ClearPolicy(ctx, cmd.OutOrStdout())
		},
	}
	cmd.AddCommand(set, clear)
	return cmd
}

// ShowPolicy prints the policy.
func (o *Options) ShowPolicy(ctx context.Context, output string, out io.Writer) error {
	if output == "" {
		output = "yaml"
	}
	if err := checkOutput(output, false); err != nil {
		return err
	}
	v, err := o.call(ctx, http.MethodGet, "/api/v1/selection")
	if err != nil {
		return err
	}
	if v.Policy == nil {
		_, err := fmt.Fprintf(out, "No policy: the providers are those enabled by hand (%s)\n", strings.Join(v.Providers, ", "))
		return err
	}
	return printObject(out, output, v.Policy)
}

// SetPolicy sends the policy in file (stdin for -) to the broker.
func (o *Options) SetPolicy(ctx context.Context, file string, stdin io.Reader, out io.Writer) error {
	var raw []byte
	var err error
	switch file {
	case "":
		return fmt.Errorf("--filename: the policy's file (or - for stdin) is required")
	case "-":
		raw, err = io.ReadAll(io.LimitReader(stdin, brokerapi.MaxBodyBytes+1))
	default:
		raw, err = os.ReadFile(file) //nolint:gosec // the user's own policy file, named on the command line
	}
	if err != nil {
		return fmt.Errorf("--filename %s: %w", file, err)
	}
	body, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return fmt.Errorf("--filename %s: not a policy in YAML or JSON: %w", file, err)
	}
	if err := o.validate(true); err != nil {
		return err
	}
	token, err := o.Login(ctx)
	if err != nil {
		return err
	}
	var v brokerapi.SelectionView
	if err := o.askWith(ctx, token, http.MethodPut, "/api/v1/selection/policy", body, &v); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "Policy set for %s: the broker chooses its providers (liqoctl broker explain says which and why)\n", v.Consumer)
	return err
}

// ClearPolicy drops the policy.
func (o *Options) ClearPolicy(ctx context.Context, out io.Writer) error {
	v, err := o.call(ctx, http.MethodDelete, "/api/v1/selection/policy")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "Policy dropped for %s: its providers are those enabled by hand (%s)\n", v.Consumer, strings.Join(v.Providers, ", "))
	return err
}
