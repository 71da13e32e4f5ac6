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
	session                     string
	labels, env                 []string
	autoStop                    int
}

func (f *createFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "sandbox name, which is also its id (default: generated)")
	fl.StringVar(&f.session, "session", "", "the agent session the sandbox belongs to")
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
	if f.session != "" {
		req.SessionID = &f.session
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
	cmd.Flags().StringVar(&f.id, "id", "", "sandbox id, which is also its name (default: generated)")
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

// lifecycleCmd builds stop, start and rm: one call per sandbox, every
// sandbox tried, the first failure deciding the exit code. With selectable,
// the sandboxes may be picked by --all or --label instead of named; call
// learns which (named).
func lifecycleCmd(use, short, long, waiting string, selectable bool, call func(ctx context.Context, p provider.Provider, idOrName string, named bool) (any, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use + " ID|NAME...",
		Short: short,
		Long:  long,
		Args:  cobra.MinimumNArgs(1),
	}
	o := newClientOptions(cmd, true)
	var sel selector
	if selectable {
		cmd.Use = use + " ID|NAME... | --all | --label KEY=VALUE..."
		cmd.Args = cobra.ArbitraryArgs
		sel.register(cmd)
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		o.bind(cmd)
		if err := sel.check(args, selectable); err != nil {
			return err
		}
		ctx := cmd.Context()
		p, err := o.open(ctx)
		if err != nil {
			return err
		}
		targets, err := sel.targets(ctx, p, args)
		if err != nil {
			return err
		}
		named := len(args) > 0
		if len(targets) == 0 {
			fmt.Fprintln(o.stderr, "sandplane: no sandbox matches")
		}
		var first error
		done := []any{}
		for _, arg := range targets {
			stop := progress(o.stderr, o.clk, waiting+" "+arg)
			s, err := call(ctx, p, arg, named)
			stop()
			if err != nil {
				if len(targets) > 1 {
					fmt.Fprintf(o.stderr, "sandplane: %s %s: %s\n", use, arg, cliMessage(err))
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
		if first != nil && len(targets) > 1 {
			return failedOf(len(targets)-len(done), len(targets), first)
		}
		return first
	}
	return cmd
}

// selector picks sandboxes by label rather than by name.
type selector struct {
	all    bool
	labels []string
}

func (sel *selector) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&sel.all, "all", false, "every sandbox of the provider")
	cmd.Flags().StringArrayVarP(&sel.labels, "label", "l", nil, "the sandboxes with this label, key=value (repeatable; all must match)")
}

// check refuses a command line that names sandboxes in no way, or in two.
func (sel *selector) check(args []string, selectable bool) error {
	picked := sel.all || len(sel.labels) > 0
	switch {
	case !selectable:
		return nil
	case sel.all && len(sel.labels) > 0:
		return provider.Errorf(provider.InvalidArgument, "--all picks every sandbox and --label some of them: give one of the two")
	case picked && len(args) > 0:
		return provider.Errorf(provider.InvalidArgument, "name the sandboxes or pick them with --all or --label, not both")
	case !picked && len(args) == 0:
		return provider.Errorf(provider.InvalidArgument, "name the sandboxes, or pick them with --all or --label KEY=VALUE")
	}
	return nil
}

// targets are the sandboxes to act on: the arguments, or the ids of what
// the selector picks, oldest first.
func (sel *selector) targets(ctx context.Context, p provider.Provider, args []string) ([]string, error) {
	if !sel.all && len(sel.labels) == 0 {
		return args, nil
	}
	want, err := parseKeyValues("label", sel.labels)
	if err != nil {
		return nil, err
	}
	list, err := p.List(ctx, provider.ListOptions{Labels: want})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(list))
	for i, s := range list {
		ids[i] = s.ID
	}
	return ids, nil
}

func newStopCmd() *cobra.Command {
	return lifecycleCmd("stop", "Stop sandboxes; start brings them back with their files",
		`Stop each sandbox's workload and keep its directory, so that start restarts it.
The sandbox then shows the reason "stopped". Name the sandboxes, or pick them
with --all or --label KEY=VALUE. Prints each sandbox once stopped; --json
prints the sandboxes as an array.`,
		"stopping", true, func(ctx context.Context, p provider.Provider, id string, _ bool) (any, error) {
			return p.Stop(ctx, id)
		})
}

func newStartCmd() *cobra.Command {
	return lifecycleCmd("start", "Start stopped sandboxes and wait until they are started",
		`Start each stopped sandbox with its preserved files and wait until it is
started. Prints each argument once started; --json prints the sandboxes as an
array.`,
		"starting", false, func(ctx context.Context, p provider.Provider, id string, _ bool) (any, error) {
			return p.Start(ctx, id)
		})
}

func newRmCmd() *cobra.Command {
	cmd := lifecycleCmd("rm", "Delete sandboxes: stop them and remove their files",
		`Delete each sandbox: stop its workload and remove its directory. Name the
sandboxes, or pick them with --all or --label KEY=VALUE (rm --all deletes
every sandbox of the provider). Prints each sandbox once deleted; --json
prints the ids as an array of {"id"} objects.

A named sandbox that does not exist is an error, exit code 3, as for stop and
start; one that another client deletes meanwhile is not. --all or --label
that picks none deletes nothing, prints nothing on stdout ([] with --json),
says so on stderr and exits with 0, so that a cleanup script can repeat it.`,
		"deleting", true, func(ctx context.Context, p provider.Provider, id string, named bool) (any, error) {
			target := id
			if named {
				// The API's delete succeeds for a sandbox that does not
				// exist, so that retries are safe; a name given here is
				// looked up first, as stop's and start's are.
				s, err := p.Get(ctx, id)
				if err != nil {
					return nil, err
				}
				target = s.ID
			}
			if err := p.Delete(ctx, target); err != nil {
				return nil, err
			}
			return map[string]string{"id": id}, nil
		})
	cmd.Aliases = []string{"delete"}
	return cmd
}
