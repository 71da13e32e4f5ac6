package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/conformance"
	"github.com/sandplane/sandplane/conformance/cassette"
	"github.com/sandplane/sandplane/daytona"
	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/simulator"
)

// daytonaExpect is what daytona.Provider promises, on the real service and
// on the simulator alike.
var daytonaExpect = conformance.Expectations{
	Traits: provider.Traits{Name: "daytona", SyncStop: true, ReapIntervalMinutes: 10.0 / 60, NoStopReason: true,
		TTL: true, AutoPause: true, Secrets: true, WarmPools: true},
}

// simSecret is the secret a simulator harness makes in its organization
// before the scenario, outside the recording: a replay knows it by the
// same name and value, which no cassette holds.
var simSecret = conformance.Secret{Name: "cf-mounted", Value: "cf-mounted-value-0123456789"}

// simLogsSnapshot is the snapshot a simulator harness makes before the
// scenario, outside the recording, whose entrypoint prints the line the
// entrypoint-logs scenario looks for; a replay knows it by name.
const simLogsSnapshot = "cf-logs"

// simLogsEntrypoint is simLogsSnapshot's entrypoint.
var simLogsEntrypoint = []string{"sh", "-c", `echo "cf-before $CF_SECRET cf-after"; exec sleep infinity`}

// simSnapshot is the simulator's default snapshot, which the warm-pool
// scenario keeps a pool of.
const simSnapshot = "daytonaio/sandbox:0.6.0-slim"

// simExpect is daytonaExpect on a simulator of the suite's own, live or
// replayed: with simSecret, and a snapshot to keep a warm pool of, since
// no other scenario's creates share its simulator.
func simExpect() conformance.Expectations {
	want := daytonaExpect
	fx := simSecret
	want.Secret = &fx
	want.WarmPoolSnapshot = simSnapshot
	want.LogsSnapshot = simLogsSnapshot
	return want
}

// createSecret makes simSecret in the simulator at base, as a host makes
// its secrets (Daytona's dashboard): not through the provider, so no
// request of the recording carries the value.
func createSecret(ctx context.Context, base string) error {
	body, err := json.Marshal(map[string]string{"name": simSecret.Name, "value": simSecret.Value})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/secret", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+simKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("create the scenario's secret: %s: %s", resp.Status, msg)
	}
	return nil
}

// createLogsSnapshot makes simLogsSnapshot in the simulator at base, as a
// host makes its snapshots, and waits until it is active.
func createLogsSnapshot(ctx context.Context, base string) error {
	body, err := json.Marshal(map[string]any{"name": simLogsSnapshot, "imageName": "example/logs:1", "entrypoint": simLogsEntrypoint})
	if err != nil {
		return err
	}
	if _, err := simCall(ctx, http.MethodPost, base+"/api/snapshots", body, http.StatusOK); err != nil {
		return fmt.Errorf("create the logs snapshot: %w", err)
	}
	for {
		b, err := simCall(ctx, http.MethodGet, base+"/api/snapshots/"+simLogsSnapshot, nil, http.StatusOK)
		if err != nil {
			return fmt.Errorf("read the logs snapshot: %w", err)
		}
		var sn struct {
			State string `json:"state"`
		}
		if err := json.Unmarshal(b, &sn); err != nil {
			return err
		}
		switch sn.State {
		case "active":
			return nil
		case "error", "build_failed":
			return fmt.Errorf("the logs snapshot is %s: %s", sn.State, b)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// simCall sends one request with the simulator's key, outside any
// recording, and returns the body of an answer with status want.
func simCall(ctx context.Context, method, url string, body []byte, want int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+simKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, b)
	}
	return b, nil
}

// simKey is the simulator's API key; recordings scrub it.
const simKey = "conformance-sim-key"

// simProfile gives every transition a short delay, so that the provider's
// waits for started, stopped and gone are exercised.
var simProfile = simulator.Profile{
	Name:    "conformance",
	Create:  simulator.Range{Min: 30 * time.Millisecond, Max: 80 * time.Millisecond},
	Start:   simulator.Range{Min: 30 * time.Millisecond, Max: 80 * time.Millisecond},
	Stop:    simulator.Range{Min: 30 * time.Millisecond, Max: 80 * time.Millisecond},
	Destroy: simulator.Range{Min: 20 * time.Millisecond, Max: 50 * time.Millisecond},
}

// daytonaPair is the provider under test and its unreachable twin, both on
// rt, built the same way for a live run, a recording and a replay, so that
// a replay makes the requests the recording made.
func daytonaPair(t *testing.T, key, apiBase, downBase string, clk clock.Clock, rt http.RoundTripper, minute time.Duration) (p, down *daytona.Provider) {
	t.Helper()
	hc := &http.Client{Transport: rt}
	p, err := daytona.New(daytona.WithAPIKey(key), daytona.WithAPIURL(apiBase+"/api"), daytona.WithClock(clk), daytona.WithHTTPClient(hc), daytona.WithMinute(minute))
	require.NoError(t, err)
	down, err = daytona.New(daytona.WithAPIKey(key), daytona.WithAPIURL(downBase+"/api"), daytona.WithClock(clk), daytona.WithHTTPClient(hc), daytona.WithRetries(1))
	require.NoError(t, err)
	return p, down
}

// recording wraps rt in a recorder when -record is set, and saves the
// cassette of a scenario that passed and whose recording kept within the
// limits and holds no credential (Recorder.Err). replace names further strings to
// write as placeholders, such as a directory of this machine.
func recording(t *testing.T, providerName string, rt http.RoundTripper, key, apiBase, downBase, run string, minute time.Duration, replace map[string]string) http.RoundTripper {
	t.Helper()
	if !*recordFlag {
		return rt
	}
	norm := cassette.NewNormalizer(true)
	norm.Secret(key)
	norm.ReplaceBase(apiBase, cassette.APIBase)
	norm.ReplaceBase(downBase, cassette.UnreachableBase)
	norm.Replace(run, cassette.RunID)
	for old, placeholder := range replace {
		norm.Replace(old, placeholder)
	}
	rec := cassette.NewRecorder(rt, norm)
	path := filepath.Join("testdata", providerName, scenarioName(t)+".replay")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("not recording %s: the scenario failed", path)
			return
		}
		if err := rec.Err(); err != nil {
			t.Errorf("not recording %s: %v", path, err)
			return
		}
		m := cassette.Manifest{Provider: providerName, Test: scenarioName(t), Minute: minute.String()}
		if err := cassette.Save(path, m, rec.Frames()); err != nil {
			t.Errorf("save the cassette: %v", err)
		}
	})
	return rec
}

// simMaker makes a harness of a fresh simulator per scenario, in process,
// whose sandboxes run `sandplane toolbox` as real processes, behind
// daytona.Provider.
func simMaker(ctx context.Context, t *testing.T) (conformance.Harness, error) {
	clk := clock.Real()
	root := t.TempDir()
	t.Cleanup(func() { testdaemon.KillMarked(t, root) })
	be, err := simulator.NewRuntimeBackend(simulator.RuntimeBackendConfig{
		Runtime:   native.New(native.WithClock(clk)),
		Clock:     clk,
		Root:      root,
		Command:   []string{testdaemon.Binary(t), "toolbox"},
		StopGrace: 2 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	sim, err := simulator.New(simulator.Config{
		Clock:             clk,
		APIKeys:           []string{simKey},
		Profile:           simProfile,
		Minute:            *minuteFlag,
		Backend:           be,
		Seed:              1,
		ValidateResponses: true,
		DefaultSnapshot:   simSnapshot,
	})
	if err != nil {
		_ = be.Close()
		return nil, err
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		srv.Close()
		assert.NoError(t, sim.Close())
		assert.Empty(t, sim.SpecViolations(), "simulator answers that do not match Daytona's OpenAPI document")
	})
	if err := createSecret(ctx, srv.URL); err != nil {
		return nil, err
	}
	if err := createLogsSnapshot(ctx, srv.URL); err != nil {
		return nil, err
	}
	downBase := "http://" + testdaemon.FreeAddr(t)
	run := runID()
	// Workloads live under root, which shows in what they print.
	rt := recording(t, "sim", http.DefaultTransport, simKey, srv.URL, downBase, run, *minuteFlag, map[string]string{root: "/sim-root"})
	p, down := daytonaPair(t, simKey, srv.URL, downBase, clk, rt, *minuteFlag)
	return &conformance.Static{
		P: p, Down: down, MinuteLen: *minuteFlag, Clk: clk,
		Client: &http.Client{Transport: rt}, Run: run, Want: simExpect(),
	}, nil
}

// daytonaMaker is the staging spot-check against the real service. Every
// sandbox carries the run id; whatever a scenario left is deleted when the
// run ends, failed or not.
func daytonaMaker(t *testing.T) conformance.HarnessMaker {
	key := os.Getenv(daytona.EnvAPIKey) // what FromEnv reads the key from
	if key == "" {
		t.Fatalf("-provider=daytona runs against the real service: set %s (and %s for another server)", daytona.EnvAPIKey, daytona.EnvAPIURL)
	}
	run := runID()
	t.Logf("run id %s: every sandbox is labelled %s=%s", run, conformance.LabelRun, run)
	sweeper, err := daytona.New(daytona.FromEnv())
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.Background()
		left, err := sweeper.List(ctx, provider.ListOptions{Labels: map[string]string{conformance.LabelRun: run}})
		if err != nil {
			t.Errorf("list what the run left: %v", err)
			return
		}
		for _, sb := range left {
			if err := sweeper.Delete(ctx, sb.ID); err != nil {
				t.Errorf("delete %s: %v", sb.ID, err)
			}
		}
	})
	apiURL := sweeper.URL() // FromEnv's, or the default
	u, err := url.Parse(apiURL)
	require.NoError(t, err)
	if u.Path != "/api" && u.Path != "/api/" {
		t.Fatalf("%s %q: the conformance run wants an API URL ending in /api", daytona.EnvAPIURL, apiURL)
	}
	apiBase := u.Scheme + "://" + u.Host
	return func(ctx context.Context, t *testing.T) (conformance.Harness, error) {
		downBase := "http://" + testdaemon.FreeAddr(t)
		rt := recording(t, "daytona", http.DefaultTransport, key, apiBase, downBase, run, time.Minute, nil)
		p, down := daytonaPair(t, key, apiBase, downBase, clock.Real(), rt, time.Minute)
		return &conformance.Static{
			P: p, Down: down, MinuteLen: time.Minute, Clk: clock.Real(),
			Client: &http.Client{Transport: rt}, Run: run, Want: daytonaExpect,
		}, nil
	}
}

// replayKey is what a replay sends as its API key; scrubbed like any.
const replayKey = "conformance-replay-key"

// replayMaker makes a harness that answers every request from the
// scenario's cassette in dir, on a virtual clock, with no network.
func replayMaker(dir string) conformance.HarnessMaker {
	return func(ctx context.Context, t *testing.T) (conformance.Harness, error) {
		path := filepath.Join(dir, scenarioName(t)+".replay")
		if _, err := os.Stat(path); err != nil {
			return nil, err
		}
		m, frames, err := cassette.Load(path)
		if err != nil {
			return nil, err
		}
		minute, err := time.ParseDuration(m.Minute)
		if err != nil {
			return nil, err
		}
		norm := cassette.NewNormalizer(false)
		norm.Secret(replayKey)
		rp := cassette.NewReplayer(t, frames, norm)
		t.Cleanup(rp.Finish)
		clk := cassette.NewVirtual()
		p, down := daytonaPair(t, replayKey, cassette.APIBase, cassette.UnreachableBase, clk, rp, minute)
		return &conformance.Static{
			P: p, Down: down, MinuteLen: minute, Clk: clk,
			Client: &http.Client{Transport: rp}, Run: cassette.RunID, Want: simExpect(),
		}, nil
	}
}
