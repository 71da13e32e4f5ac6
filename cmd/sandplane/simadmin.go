package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/simulator"
)

// simAdmin is a client of a running simulator's admin API (/_sim).
type simAdmin struct {
	url, adminKey, apiKey, org string
	all, json                  bool
}

// bind adds the flags every admin subcommand takes.
func (a *simAdmin) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&a.url, "url", "", "the simulator (default: $DAYTONA_API_URL without /api, else http://127.0.0.1:4026)")
	f.StringVar(&a.adminKey, "admin-key", "", "the admin key (default: $"+envSimAdminKey+")")
	f.StringVar(&a.org, "org", "", "act on this organizationId (default: the organization of $DAYTONA_API_KEY)")
	f.BoolVar(&a.all, "all", false, "act on every organization")
	f.BoolVar(&a.json, "json", false, "print the admin API's JSON answer")
}

// base is the simulator's root URL.
func (a *simAdmin) base() string {
	u := a.url
	if u == "" {
		u = strings.TrimSuffix(strings.TrimRight(os.Getenv("DAYTONA_API_URL"), "/"), "/api")
	}
	if u == "" {
		u = "http://127.0.0.1:4026"
	}
	return strings.TrimRight(u, "/")
}

// do sends one admin request and decodes its JSON answer into out (nil:
// none expected).
func (a *simAdmin) do(ctx context.Context, method, path string, query url.Values, body any, out any) error {
	key := a.adminKey
	if key == "" {
		key = os.Getenv(envSimAdminKey)
	}
	if key == "" {
		return provider.Errorf(provider.InvalidArgument, "no admin key: pass --admin-key or set %s to the key sandplane sim printed", envSimAdminKey)
	}
	if query == nil {
		query = url.Values{}
	}
	header := http.Header{"Authorization": {"Bearer " + key}}
	switch {
	case a.all:
		query.Set(simulator.AdminOrgParam, simulator.AllOrgs)
	case a.org != "":
		query.Set(simulator.AdminOrgParam, a.org)
	case os.Getenv("DAYTONA_API_KEY") != "":
		header.Set(simulator.AdminAPIKeyHeader, os.Getenv("DAYTONA_API_KEY"))
	default:
		return provider.Errorf(provider.InvalidArgument, "no organization: pass --org, --all, or set DAYTONA_API_KEY to one of its API keys")
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	u := a.base() + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	ctx, cancel := clock.WithTimeout(ctx, clock.Real(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return provider.Errorf(provider.InvalidArgument, "--url %s: %v", a.base(), err)
	}
	req.Header = header
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return provider.Errorf(provider.Unavailable, "no simulator answers at %s: %v (start one with sandplane sim, or pass --url)", a.base(), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return provider.Errorf(provider.Unavailable, "read the answer of %s: %v", a.base(), err)
	}
	if resp.StatusCode >= 300 {
		var e struct{ Message string }
		_ = json.Unmarshal(b, &e)
		if e.Message == "" {
			e.Message = strings.TrimSpace(string(b))
		}
		// The main API's table: the admin API answers as the API does.
		code := provider.CodeForHTTPStatus(resp.StatusCode)
		return provider.Errorf(code, "%s %s: %d %s", method, path, resp.StatusCode, e.Message)
	}
	if out != nil && len(bytes.TrimSpace(b)) > 0 {
		return json.Unmarshal(b, out)
	}
	return nil
}

// newSimAdminCmds are `sim faults`, `sim calls` and `sim cost`.
func newSimAdminCmds() []*cobra.Command {
	return []*cobra.Command{newSimFaultsCmd(), newSimCallsCmd(), newSimCostCmd()}
}

func newSimFaultsCmd() *cobra.Command {
	var a simAdmin
	var clear bool
	var random string
	cmd := &cobra.Command{
		Use:   "faults [FAULT_JSON...]",
		Short: "List, add or clear the faults of a running simulator",
		Long: `With no argument, list the faults of the organization (or --all). Each
argument is a fault to add, as JSON, for example
  sandplane sim faults '{"op":"createSandbox","status":429,"retryAfter":5}'
--clear removes every fault; --random '{"seed":1,"rate":0.1}' sets random
faults, --random off turns them off.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			switch {
			case clear:
				return a.do(ctx, http.MethodDelete, "/_sim/faults", nil, nil, nil)
			case random == "off":
				return a.do(ctx, http.MethodDelete, "/_sim/faults/random", nil, nil, nil)
			case random != "":
				var rf json.RawMessage
				if err := json.Unmarshal([]byte(random), &rf); err != nil {
					return provider.Errorf(provider.InvalidArgument, "--random is not JSON: %v", err)
				}
				return a.do(ctx, http.MethodPut, "/_sim/faults/random", nil, rf, nil)
			}
			if len(args) > 0 {
				var list []json.RawMessage
				for _, arg := range args {
					var f json.RawMessage
					if err := json.Unmarshal([]byte(arg), &f); err != nil {
						return provider.Errorf(provider.InvalidArgument, "fault %q is not JSON: %v", arg, err)
					}
					list = append(list, f)
				}
				var added []simulator.Fault
				if err := a.do(ctx, http.MethodPost, "/_sim/faults", nil, list, &added); err != nil {
					return err
				}
				return printFaults(cmd.OutOrStdout(), added, a.json)
			}
			var faults json.RawMessage
			if err := a.do(ctx, http.MethodGet, "/_sim/faults", nil, nil, &faults); err != nil {
				return err
			}
			if a.json {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), string(faults))
				return err
			}
			var list []simulator.Fault
			if err := json.Unmarshal(faults, &list); err != nil {
				return provider.Errorf(provider.Internal, "the simulator's fault list: %v", err)
			}
			return printFaults(cmd.OutOrStdout(), list, false)
		},
	}
	a.bind(cmd)
	cmd.Flags().BoolVar(&clear, "clear", false, "remove every fault (scripted and random)")
	cmd.Flags().StringVar(&random, "random", "", `random faults as JSON ({"seed":1,"rate":0.1}), or "off"`)
	return cmd
}

func printFaults(w io.Writer, faults []simulator.Fault, asJSON bool) error {
	if asJSON {
		return printJSON(w, faults)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tOP\tSANDBOX\tSTATUS\tDELAY\tTIMES\tOTHER")
	for _, f := range faults {
		b, _ := json.Marshal(f)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		for _, k := range []string{"id", "op", "sandbox", "status", "delay", "times", "org"} {
			delete(m, k)
		}
		other, _ := json.Marshal(m)
		delay := "-"
		if f.Delay != 0 {
			delay = time.Duration(f.Delay).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\n", f.ID, f.Op, orDash(f.Sandbox), f.Status, delay, f.Times, other)
	}
	return tw.Flush()
}

func newSimCallsCmd() *cobra.Command {
	var a simAdmin
	var clear bool
	cmd := &cobra.Command{
		Use:   "calls",
		Short: "Show (or --clear) the call log of a running simulator",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if clear {
				return a.do(ctx, http.MethodDelete, "/_sim/calls", nil, nil, nil)
			}
			var log struct {
				Calls  []simulator.Call   `json:"calls"`
				Counts map[string]float64 `json:"counts"`
			}
			if err := a.do(ctx, http.MethodGet, "/_sim/calls", nil, nil, &log); err != nil {
				return err
			}
			if a.json {
				return printJSON(cmd.OutOrStdout(), log)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tMETHOD\tPATH\tOPERATION\tSTATUS\tFAULT")
			for _, c := range log.Calls {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", c.Time.UTC().Format(time.RFC3339), c.Method, c.Path, c.Operation, c.Status, orDash(c.Fault))
			}
			fmt.Fprintln(tw, "\nOPERATION\tCALLS")
			ops := make([]string, 0, len(log.Counts))
			for op := range log.Counts {
				ops = append(ops, op)
			}
			sort.Strings(ops)
			for _, op := range ops {
				fmt.Fprintf(tw, "%s\t%.0f\n", op, log.Counts[op])
			}
			return tw.Flush()
		},
	}
	a.bind(cmd)
	cmd.Flags().BoolVar(&clear, "clear", false, "clear the call log")
	return cmd
}

// printCost prints a cost report as a table of its sandboxes, then its
// totals and the prices they were reckoned at.
func printCost(w io.Writer, r simulator.CostReport) error {
	secs := func(s float64) string { return (time.Duration(s * float64(time.Second))).Round(time.Second).String() }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tRUNNING\tSTOPPED\tCOST")
	for _, sb := range r.Sandboxes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t$%.6f\n", sb.ID, orDash(sb.Name), secs(sb.RunningSeconds), secs(sb.StoppedSeconds), sb.Cost)
	}
	total := "TOTAL"
	if r.Pruned > 0 {
		total = fmt.Sprintf("TOTAL (with %d deleted sandboxes not listed)", r.Pruned)
	}
	fmt.Fprintf(tw, "%s\t\t%s\t%s\t$%.6f\n", total, secs(r.RunningSeconds), secs(r.StoppedSeconds), r.Cost)
	if err := tw.Flush(); err != nil {
		return err
	}
	p := r.Prices
	_, err := fmt.Fprintf(w, "\nprices per second: $%g a vCPU, $%g a GiB of memory, $%g a GiB of disk beyond %d GiB free\n",
		p.CPUPerSecond, p.MemoryGiBPerSecond, p.DiskGiBPerSecond, p.FreeDiskGiB)
	return err
}

func newSimCostCmd() *cobra.Command {
	var a simAdmin
	var cpu, mem, disk float64
	var freeDisk int
	cmd := &cobra.Command{
		Use:   "cost",
		Short: "What the run of a simulator would have cost on Daytona",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			f := cmd.Flags()
			for name, v := range map[string]float64{"cpu-per-second": cpu, "memory-gib-per-second": mem, "disk-gib-per-second": disk} {
				if f.Changed(name) {
					q.Set(map[string]string{"cpu-per-second": "cpuPerSecond", "memory-gib-per-second": "memoryGiBPerSecond", "disk-gib-per-second": "diskGiBPerSecond"}[name], fmt.Sprint(v))
				}
			}
			if f.Changed("free-disk-gib") {
				q.Set("freeDiskGiB", fmt.Sprint(freeDisk))
			}
			var report json.RawMessage
			if err := a.do(cmd.Context(), http.MethodGet, "/_sim/cost", q, nil, &report); err != nil {
				return err
			}
			if a.json {
				var v any
				if err := json.Unmarshal(report, &v); err != nil {
					return provider.Errorf(provider.Internal, "the simulator's cost report: %v", err)
				}
				return printJSON(cmd.OutOrStdout(), v)
			}
			var r simulator.CostReport
			if err := json.Unmarshal(report, &r); err != nil {
				return provider.Errorf(provider.Internal, "the simulator's cost report: %v", err)
			}
			return printCost(cmd.OutOrStdout(), r)
		},
	}
	a.bind(cmd)
	cmd.Flags().Float64Var(&cpu, "cpu-per-second", 0, "price of one vCPU per second (default: the simulator's)")
	cmd.Flags().Float64Var(&mem, "memory-gib-per-second", 0, "price of one GiB of memory per second")
	cmd.Flags().Float64Var(&disk, "disk-gib-per-second", 0, "price of one GiB of disk per second")
	cmd.Flags().IntVar(&freeDisk, "free-disk-gib", 0, "disk each sandbox gets without charge")
	return cmd
}
