package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/sandplane/sandplane/internal/buildversion"
	"github.com/sandplane/sandplane/local"
)

// version is stamped by the Makefile (-ldflags "-X main.version=...").
var version = ""

// versionString is the version of this binary (see buildversion).
func versionString() string { return buildversion.Of(version) }

// versionInfo is what `sandplane version --json` prints.
type versionInfo struct {
	Version    string `json:"version"`
	APIVersion string `json:"apiVersion"`
	Go         string `json:"go"`
	Platform   string `json:"platform"`
	Commit     string `json:"commit,omitempty"`
	Modified   bool   `json:"modified,omitempty"`
}

func currentVersion() versionInfo {
	v := versionInfo{Version: versionString(), APIVersion: local.APIVersion, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	return v
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Long: `Print the version of this binary: the module version when it was built with
go install (github.com/sandplane/sandplane/cmd/sandplane@v1.2.3), else the
one make build stamped, then the API version it speaks, the Go version and
the commit it was built from. --json prints them as an object.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := currentVersion()
			if asJSON {
				return printJSON(cmd.OutOrStdout(), v)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sandplane %s\n  API:      %s\n  Go:       %s %s\n", v.Version, v.APIVersion, v.Go, v.Platform)
			if v.Commit != "" {
				dirty := ""
				if v.Modified {
					dirty = " (modified)"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "  commit:   %s%s\n", v.Commit, dirty)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	return cmd
}
