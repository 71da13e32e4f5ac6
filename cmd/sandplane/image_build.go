package main

import (
	"fmt"

	"github.com/docker/docker/client"
	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/internal/baseimage"
	"github.com/sandplane/sandplane/provider"
)

func newImageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build the images docker sandboxes start from",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newImageBuildCmd())
	return cmd
}

func newImageBuildCmd() *cobra.Command {
	var spec baseimage.Spec
	var rebuild, asJSON bool
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the default base image of docker sandboxes, once",
		Long: `Build the default base image of docker sandboxes on the Docker engine
(DOCKER_HOST is honoured): Debian's minbase from debootstrap, with bash,
coreutils, python3 and pip, node and npm, git, curl, ca-certificates, procps
and a daytona user whose home is /home/daytona, as Daytona's default
snapshot has. No registry is needed: packages come from a Debian mirror,
the host's apt mirror unless --mirror names another.

The image is tagged ` + baseimage.Repository + `:<hash> and labelled ` + baseimage.LabelHash + `
with a hash of what it holds; when the engine has it, nothing is built
(--rebuild builds anyway). Building takes minutes and needs root: run it
once with sudo. Progress goes to stderr; the image goes to stdout, or with
--json an object {"image","hash","built"}.

The root filesystem is made under $TMPDIR (/tmp by default), which needs
about 1 GiB free and must allow device files and executables.`,
		// A stray argument is a usage error (exit 2), not cobra's "unknown
		// command" (exit 1).
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return provider.Errorf(provider.InvalidArgument, "%s takes no arguments, got %q (see --help)", cmd.CommandPath(), args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
			if err != nil {
				return provider.Errorf(provider.Unavailable, "docker client from the environment: %v", err)
			}
			defer cli.Close()
			built := false
			show := baseimage.ProgressTo(cmd.ErrOrStderr(), "image build: ")
			opts := baseimage.Options{Spec: spec, Progress: func(p baseimage.Progress) {
				built = built || p.Phase == baseimage.PhaseImport
				show(p)
			}}
			ensure := baseimage.Ensure
			if rebuild {
				ensure = baseimage.Build
			}
			ref, err := ensure(cmd.Context(), cli, opts)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"image": ref, "hash": opts.Spec.Fill().Hash(), "built": built})
			}
			fmt.Fprintln(cmd.OutOrStdout(), ref)
			return nil
		},
	}
	cmd.Flags().StringVar(&spec.Suite, "suite", "", "Debian release to build (default: the host's, else "+baseimage.DefaultSuite+")")
	cmd.Flags().StringVar(&spec.Mirror, "mirror", "", "Debian mirror to download from (default: the host's apt mirror, else "+baseimage.DefaultMirror+")")
	cmd.Flags().BoolVar(&rebuild, "rebuild", false, "build even when the engine has the image")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
