package conformance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// Run runs every scenario against the providers newHarness makes, in
// parallel, each in its own harness. Every sandbox a scenario creates is
// deleted when it ends, whatever happened.
func Run(t *testing.T, newHarness HarnessMaker) {
	t.Helper()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			h, err := newHarness(t.Context(), t)
			require.NoError(t, err, "make the harness")
			sc.run(newEnv(t, h, sc.name))
		})
	}
}

// Scenarios lists the scenario names, in the order Run runs them; a
// cassette per name makes a complete replay.
func Scenarios() []string {
	var out []string
	for _, sc := range scenarios {
		out = append(out, sc.name)
	}
	return out
}

// fixedSlack bounds the part of a wait that does not scale with the minute:
// a stop's grace period, a container starting, a slow machine.
const fixedSlack = 20 * time.Second

// env is what a scenario works with.
type env struct {
	t        *testing.T
	ctx      context.Context
	h        Harness
	p        provider.Provider
	want     Expectations
	minute   time.Duration
	clk      clock.Clock
	scenario string
	labels   map[string]string
}

func newEnv(t *testing.T, h Harness, scenario string) *env {
	e := &env{
		t:        t,
		ctx:      t.Context(),
		h:        h,
		p:        h.Provider(),
		want:     h.Expect(),
		minute:   h.Minute(),
		clk:      h.Clock(),
		scenario: scenario,
		labels:   map[string]string{LabelRun: h.RunID(), LabelScenario: scenario},
	}
	require.Positive(t, e.minute, "the harness's minute")
	info, err := e.p.Info(e.ctx)
	require.NoError(t, err, "info of the provider under test")
	require.NoError(t, minuteMismatch(e.minute, info))
	t.Cleanup(e.sweep)
	return e
}

// realMinute is the interval minute of a backend that does not report one:
// a real minute, as Daytona's.
const realMinute = time.Minute

// minuteMismatch says why the harness's minute is not the one the provider
// reports (Info.Minute; a backend that reports none runs on real minutes).
// Every wait of the suite is in harness minutes, so a mismatch would show
// up later as an idle clock that seems broken.
func minuteMismatch(harness time.Duration, info *provider.Info) error {
	reported := realMinute
	if info.Minute != "" {
		d, err := time.ParseDuration(info.Minute)
		if err != nil || d <= 0 {
			return fmt.Errorf("the provider reports an interval minute of %q, which is not a positive duration", info.Minute)
		}
		reported = d
	}
	if reported != harness {
		return fmt.Errorf("the harness's interval minute is %s but the provider's is %s (Info.Minute %q): every wait of the suite is in harness minutes, so make the harness's Minute the backend's (or start the backend with the harness's)",
			harness, reported, info.Minute)
	}
	return nil
}

// maxName is the longest sandbox name the local daemon takes: a DNS label
// still in its preview host, <port>-<name>.localhost.
const maxName = 57

// name is a sandbox name that no other scenario or run uses. One too long
// for a preview host keeps its start and ends in a hash of the whole.
func (e *env) name(what string) string {
	n := "cf-" + e.h.RunID() + "-" + strings.ReplaceAll(e.scenario, "_", "-") + "-" + what
	if len(n) <= maxName {
		return n
	}
	sum := sha256.Sum256([]byte(n))
	return n[:maxName-9] + "-" + hex.EncodeToString(sum[:4])
}

// create creates a sandbox with the suite's labels and requires it started.
// A scenario whose subject is not auto-stop asks for AutoStopInterval 0:
// the local backends' minutes are shrunk, and the default fifteen of them
// can pass within a scenario on a loaded machine.
func (e *env) create(req provider.CreateRequest) *provider.Sandbox {
	e.t.Helper()
	labels := maps.Clone(e.labels)
	maps.Copy(labels, req.Labels)
	req.Labels = labels
	sb, err := e.p.Create(e.ctx, req)
	require.NoError(e.t, err, "create")
	require.Equal(e.t, provider.StateStarted, sb.State, "create returns the sandbox started")
	return sb
}

func (e *env) get(idOrName string) *provider.Sandbox {
	e.t.Helper()
	sb, err := e.p.Get(e.ctx, idOrName)
	require.NoError(e.t, err, "get %s", idOrName)
	return sb
}

// sweep deletes every sandbox of this run and scenario. A sandbox still in
// a transition is tried again a little later.
func (e *env) sweep() {
	ctx, cancel := context.WithCancel(context.WithoutCancel(e.ctx))
	defer cancel()
	stop := e.clk.AfterFunc(2*time.Minute+e.wait(3), cancel)
	defer stop.Stop()
	list, err := e.p.List(ctx, provider.ListOptions{Labels: e.labels})
	if err != nil {
		e.t.Errorf("sweep: list the sandboxes of %s: %v", e.scenario, err)
		return
	}
	for _, sb := range list {
		for try := 0; ; try++ {
			err := e.p.Delete(ctx, sb.ID)
			if provider.Code(err) == provider.FailedPrecondition && try < e.polls(2) {
				_ = clock.Sleep(ctx, e.clk, e.pace())
				continue
			}
			if err != nil {
				e.t.Errorf("sweep: delete %s: %v", sb.ID, err)
			}
			break
		}
	}
}

// pace is the time between two polls: a tenth of the interval minute.
func (e *env) pace() time.Duration { return e.minute / 10 }

// wait is minutes interval minutes.
func (e *env) wait(minutes float64) time.Duration { return time.Duration(minutes * float64(e.minute)) }

// polls is how many paces cover minutes interval minutes plus fixedSlack.
func (e *env) polls(minutes float64) int { return int((e.wait(minutes)+fixedSlack)/e.pace()) + 1 }

func (e *env) sleep(d time.Duration) {
	e.t.Helper()
	require.NoError(e.t, clock.Sleep(e.ctx, e.clk, d))
}

// waitState polls until the sandbox is in state want, for at most minutes
// interval minutes plus fixedSlack.
func (e *env) waitState(id string, want provider.State, minutes float64) *provider.Sandbox {
	e.t.Helper()
	var last *provider.Sandbox
	for i := e.polls(minutes); i > 0; i-- {
		last = e.get(id)
		if last.State == want {
			return last
		}
		e.sleep(e.pace())
	}
	e.t.Fatalf("sandbox %s is still %s (%s), not %s, after %.1f interval minutes and %v",
		id, last.State, last.ErrorReason, want, minutes, fixedSlack)
	return nil
}

// toolbox is where the sandbox's toolbox answers. The suite runs commands
// in sandboxes through provider.Toolboxer, so a provider must implement it.
func (e *env) toolbox(sb *provider.Sandbox) (string, http.Header) {
	e.t.Helper()
	tb, ok := e.p.(provider.Toolboxer)
	require.True(e.t, ok, "%T does not implement provider.Toolboxer, through which the suite runs commands in sandboxes", e.p)
	base, h, err := tb.Toolbox(e.ctx, sb.ID)
	require.NoError(e.t, err, "toolbox")
	return strings.TrimRight(base, "/"), h
}

type execResult struct {
	ExitCode int    `json:"exitCode"`
	Result   string `json:"result"`
}

// exec runs command in the sandbox through its toolbox.
func (e *env) exec(sb *provider.Sandbox, command string) execResult {
	e.t.Helper()
	base, h := e.toolbox(sb)
	body, err := json.Marshal(map[string]string{"command": command})
	require.NoError(e.t, err)
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, base+"/process/execute", bytes.NewReader(body))
	require.NoError(e.t, err)
	req.Header = h.Clone()
	req.Header.Set("Content-Type", "application/json")
	status, data := e.do(req)
	require.Equal(e.t, http.StatusOK, status, "execute %q: %s", command, data)
	var res execResult
	require.NoError(e.t, json.Unmarshal([]byte(data), &res), "execute answer %s", data)
	return res
}

// do sends req with the harness's client and reads the whole answer.
func (e *env) do(req *http.Request) (int, string) {
	e.t.Helper()
	resp, err := e.h.HTTPClient().Do(req)
	require.NoError(e.t, err, "%s %s", req.Method, req.URL)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp.StatusCode, string(data)
}

func ptr[T any](v T) *T { return &v }

// lines splits command output into trimmed lines.
func lines(s string) []string {
	return strings.Split(strings.TrimRight(s, "\n"), "\n")
}

func describe(sb *provider.Sandbox) string {
	return fmt.Sprintf("%s %s (%s)", sb.ID, sb.State, sb.ErrorReason)
}
