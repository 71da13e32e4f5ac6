package conformance

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// Harness is one fresh backend for one scenario, and what the suite needs to
// know about it. The maker that builds it stops whatever it started with
// t.Cleanup.
type Harness interface {
	// Provider is the provider under test.
	Provider() provider.Provider
	// Unreachable is a provider of the same kind whose backend does not
	// answer.
	Unreachable() provider.Provider
	// Minute is the length of the backend's interval minute.
	Minute() time.Duration
	// Clock paces the scenarios' polls: clock.Real() for a live backend.
	Clock() clock.Clock
	// HTTPClient carries the scenarios' own requests to toolbox and preview
	// URLs.
	HTTPClient() *http.Client
	// RunID is put in the name and labels of every sandbox the suite
	// creates, so that a shared backend can be swept after the run.
	RunID() string
	// Expect is what the suite holds the provider to.
	Expect() Expectations
}

// HarnessMaker builds a fresh Harness for the scenario t runs.
type HarnessMaker func(ctx context.Context, t *testing.T) (Harness, error)

// Expectations are what a harness promises about its provider.
type Expectations struct {
	// Traits must equal what the provider reports; the scenarios then check
	// the behaviour each trait describes.
	Traits provider.Traits
	// WorkloadPort is the port inside the sandbox where the default
	// snapshot's workload, a toolbox, serves previews (4000 on the local
	// control plane, as a host server written for Daytona asks for). 0: the
	// default workload serves no preview (Daytona, whose toolbox answers
	// only its own proxy), and scenarios start a server of their own.
	WorkloadPort int
	// DeclaredPorts means a preview names only ports the snapshot declares:
	// any other is invalid_argument. Daytona previews any port.
	DeclaredPorts bool
	// Watch means the provider implements provider.Watcher; the suite then
	// checks what a watcher sees.
	Watch bool
	// StopWithReason means the provider implements provider.ReasonStopper.
	StopWithReason bool
	// WarmPoolSnapshot is the snapshot, by name, that the warm-pool
	// scenario keeps a pool of, for a provider with Traits.WarmPools: a
	// create naming it with no env of its own is what the pool's members
	// serve. Empty skips the scenario, as on a shared organization whose
	// creates a pool would serve.
	WarmPoolSnapshot string
	// LogsSnapshot is a snapshot, by name, that the harness made, whose
	// entrypoint prints "cf-before $CF_SECRET cf-after" to its stdout and
	// runs on: the entrypoint-logs scenario creates its sandbox of it.
	// Empty: see ShellInWorkload.
	LogsSnapshot string
	// ShellInWorkload means the toolbox's shells are children of the
	// workload (the local control plane), so that a command writes to the
	// workload's own stdout through /proc/$PPID/fd/1; the entrypoint-logs
	// scenario then prints its line that way on a sandbox of the default
	// snapshot. Without it or a LogsSnapshot, the scenario checks only that
	// the logs are read, as on a shared organization where a run should
	// make no snapshot.
	ShellInWorkload bool
	// Secret is a secret the harness made in the backend's organization,
	// for a provider with Traits.Secrets; nil skips the secrets scenario,
	// as on a shared organization where a run should make none.
	Secret *Secret
}

// Secret is a secret of the backend's organization: its name, which
// sandboxes mount, and its value, which the suite checks no answer
// carries. The suite never sends the value.
type Secret struct {
	Name, Value string
}

// Labels every sandbox of the suite carries.
const (
	LabelRun      = "conformance-run"
	LabelScenario = "conformance-scenario"
)

// Static is a Harness made of fixed values, for host projects whose
// provider needs nothing more.
type Static struct {
	P, Down   provider.Provider
	MinuteLen time.Duration
	Clk       clock.Clock // default clock.Real()
	Client    *http.Client
	Run       string
	Want      Expectations
}

var _ Harness = (*Static)(nil)

func (s *Static) Provider() provider.Provider    { return s.P }
func (s *Static) Unreachable() provider.Provider { return s.Down }
func (s *Static) Minute() time.Duration          { return s.MinuteLen }
func (s *Static) RunID() string                  { return s.Run }
func (s *Static) Expect() Expectations           { return s.Want }

func (s *Static) Clock() clock.Clock {
	if s.Clk == nil {
		return clock.Real()
	}
	return s.Clk
}

func (s *Static) HTTPClient() *http.Client {
	if s.Client == nil {
		return http.DefaultClient
	}
	return s.Client
}
