package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/internal/poolsim"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/pool"
)

func newPoolCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "Model the warm pool's policies, and check a pool left nothing running",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newPoolSimulateCmd(), newPoolVerifyCmd())
	return cmd
}

func newPoolSimulateCmd() *cobra.Command {
	var o poolsim.Options
	var stages, traffic string
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "What each warm-pool policy costs and how long turns wait, on a simulated day",
		Long: `Play a day of agent turns under three policies (no pool, park-to-stopped,
park-to-running) on the Daytona simulator's latencies and billing, on a
simulated clock (a day takes seconds), and print each policy's running and
stopped sandbox-hours, cost, paths taken, and mean and p95 wait, beside no
pool as a ratio. This is the table make bench prints.

A turn pays the stages of its path: a created one create, harness respawn,
mounts, services hop and checkout; a resumed one start instead of create and
the rest as created; a warm one only the services hop and checkout.
--stages names a JSON file of the stages to charge instead of the measured
ones, e.g. {"harnessRespawn": "3s", "servicesHop": "100ms..220ms"}
(fields: create, start, harnessRespawn, mounts, servicesHop, checkout; a
stage the file leaves out keeps its default). --traffic names a JSON day:
[{"sessions": [{"start": "9h", "turns": [{"gap": "0s", "work": "60s"}]}]}];
without it a bursty day of --conversations is generated from --seed. The
pool's timers are its defaults (auto-stop 15 min, auto-delete 30 min).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadModel(&o, stages, traffic); err != nil {
				return err
			}
			o = o.WithDefaults()
			results, err := poolsim.Run(cmd.Context(), o)
			if cmd.Context().Err() != nil {
				return provider.Errorf(provider.Canceled, "interrupted: the simulated day did not end, so there is no table")
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "a simulated day of %d turns in %d conversations\n", results[0].Turns, len(o.Traffic))
			if err := poolsim.WriteStages(out, o.Stages); err != nil {
				return err
			}
			return poolsim.WriteTable(out, results)
		},
	}
	f := cmd.Flags()
	f.StringVar(&stages, "stages", "", "JSON file of stage costs (see above); the measured ones when empty")
	f.StringVar(&traffic, "traffic", "", "JSON file of the day's conversations; a generated day when empty")
	f.IntVar(&o.Conversations, "conversations", 40, "conversations of the generated day")
	f.Uint64Var(&o.Seed, "seed", 42, "seed of the generated day and of the stage draws")
	f.DurationVar(&o.KeepWarm, "keep-warm", pool.DefaultKeepWarm, "park-to-running's window")
	f.Float64Var(&o.RunningUSDPerHour, "usd-running-hour", poolsim.USDPerRunningHour, "price of a running sandbox-hour")
	f.Float64Var(&o.StoppedUSDPerHour, "usd-stopped-hour", poolsim.USDPerStoppedHour, "price of a stopped sandbox-hour")
	return cmd
}

// loadModel reads the files the flags name into o, as usage errors.
func loadModel(o *poolsim.Options, stages, traffic string) error {
	if o.Conversations <= 0 || o.KeepWarm <= 0 || o.RunningUSDPerHour < 0 || o.StoppedUSDPerHour < 0 {
		return provider.Errorf(provider.InvalidArgument, "--conversations and --keep-warm must be above 0, the prices 0 or more (see sandplane pool simulate --help)")
	}
	var err error
	if stages != "" {
		if o.Stages, err = poolsim.LoadStages(stages); err != nil {
			return provider.Errorf(provider.InvalidArgument, "--stages: %v", err)
		}
	}
	if traffic != "" {
		if o.Traffic, err = poolsim.LoadTraffic(traffic); err != nil {
			return provider.Errorf(provider.InvalidArgument, "--traffic: %v", err)
		}
		if len(o.Traffic) == 0 {
			return provider.Errorf(provider.InvalidArgument, "--traffic: %s holds no conversation", traffic)
		}
	}
	return nil
}

func newPoolVerifyCmd() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Fail if a pool left a live sandbox behind (the zero-leak check after shutdown)",
		Long: `List every sandbox carrying the labels of the pool named --name and fail,
naming each, if one is live: started, on its way, or in error. Stopped
sandboxes are not leaks: their create-time auto-delete reaps them. Run it
after the host's pool shut down; exit code 2 means something was left.`,
		Args: cobra.NoArgs,
	}
	o := newClientOptions(cmd, false)
	cmd.Flags().StringVar(&name, "name", "default", "the pool's name (pool.WithName)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		o.bind(cmd)
		p, err := o.open(cmd.Context())
		if err != nil {
			return err
		}
		if err := pool.VerifyEmpty(cmd.Context(), p, name); err != nil {
			return err
		}
		fmt.Fprintf(o.stdout, "pool %s: no live sandbox\n", name)
		return nil
	}
	return cmd
}
