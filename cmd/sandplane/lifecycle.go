package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/provider"
)

// originCLI marks sandboxes made from the command line, for the dashboard's
// origin badge.
const originCLI = "cli"

// createFlags are the flags of create and run.
type createFlags struct {
	id, name, snapshot, runtime string
	labels, env                 []string
	autoStop                    int
}

func (f *createFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "sandbox name (default: the id)")
	fl.StringVar(&f.snapshot, "snapshot", "", `launch profile from the daemon config (default "default", which runs the toolbox)`)
	fl.StringVar(&f.runtime, "runtime", "", "native or docker (default: the daemon's)")
	fl.StringArrayVarP(&f.labels, "label", "l", nil, "label key=value (repeatable); origin=cli unless given")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "environment variable KEY=VALUE for the workload (repeatable)")
	fl.IntVar(&f.autoStop, "auto-stop", 0, "idle minutes before auto-stop, 0 for never (default: the daemon's)")
}

func (f *createFlags) request(cmd *cobra.Command) (provider.CreateRequest, error) {
	labels, err := parseKeyValues("label", f.labels)
	if err != nil {
		return provider.CreateRequest{}, err
	}
	if _, ok := labels["origin"]; !ok {
		labels["origin"] = originCLI
	}
	env, err := parseKeyValues("env", f.env)
	if err != nil {
		return provider.CreateRequest{}, err
	}
	req := provider.CreateRequest{ID: f.id, Name: f.name, Snapshot: f.snapshot, Runtime: provider.Runtime(f.runtime), Labels: labels}
	if len(env) > 0 {
		req.EnvVars = env
	}
	if cmd.Flags().Changed("auto-stop") {
		if f.autoStop < 0 {
			return req, provider.Errorf(provider.InvalidArgument, "--auto-stop %d: want 0 (never) or more minutes", f.autoStop)
		}
		req.AutoStopInterval = &f.autoStop
	}
	return req, nil
}

func newCreateCmd() *cobra.Command {
	var f createFlags
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a sandbox and wait until it is started",
		Long: `Create a sandbox and wait until it is started. The id goes to stdout, so that
id=$(sandplane create) works; a description goes to stderr. --json prints the
sandbox object instead.`,
		Args: cobra.NoArgs,
	}
	o := newClientOptions(cmd, true)
	f.register(cmd)
	cmd.Flags().StringVar(&f.id, "id", "", "sandbox id (default: generated)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		o.bind(cmd)
		req, err := f.request(cmd)
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		p, err := o.open(ctx)
		if err != nil {
			return err
		}
		stop := progress(o.stderr, o.clk, "creating sandbox")
		s, err := p.Create(ctx, req)
		stop()
		if err != nil {
			return err
		}
		if o.json {
			return printJSON(o.stdout, s)
		}
		fmt.Fprintln(o.stdout, s.ID)
		fmt.Fprintln(o.stderr, describe(p, s))
		return nil
	}
	return cmd
}

// lifecycleCmd builds stop, start and rm: one call per argument, every
// argument tried, the first failure deciding the exit code.
func lifecycleCmd(use, short, long, waiting string, call func(context.Context, provider.Provider, string) (any, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use + " ID|NAME...",
		Short: short,
		Long:  long,
		Args:  cobra.MinimumNArgs(1),
	}
	o := newClientOptions(cmd, true)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		o.bind(cmd)
		ctx := cmd.Context()
		p, err := o.open(ctx)
		if err != nil {
			return err
		}
		var first error
		done := []any{}
		for _, arg := range args {
			stop := progress(o.stderr, o.clk, waiting+" "+arg)
			s, err := call(ctx, p, arg)
			stop()
			if err != nil {
				if len(args) > 1 {
					fmt.Fprintf(o.stderr, "sandplane: %s %s: %v\n", use, arg, err)
				}
				if first == nil {
					first = err
				}
				continue
			}
			done = append(done, s)
			if !o.json {
				fmt.Fprintln(o.stdout, arg)
			}
		}
		if o.json {
			if err := printJSON(o.stdout, done); err != nil {
				return err
			}
		}
		if first != nil && len(args) > 1 {
			return fmt.Errorf("%d of %d failed: %w", len(args)-len(done), len(args), first)
		}
		return first
	}
	return cmd
}

func newStopCmd() *cobra.Command {
	return lifecycleCmd("stop", "Stop sandboxes; start brings them back with their files",
		`Stop each sandbox's workload and keep its directory, so that start restarts it.
Prints each argument once stopped; --json prints the sandboxes as an array.`,
		"stopping", func(ctx context.Context, p provider.Provider, id string) (any, error) {
			return p.Stop(ctx, id)
		})
}

func newStartCmd() *cobra.Command {
	return lifecycleCmd("start", "Start stopped sandboxes and wait until they are started",
		`Start each stopped sandbox with its preserved files and wait until it is
started. Prints each argument once started; --json prints the sandboxes as an
array.`,
		"starting", func(ctx context.Context, p provider.Provider, id string) (any, error) {
			return p.Start(ctx, id)
		})
}

func newRmCmd() *cobra.Command {
	cmd := lifecycleCmd("rm", "Delete sandboxes: stop them and remove their files",
		`Delete each sandbox: stop its workload and remove its directory. Deleting a
sandbox that does not exist succeeds, so that cleanup scripts can repeat it.
Prints each argument once deleted; --json prints the ids as an array of
{"id"} objects.`,
		"deleting", func(ctx context.Context, p provider.Provider, id string) (any, error) {
			if err := p.Delete(ctx, id); err != nil {
				return nil, err
			}
			return map[string]string{"id": id}, nil
		})
	cmd.Aliases = []string{"delete"}
	return cmd
}
