package simulator

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/simulator/internal/engine"
)

// pause pauses id through the Go api-client and returns the answer's state.
func (h *harness) pause(id string) apiclient.SandboxState {
	h.t.Helper()
	sb, _, err := h.api.SandboxAPI.PauseSandbox(h.ctx, id).Execute()
	require.NoError(h.t, err)
	return sb.GetState()
}

// createOnFakeClock creates a sandbox whose create takes time on the fake
// clock, advancing it until the create answers started.
func (h *harness) createOnFakeClock() *apiclient.Sandbox {
	h.t.Helper()
	out := h.createAsync(apiclient.CreateSandbox{})
	h.clk.Advance(h.sim.cfg.Profile.Create.Max)
	res := <-out
	require.NoError(h.t, res.err)
	require.Equal(h.t, apiclient.SANDBOXSTATE_STARTED, res.sb.GetState())
	return res.sb
}

// The state machine on the none backend, on the fake clock: pausing, then
// paused; start resumes through resuming; stop and delete of a paused
// sandbox work; the toolbox refuses a paused sandbox.
func TestPauseAndResumeOnTheNoneBackend(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Profile = engine.DaytonaProfile() })
	api := h.api.SandboxAPI
	sb := h.createOnFakeClock()

	code, body, header := h.raw("POST", "/api/sandbox/"+sb.Id+"/pause", nil)
	require.Equal(t, http.StatusOK, code, string(body))
	assert.Contains(t, string(body), `"state":"pausing"`)
	assert.Contains(t, header.Get(warningHeader), "the pause is a change of state only")
	h.clk.Advance(h.sim.cfg.Profile.Pause.Max)
	require.Equal(t, apiclient.SANDBOXSTATE_PAUSED, h.get(sb.Id).GetState())
	assert.Equal(t, apiclient.SANDBOXDESIREDSTATE_PAUSED, h.get(sb.Id).GetDesiredState())

	// Toolbox traffic resumes it, and the request waits for the resume.
	answered := make(chan int, 1)
	waiters := h.clk.Waiters()
	go func() {
		code, _, _ := h.raw("POST", "/toolbox/"+sb.Id+"/process/execute", map[string]any{"command": "true"})
		answered <- code
	}()
	require.NoError(t, h.clk.BlockUntilWaiters(t.Context(), waiters+2), "the request waits on the resume's step")
	assert.Equal(t, apiclient.SANDBOXSTATE_RESUMING, h.get(sb.Id).GetState())
	h.clk.Advance(h.sim.cfg.Profile.Resume.Max)
	assert.Equal(t, http.StatusServiceUnavailable, <-answered, "resumed, the request reaches the none backend's missing workload")
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, h.get(sb.Id).GetState())
	assert.Equal(t, apiclient.SANDBOXSTATE_PAUSING, h.pause(sb.Id))
	h.clk.Advance(h.sim.cfg.Profile.Pause.Max)
	require.Equal(t, apiclient.SANDBOXSTATE_PAUSED, h.get(sb.Id).GetState())

	resumed := make(chan *apiclient.Sandbox, 1)
	waiters = h.clk.Waiters()
	go func() {
		sb, _, err := api.StartSandbox(h.ctx, sb.Id).Execute()
		assert.NoError(t, err)
		resumed <- sb
	}()
	require.NoError(t, h.clk.BlockUntilWaiters(t.Context(), waiters+2), "the start waits on its step and its 30 s")
	assert.Equal(t, apiclient.SANDBOXSTATE_RESUMING, h.get(sb.Id).GetState())
	h.clk.Advance(h.sim.cfg.Profile.Resume.Max)
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, (<-resumed).GetState())

	for _, end := range []struct {
		name string
		do   func(id string) error
		want func(id string) bool
	}{
		{"stop", func(id string) error { _, _, err := api.StopSandbox(h.ctx, id).Execute(); return err },
			func(id string) bool { return h.get(id).GetState() == apiclient.SANDBOXSTATE_STOPPED }},
		{"delete", func(id string) error { _, _, err := api.DeleteSandbox(h.ctx, id).Execute(); return err },
			func(id string) bool {
				code, _, _ := h.raw("GET", "/api/sandbox/"+id, nil)
				return code == http.StatusNotFound
			}},
	} {
		t.Run(end.name+" of a paused sandbox", func(t *testing.T) {
			x := h.createOnFakeClock()
			assert.Equal(t, apiclient.SANDBOXSTATE_PAUSING, h.pause(x.Id))
			h.clk.Advance(h.sim.cfg.Profile.Pause.Max)
			require.NoError(t, end.do(x.Id))
			h.clk.Advance(time.Second)
			assert.True(t, end.want(x.Id))
		})
	}
}

// Pause on a sandbox that is not started is Daytona's 400; one while a
// change is in progress its 409.
func TestPauseInTheWrongState(t *testing.T) {
	h := newHarness(t)
	api := h.api.SandboxAPI
	started := h.create(apiclient.CreateSandbox{})
	stopped := h.create(apiclient.CreateSandbox{})
	_, _, err := api.StopSandbox(h.ctx, stopped.Id).Execute()
	require.NoError(t, err)
	h.advanceUntil(time.Millisecond, time.Second, func() bool { return h.get(stopped.Id).GetState() == apiclient.SANDBOXSTATE_STOPPED })
	paused := h.create(apiclient.CreateSandbox{})
	h.pause(paused.Id)
	require.Equal(t, apiclient.SANDBOXSTATE_PAUSED, h.get(paused.Id).GetState(), "the instant profile pauses at once")

	tests := []struct {
		name, id string
		status   int
		message  string
	}{
		{"stopped", stopped.Id, http.StatusBadRequest, msgNotPausable},
		{"paused", paused.Id, http.StatusBadRequest, msgNotPausable},
		{"unknown", "nope", http.StatusNotFound, "Sandbox with ID or name nope not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, resp, err := api.PauseSandbox(h.ctx, tt.id).Execute()
			status, msg := apiStatus(t, resp, err)
			assert.Equal(t, tt.status, status)
			assert.Equal(t, tt.message, msg)
		})
	}
	h.pause(started.Id)
	_, resp, err := api.ArchiveSandbox(h.ctx, started.Id).Execute()
	status, _ := apiStatus(t, resp, err)
	assert.Equal(t, http.StatusBadRequest, status, "a paused sandbox is not stopped, so not archived")
}

// counterLoop, run in the background of a sandbox, writes its pid to
// counter.pid and an ever-growing count to counter every 50 ms.
const counterLoop = `sh -c 'echo $$ > counter.pid; i=0; while :; do i=$((i+1)); echo $i > counter.tmp; mv counter.tmp counter; sleep 0.05; done' </dev/null >counter.log 2>&1 &`

// readCount is the count in file, 0 before the first write.
func readCount(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// On native processes a pause freezes the sandbox's every process; start
// lets the same ones run on.
func TestNativePauseFreezesTheWorkload(t *testing.T) {
	h := nativeHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())
	code, _, body := h.execute(sb.Id, map[string]any{"command": counterLoop})
	require.Equal(t, http.StatusOK, code, string(body))
	home := filepath.Join(h.root, "sandboxes", sb.Id, "home")
	counter := filepath.Join(home, "counter")
	require.Eventually(t, func() bool { return readCount(counter) >= 2 }, 20*time.Second, 20*time.Millisecond, "the loop never counted")
	pid, err := os.ReadFile(filepath.Join(home, "counter.pid"))
	require.NoError(t, err)

	h.pause(sb.Id)
	h.waitState(sb.Id, apiclient.SANDBOXSTATE_PAUSED)
	frozen := readCount(counter)
	time.Sleep(300 * time.Millisecond) // safe: a running loop writes six times in this while; a frozen one never does
	assert.Equal(t, frozen, readCount(counter), "the counter moved while paused")

	started, _, err := h.api.SandboxAPI.StartSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, started.GetState(), started.GetErrorReason())
	require.Eventually(t, func() bool { return readCount(counter) > frozen }, 20*time.Second, 20*time.Millisecond,
		"the counter never moved after the resume")
	code, res, body := h.execute(sb.Id, map[string]any{"command": "kill -0 " + strings.TrimSpace(string(pid)) + " && cat counter.pid"})
	require.Equal(t, http.StatusOK, code, string(body))
	assert.Equal(t, 0, res.ExitCode, "the loop's process runs on after the resume: %s", res.Result)
	assert.Equal(t, string(pid), res.Result, "the same process, with its memory")

	// A paused sandbox stops: the backend thaws it, so its processes see
	// the SIGTERM.
	h.pause(sb.Id)
	h.waitState(sb.Id, apiclient.SANDBOXSTATE_PAUSED)
	_, _, err = h.api.SandboxAPI.StopSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	h.waitState(sb.Id, apiclient.SANDBOXSTATE_STOPPED)
	_, _, err = h.api.SandboxAPI.DeleteSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	h.waitGone(sb.Id)
}

// On docker (the backend with the engine's client) a pause is the engine's: the container shows Paused,
// toolbox traffic unpauses it, and so does start, the same processes each time.
func TestDockerPauseFreezesTheContainer(t *testing.T) {
	h, cli, _ := dockerExtHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, sb.GetState(), sb.GetErrorReason())
	code, _, body := h.proxyExecute(sb.Id, counterLoop)
	require.Equal(t, http.StatusOK, code, string(body))
	count := func() int {
		code, res, body := h.proxyExecute(sb.Id, "cat counter")
		require.Equal(t, http.StatusOK, code, string(body))
		n, _ := strconv.Atoi(strings.TrimSpace(res.Result))
		return n
	}
	require.Eventually(t, func() bool { return count() >= 2 }, 20*time.Second, 50*time.Millisecond, "the loop never counted")
	_, pid, _ := h.proxyExecute(sb.Id, "cat counter.pid")

	h.pause(sb.Id)
	h.waitState(sb.Id, apiclient.SANDBOXSTATE_PAUSED)
	assert.True(t, containerOf(t, cli, h, sb.Id).State.Paused, "the container is paused")
	code, _, body = h.proxyExecute(sb.Id, "true")
	assert.Equal(t, http.StatusOK, code, "toolbox traffic resumes a paused sandbox: %s", body)
	assert.False(t, containerOf(t, cli, h, sb.Id).State.Paused, "the toolbox's request unpaused the container")
	h.pause(sb.Id)
	h.waitState(sb.Id, apiclient.SANDBOXSTATE_PAUSED)
	assert.True(t, containerOf(t, cli, h, sb.Id).State.Paused, "the container is paused again")

	started, _, err := h.api.SandboxAPI.StartSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, started.GetState(), started.GetErrorReason())
	assert.False(t, containerOf(t, cli, h, sb.Id).State.Paused, "the container runs again")
	frozen := count()
	require.Eventually(t, func() bool { return count() > frozen }, 20*time.Second, 50*time.Millisecond, "the counter never moved after the resume")
	code, res, body := h.proxyExecute(sb.Id, "kill -0 "+strings.TrimSpace(pid.Result)+" && cat counter.pid")
	require.Equal(t, http.StatusOK, code, string(body))
	assert.Equal(t, pid.Result, res.Result, "the same process runs on")

	h.pause(sb.Id)
	h.waitState(sb.Id, apiclient.SANDBOXSTATE_PAUSED)
	_, _, err = h.api.SandboxAPI.StopSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	h.waitState(sb.Id, apiclient.SANDBOXSTATE_STOPPED)
	assert.Equal(t, "exited", containerOf(t, cli, h, sb.Id).State.Status)
}
