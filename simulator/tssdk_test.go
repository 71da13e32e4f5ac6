package simulator

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/provider/clock"
)

// The TypeScript SDKs testdata/ts-sdk drives: the release the simulator
// targets, and the newest one (installed under an alias).
var tsSDKs = []struct{ name, pkg string }{
	{"0.190.1", "@daytonaio/sdk"},
	{"newest", "sdk-latest"},
}

// exitBound is how long the node process may take to end after printing its
// result. An SDK whose event socket failed keeps reconnecting for minutes;
// a healthy one exits at once. Generous, so that only that hang fails it.
const exitBound = 60 * time.Second

// tsSDKDir is testdata/ts-sdk, skipping the test when node or the SDKs are
// missing.
func tsSDKDir(t *testing.T, pkg string) (nodeBin, dir string) {
	t.Helper()
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed; the TypeScript SDK test needs Node 20+")
	}
	dir, err = filepath.Abs(filepath.Join("testdata", "ts-sdk"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(pkg), "package.json")); err != nil {
		t.Skip("the TypeScript SDKs are not installed: run `npm ci` in simulator/testdata/ts-sdk (make test-deps does)")
	}
	return nodeBin, dir
}

// runSDK runs sdk-test.js with the SDK pkg and scenario against the
// simulator at url, with events on (no DAYTONA_USE_DEPRECATED_POLLING). It
// returns the script's result line once the process has ended on its own.
func runSDK(t *testing.T, pkg, scenario, url string, env ...string) []byte {
	t.Helper()
	return runScript(t, "sdk-test.js", pkg, scenario, url, env...)
}

// runScript is runSDK with another script of testdata/ts-sdk.
func runScript(t *testing.T, script, pkg, scenario, url string, env ...string) []byte {
	t.Helper()
	nodeBin, dir := tsSDKDir(t, pkg)
	// Generous, only so that a wedged run cannot hang the suite.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"DAYTONA_API_URL="+url+"/api",
		"DAYTONA_API_KEY=ts-sdk-key",
		"SANDPLANE_SIM_ADMIN_KEY=ts-sdk-admin-key",
		"DAYTONA_TARGET=",
		"DAYTONA_USE_DEPRECATED_POLLING=",
		"SDK_PACKAGE="+pkg,
		"SDK_SCENARIO="+scenario,
	)
	cmd.Env = append(cmd.Env, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	// The result is the last line, printed after the last call; the
	// clock for the exit starts there.
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var out []string
	for line := range lines {
		out = append(out, line)
		if strings.HasPrefix(line, `{"ok":true`) {
			break
		}
	}
	go func() {
		for line := range lines {
			t.Logf("node, after its result: %s", line)
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		require.NoError(t, err, "node %s failed:\n%s\n%s", script, strings.Join(out, "\n"), stderr.String())
	case <-time.After(exitBound):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("node kept running %v after its last call: the SDK's event socket holds it open\n%s", exitBound, stderr.String())
	}
	t.Logf("node %s (%s, %s): %s", script, pkg, scenario, strings.Join(out, "\n"))
	require.NotEmpty(t, out, stderr.String())
	return []byte(out[len(out)-1])
}

// tsHarness is a simulator whose sandboxes run the real toolbox natively,
// on a loopback server, configured further by configure.
func tsHarness(t *testing.T, configure ...func(*Config)) (*Simulator, string) {
	t.Helper()
	be, err := NewRuntimeBackend(RuntimeBackendConfig{
		Runtime: native.New(),
		Root:    t.TempDir(),
		Command: []string{toolboxBinary(t)},
	})
	require.NoError(t, err)
	cfg := Config{Backend: be, ValidateResponses: true, APIKeys: []string{"ts-sdk-key"}, AdminKey: "ts-sdk-admin-key"}
	for _, f := range configure {
		f(&cfg)
	}
	sim, err := New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, sim.Close())
	})
	return sim, srv.URL
}

// TestOfficialTypeScriptSDK runs testdata/ts-sdk/sdk-test.js, which drives a
// whole lifecycle with @daytonaio/sdk, pinned and newest, against a
// simulator whose sandboxes run the real toolbox. `make test-deps` installs
// the SDKs (npm ci) first.
func TestOfficialTypeScriptSDK(t *testing.T) {
	for _, sdk := range tsSDKs {
		t.Run(sdk.name, func(t *testing.T) {
			tsSDKDir(t, sdk.pkg)
			sim, url := tsHarness(t)
			out := runSDK(t, sdk.pkg, "lifecycle", url)
			var res struct {
				OK   bool   `json:"ok"`
				ID   string `json:"id"`
				Seen struct {
					Created string `json:"created"`
					Stopped string `json:"stopped"`
					Listed  int    `json:"listed"`
				} `json:"seen"`
			}
			require.NoError(t, json.Unmarshal(out, &res), string(out))
			assert.True(t, res.OK)
			assert.Equal(t, "started", res.Seen.Created)
			assert.Equal(t, "stopped", res.Seen.Stopped)
			assert.Equal(t, 1, res.Seen.Listed)

			counts := sim.calls.counts(everyOrg)
			for _, op := range []string{"createSandbox", "toolbox", "stopSandbox", "startSandbox", "updateLastActivity",
				"setAutostopInterval", "getPortPreviewUrl", "listSandboxes", "deleteSandbox", "getSandbox"} {
				assert.NotZero(t, counts[op], "the SDK run made no %s call", op)
			}
			assertCallsSucceeded(t, sim)
			assert.Empty(t, sim.SpecViolations())
			if sdk.name == "newest" {
				assert.NotZero(t, sim.events.accepted.Load(), "the newest SDK subscribes to events over socket.io")
			}
		})
	}
}

// assertCallsSucceeded checks that every call the SDK made succeeded but
// the ones a run expects to fail.
func assertCallsSucceeded(t *testing.T, sim *Simulator, expected ...string) {
	t.Helper()
	for _, c := range sim.Calls() {
		switch {
		case c.Operation == "getSandbox" && c.Status == 404:
			// the reads after delete, until the sandbox is gone
		case contains(expected, c.Operation):
		default:
			assert.Less(t, c.Status, 300, "%s %s (%s) answered %d", c.Method, c.Path, c.Operation, c.Status)
		}
	}
}

// The newest SDK, events on, through snapshots, shared volumes, linked
// sandboxes, fork, SSH, metrics and resize.
func TestOfficialTypeScriptSDKResources(t *testing.T) {
	sdk := tsSDKs[1]
	tsSDKDir(t, sdk.pkg)
	sim, url := tsHarness(t)
	out := runSDK(t, sdk.pkg, "resources", url)
	var res struct {
		OK   bool `json:"ok"`
		Seen struct {
			Snapshot   string `json:"snapshot"`
			Volume     string `json:"volume"`
			LinkedGone bool   `json:"linkedGone"`
		} `json:"seen"`
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	assert.True(t, res.OK)
	assert.Equal(t, "active", res.Seen.Snapshot)
	assert.Equal(t, "shared-by-a\n", res.Seen.Volume)
	assert.True(t, res.Seen.LinkedGone)
	counts := sim.calls.counts(everyOrg)
	for _, op := range []string{"createSnapshot", "getSnapshot", "getAllSnapshots", "removeSnapshot", "createSandboxSnapshot",
		"createVolume", "getVolumeByName", "listVolumes", "deleteVolume", "updateNetworkSettings", "createSshAccess",
		"validateSshAccess", "revokeSshAccess", "getSandboxMetrics", "resizeSandbox", "forkSandbox", "pauseSandbox"} {
		assert.NotZero(t, counts[op], "the SDK run made no %s call", op)
	}
	assertCallsSucceeded(t, sim, "getVolumeByName")
	assert.Empty(t, sim.SpecViolations())
}

// The newest SDK creates with a TTL, reads it back on get and list,
// clears and sets it with setTtl, and deletes, on the v0.205.1 shapes.
func TestOfficialTypeScriptSDKTTL(t *testing.T) {
	sdk := tsSDKs[1]
	tsSDKDir(t, sdk.pkg)
	sim, url := tsHarness(t)
	out := runSDK(t, sdk.pkg, "ttl", url)
	var res struct {
		OK   bool `json:"ok"`
		Seen struct {
			Created                       string
			CreatedTTL, GotTTL, ListedTTL bool
			ClearedTTL, ResetTTL          bool
			Listed                        int
			Refused                       string
		} `json:"seen"`
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	assert.True(t, res.OK)
	assert.Equal(t, "started", res.Seen.Created)
	assert.Equal(t, 1, res.Seen.Listed)
	for what, ok := range map[string]bool{"created": res.Seen.CreatedTTL, "got": res.Seen.GotTTL, "listed": res.Seen.ListedTTL,
		"cleared by setTtl(0)": res.Seen.ClearedTTL, "set again": res.Seen.ResetTTL} {
		assert.True(t, ok, "autoDestroyAt %s", what)
	}
	assert.Contains(t, res.Seen.Refused, "non-negative", "the SDK refuses a negative TTL itself")
	counts := sim.calls.counts(everyOrg)
	for _, op := range []string{"createSandbox", "getSandbox", "listSandboxes", "setTtl", "deleteSandbox"} {
		assert.NotZero(t, counts[op], "the SDK run made no %s call", op)
	}
	assert.EqualValues(t, 2, counts["setTtl"], "the SDK checks a negative TTL before calling")
	assertCallsSucceeded(t, sim)
	assert.Empty(t, sim.SpecViolations())
}

// The newest SDK's auto-pause, against a simulator whose minute is half a
// second: create with autoPauseInterval, setAutoPauseInterval, the
// server's refusal of auto-stop beside it, an idle pause seen through
// reads, and executeCommand resuming the paused sandbox.
func TestOfficialTypeScriptSDKAutoPause(t *testing.T) {
	sdk := tsSDKs[1]
	tsSDKDir(t, sdk.pkg)
	sim, url := tsHarness(t, func(c *Config) { c.Minute = 500 * time.Millisecond })
	out := runSDK(t, sdk.pkg, "autopause", url)
	var res struct {
		OK   bool `json:"ok"`
		Seen struct {
			Created               struct{ AutoPauseInterval, AutoStopInterval int }
			Cleared, Set          int
			RefusedLocally        string
			RefusedBesideAutoStop string
			Paused, ResumedBy     string
		} `json:"seen"`
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	assert.True(t, res.OK)
	assert.Equal(t, 1, res.Seen.Created.AutoPauseInterval)
	assert.Equal(t, 0, res.Seen.Created.AutoStopInterval, "auto-pause alone turns the default auto-stop off")
	assert.Equal(t, 0, res.Seen.Cleared)
	assert.Equal(t, 1, res.Seen.Set)
	assert.Contains(t, res.Seen.RefusedLocally, "non-negative", "the SDK refuses a negative interval itself")
	assert.Equal(t, msgAutoPauseExclusive, res.Seen.RefusedBesideAutoStop)
	assert.Equal(t, "paused", res.Seen.Paused)
	assert.Equal(t, "awake", res.Seen.ResumedBy, "the command ran in the resumed sandbox")
	counts := sim.calls.counts(everyOrg)
	assert.EqualValues(t, 2, counts["setAutoPauseInterval"], "the SDK checks a negative interval before calling")
	assertCallsSucceeded(t, sim, "setAutostopInterval")
	assert.Empty(t, sim.SpecViolations())
}

// The newest SDK's error classes, by instanceof, from the API's bodies
// (not found, conflict, validation, a rate-limit fault) and the toolbox's
// (command timeout, missing file, repository and session), with the
// status, code and source the SDK read.
func TestOfficialTypeScriptSDKErrors(t *testing.T) {
	sdk := tsSDKs[1]
	tsSDKDir(t, sdk.pkg)
	sim, url := tsHarness(t)
	out := runSDK(t, sdk.pkg, "errors", url)
	type class struct {
		OK         bool     `json:"ok"`
		Failed     []string `json:"failed"`
		Name       string   `json:"name"`
		StatusCode int      `json:"statusCode"`
		Code       string   `json:"code"`
		Source     string   `json:"source"`
	}
	var res struct {
		OK   bool `json:"ok"`
		Seen struct {
			Classes      map[string]class `json:"classes"`
			LocalRefusal bool             `json:"localRefusal"`
		} `json:"seen"`
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	assert.True(t, res.OK)
	want := map[string]class{
		"notFound":        {Name: "DaytonaNotFoundError", StatusCode: 404, Code: "NOT_FOUND", Source: "DAYTONA_API"},
		"conflict":        {Name: "DaytonaConflictError", StatusCode: 409, Code: "CONFLICT", Source: "DAYTONA_API"},
		"validation":      {Name: "DaytonaValidationError", StatusCode: 400, Code: "BAD_REQUEST", Source: "DAYTONA_API"},
		"rateLimit":       {Name: "DaytonaRateLimitError", StatusCode: 429, Code: "TOO_MANY_REQUESTS", Source: "DAYTONA_API"},
		"timeout":         {Name: "DaytonaProcessExecutionTimeoutError", StatusCode: 408, Code: "PROCESS_EXECUTION_TIMEOUT", Source: "DAYTONA_DAEMON"},
		"fileNotFound":    {Name: "DaytonaFileNotFoundError", StatusCode: 404, Code: "FILE_NOT_FOUND", Source: "DAYTONA_DAEMON"},
		"gitRepoNotFound": {Name: "DaytonaGitRepoNotFoundError", StatusCode: 404, Code: "GIT_REPO_NOT_FOUND", Source: "DAYTONA_DAEMON"},
		"processNotFound": {Name: "DaytonaProcessNotFoundError", StatusCode: 404, Code: "PROCESS_NOT_FOUND", Source: "DAYTONA_DAEMON"},
	}
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			got, ok := res.Seen.Classes[name]
			require.True(t, ok, "the script provoked no %s", name)
			assert.True(t, got.OK, "not an instance of %v", got.Failed)
			w.OK, w.Failed = true, got.Failed
			assert.Equal(t, w, got)
		})
	}
	assert.True(t, res.Seen.LocalRefusal, "a negative interval is the SDK's own DaytonaInvalidArgumentError")
	assert.Empty(t, sim.SpecViolations())
}

// The newest SDK's pre-signed file URLs, used with plain fetch and no API
// key against a simulator whose sandboxes run the real toolbox: uploads
// (multipart and raw) and downloads go through, a rotated key ends the URLs
// signed before, expiry holds. The requests the script expects refused are
// the only calls that fail, each a toolbox 401 on a file URL, never
// forwarded.
func TestOfficialTypeScriptSDKFileURLs(t *testing.T) {
	sdk := tsSDKs[1]
	tsSDKDir(t, sdk.pkg)
	sim, url := tsHarness(t)
	out := runSDK(t, sdk.pkg, "file-urls", url)
	var res struct {
		OK   bool   `json:"ok"`
		ID   string `json:"id"`
		Seen struct {
			Refused  int               `json:"refused"`
			Uploaded map[string]string `json:"uploaded"`
		} `json:"seen"`
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	assert.True(t, res.OK)
	assert.Equal(t, map[string]string{"name": "hello.txt", "path": "signed/hello.txt", "type": "file"}, res.Seen.Uploaded)
	counts := sim.calls.counts(everyOrg)
	assert.NotZero(t, counts["getSandboxSigningKey"], "the SDK fetched the signing key")
	assert.EqualValues(t, 1, counts["rotateSigningKey"], "the SDK rotated the key once")
	refused, signed := 0, 0
	prefix := "/toolbox/" + res.ID + "/files/"
	for _, c := range sim.Calls() {
		if c.Operation == "toolbox" && (c.Path == prefix+"download" || c.Path == prefix+"upload-v2") {
			signed++
		}
		switch {
		case c.Operation == "getSandbox" && c.Status == 404:
		case c.Status >= 300:
			refused++
			assert.Equal(t, "toolbox", c.Operation, "%s %s answered %d", c.Method, c.Path, c.Status)
			assert.Equal(t, http.StatusUnauthorized, c.Status, "%s %s", c.Method, c.Path)
			assert.Contains(t, []string{prefix + "download", prefix + "upload-v2"}, c.Path)
		}
	}
	assert.Equal(t, res.Seen.Refused, refused, "the simulator refused what the script expected refused, and nothing else")
	assert.GreaterOrEqual(t, signed, 10, "the run's file-URL requests")
	assert.Empty(t, sim.SpecViolations())
}

// The newest SDK against the docker backend: networkBlockAll cuts a sandbox
// off from a host beyond its network, and lifting it opens the way again.
func TestOfficialTypeScriptSDKDockerNetwork(t *testing.T) {
	sdk := tsSDKs[1]
	tsSDKDir(t, sdk.pkg)
	h, _, _ := dockerExtHarness(t)
	outside := outsideHost(t)
	out := runSDKWithKey(t, h, sdk.pkg, "docker-network", "OUTSIDE_URL=http://"+outside+"/")
	assert.Contains(t, string(out), `"ok":true`)
}

// runSDKWithKey is runSDK against a test harness, whose API takes any key.
func runSDKWithKey(t *testing.T, h *harness, pkg, scenario string, env ...string) []byte {
	t.Helper()
	return runSDK(t, pkg, scenario, h.srv.URL, append(env, "SANDPLANE_SIM_ADMIN_KEY="+testAdminKey)...)
}

// Declarative images with the official SDKs: on the docker backend a
// sandbox and a snapshot are built from Dockerfile content with the
// Engine API, their build logs streamed to onSnapshotCreateLogs and onLogs;
// on the native backend both are refused, naming the fix.
func TestOfficialTypeScriptSDKDeclarativeBuilds(t *testing.T) {
	for _, sdk := range tsSDKs {
		t.Run(sdk.name, func(t *testing.T) {
			tsSDKDir(t, sdk.pkg)
			t.Run("docker", func(t *testing.T) {
				// The SDK follows a build's logs only once its poll, every
				// second, finds the build under way. Daytona's builds last
				// 10-30 s; an engine build from its cache here can end
				// between two polls, so the build state lasts 1.5 s at least,
				// on the real clock the SDK polls by.
				h, _, tag := dockerExtHarness(t, func(c *Config) {
					c.Clock = clock.Real()
					c.Profile = Profile{Name: "builds-outlast-a-poll", Build: Range{Min: 1500 * time.Millisecond, Max: 1500 * time.Millisecond}}
				})
				out := runSDKWithKey(t, h, sdk.pkg, "docker-build", "BASE_IMAGE="+tag)
				assert.Contains(t, string(out), `"ok":true`)
			})
			t.Run("native", func(t *testing.T) {
				h := nativeHarness(t)
				out := runSDKWithKey(t, h, sdk.pkg, "native-build")
				assert.Contains(t, string(out), `"ok":true`)
			})
		})
	}
}
