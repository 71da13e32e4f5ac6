package simulator

import (
	"encoding/json"
	"net/http"
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

// intervals is what a GET shows of a sandbox's state and idle intervals.
type intervals struct {
	ID                string
	State             string
	AutoStopInterval  int
	AutoPauseInterval int
}

// createRaw creates a sandbox from body and answers what the create shows.
func (h *harness) createRaw(body map[string]any) intervals {
	h.t.Helper()
	code, b, _ := h.raw("POST", "/api/sandbox", body)
	require.Equal(h.t, http.StatusOK, code, string(b))
	var sb intervals
	require.NoError(h.t, json.Unmarshal(b, &sb))
	return sb
}

// intervalsOf is what a GET shows of id (GET is not activity).
func (h *harness) intervalsOf(id string) intervals {
	h.t.Helper()
	code, b, _ := h.raw("GET", "/api/sandbox/"+id, nil)
	require.Equal(h.t, http.StatusOK, code, string(b))
	var sb intervals
	require.NoError(h.t, json.Unmarshal(b, &sb))
	return sb
}

// TestAutoPausePausesAnIdleSandbox, on the fake clock: a sandbox idle for
// its auto-pause interval pauses at the next cron, off lastActivityAt;
// activity postpones it; 0 disables it; setAutoPauseInterval sets it; a
// create that gives only autoPauseInterval has auto-stop 0.
func TestAutoPausePausesAnIdleSandbox(t *testing.T) {
	type act func(h *harness, id string)
	wait := func(d time.Duration) act { return func(h *harness, _ string) { advanceBy(h, d) } }
	busy := func(h *harness, id string) { // activity every minute for five
		for range 5 {
			code, _, _ := h.raw("POST", "/api/sandbox/"+id+"/last-activity", nil)
			require.Equal(h.t, http.StatusCreated, code)
			advanceBy(h, time.Minute)
		}
	}
	set := func(v string, want int) act {
		return func(h *harness, id string) {
			code, body, _ := h.raw("POST", "/api/sandbox/"+id+"/autopause/"+v, nil)
			require.Equal(h.t, want, code, string(body))
		}
	}
	tests := []struct {
		name string
		body map[string]any
		acts []act
		// pauseAfter is the time after the last activity at which the
		// sandbox pauses, its autoPauseInterval; 0 for never.
		pauseAfter time.Duration
		autoStop   int
	}{
		{"auto-pause at create", map[string]any{"autoPauseInterval": 3}, nil, 3 * time.Minute, 0},
		{"with auto-stop 0 given", map[string]any{"autoPauseInterval": 2, "autoStopInterval": 0}, nil, 2 * time.Minute, 0},
		{"activity postpones it", map[string]any{"autoPauseInterval": 2}, []act{busy}, 2 * time.Minute, 0},
		{"0 never pauses", map[string]any{"autoPauseInterval": 0, "autoStopInterval": 0}, nil, 0, 0},
		{"none given: container defaults", map[string]any{}, []act{set("0", http.StatusCreated)}, 0, 15},
		{"set after create", map[string]any{"autoStopInterval": 0}, []act{wait(time.Minute), set("4", http.StatusCreated)}, 4 * time.Minute, 0},
		{"set to 0 after create", map[string]any{"autoPauseInterval": 2}, []act{set("0", http.StatusCreated)}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.Profile = InstantProfile() })
			sb := h.createRaw(tt.body)
			for _, a := range tt.acts {
				a(h, sb.ID)
			}
			got := h.intervalsOf(sb.ID)
			assert.Equal(t, tt.autoStop, got.AutoStopInterval)
			if tt.pauseAfter == 0 {
				assert.Zero(t, got.AutoPauseInterval)
				advanceBy(h, 3*time.Hour)
				if tt.autoStop == 0 {
					assert.Equal(t, "started", h.intervalsOf(sb.ID).State, "never paused")
				}
				return
			}
			assert.Equal(t, int(tt.pauseAfter/time.Minute), got.AutoPauseInterval)
			advanceBy(h, h.lastActivity(sb.ID).Add(tt.pauseAfter).Sub(h.clk.Now())-time.Second)
			assert.Equal(t, "started", h.intervalsOf(sb.ID).State, "paused a second before its interval ran out")
			advanceBy(h, engine.JobPeriod+time.Second) // the cron runs once within a period
			assert.Equal(t, "paused", h.intervalsOf(sb.ID).State, "not paused a cron period after its interval")
		})
	}
}

// lastActivity is id's lastActivityAt.
func (h *harness) lastActivity(id string) time.Time {
	h.t.Helper()
	at, err := time.Parse(time.RFC3339Nano, h.get(id).GetLastActivityAt())
	require.NoError(h.t, err)
	return at
}

// TestAutoPauseRefusals: a negative interval, auto-pause on an ephemeral
// sandbox and auto-pause beside a non-zero auto-stop are 400s, at create
// and in the setters.
func TestAutoPauseRefusals(t *testing.T) {
	h := newHarness(t)
	creates := []struct {
		name string
		body map[string]any
		msg  string
	}{
		{"negative", map[string]any{"autoPauseInterval": -1}, msgAutoPauseNegative},
		{"ephemeral", map[string]any{"autoPauseInterval": 5, "autoDeleteInterval": 0}, msgAutoPauseEphemeral},
		{"beside auto-stop", map[string]any{"autoPauseInterval": 5, "autoStopInterval": 15}, msgAutoPauseExclusive},
	}
	for _, tt := range creates {
		t.Run("create "+tt.name, func(t *testing.T) {
			code, body, _ := h.raw("POST", "/api/sandbox", tt.body)
			require.Equal(t, http.StatusBadRequest, code, string(body))
			assert.Equal(t, tt.msg, h.nestError(body).Message)
		})
	}
	withStop := h.createRaw(map[string]any{"autoStopInterval": 15})
	withPause := h.createRaw(map[string]any{"autoPauseInterval": 5})
	ephemeral := h.createRaw(map[string]any{"autoDeleteInterval": 0})
	setters := []struct {
		name, path, msg string
	}{
		{"negative", "/api/sandbox/" + withPause.ID + "/autopause/-1", msgAutoPauseNegative},
		{"beside auto-stop", "/api/sandbox/" + withStop.ID + "/autopause/5", msgAutoPauseExclusive},
		{"on an ephemeral sandbox", "/api/sandbox/" + ephemeral.ID + "/autopause/5", msgAutoPauseEphemeral},
		{"auto-stop beside auto-pause", "/api/sandbox/" + withPause.ID + "/autostop/15", msgAutoPauseExclusive},
		{"ephemeral beside auto-pause", "/api/sandbox/" + withPause.ID + "/autodelete/0", msgAutoPauseEphemeral},
	}
	for _, tt := range setters {
		t.Run(tt.name, func(t *testing.T) {
			code, body, _ := h.raw("POST", tt.path, nil)
			require.Equal(t, http.StatusBadRequest, code, string(body))
			assert.Equal(t, tt.msg, h.nestError(body).Message)
		})
	}
	code, body, _ := h.raw("POST", "/api/sandbox/nope/autopause/5", nil)
	assert.Equal(t, http.StatusNotFound, code, string(body))
	assert.Equal(t, 5, h.intervalsOf(withPause.ID).AutoPauseInterval, "a refused setter changes nothing")
}

// TestAutoPauseShowsInTheList: the list item carries autoPauseInterval, as
// get does.
func TestAutoPauseShowsInTheList(t *testing.T) {
	h := newHarness(t)
	sb := h.createRaw(map[string]any{"autoPauseInterval": 7})
	code, body, _ := h.raw("GET", "/api/sandbox", nil)
	require.Equal(t, http.StatusOK, code, string(body))
	var list struct{ Items []intervals }
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Items, 1)
	assert.Equal(t, intervals{ID: sb.ID, State: "started", AutoPauseInterval: 7}, list.Items[0])
}

// With a shrunk minute auto-pause shrinks too, like every interval.
func TestMinuteShrinksAutoPause(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Minute = time.Second })
	sb := h.createRaw(map[string]any{"autoPauseInterval": 2})
	h.clk.Advance(1900 * time.Millisecond)
	assert.Equal(t, "started", h.intervalsOf(sb.ID).State)
	h.clk.Advance(300 * time.Millisecond) // the 10 s cron runs every 10/60 s
	assert.Equal(t, "paused", h.intervalsOf(sb.ID).State)
}

// On native processes the auto-pause freezes the sandbox's processes
// (a loop that counts stops counting), and toolbox traffic resumes the
// same ones, the request answered once they run.
func TestNativeAutoPauseFreezesAndToolboxTrafficResumes(t *testing.T) {
	h := nativeHarness(t)
	sb := h.createRaw(map[string]any{"autoPauseInterval": 1})
	require.Equal(t, "started", sb.State)
	code, _, body := h.execute(sb.ID, map[string]any{"command": counterLoop})
	require.Equal(t, http.StatusOK, code, string(body))
	counter := filepath.Join(h.root, "sandboxes", sb.ID, "home", "counter")
	require.Eventually(t, func() bool { return readCount(counter) >= 2 }, 20*time.Second, 20*time.Millisecond, "the loop never counted")

	advanceBy(h, time.Minute+engine.JobPeriod+time.Second)
	h.waitState(sb.ID, apiclient.SANDBOXSTATE_PAUSED)
	frozen := readCount(counter)
	time.Sleep(300 * time.Millisecond) // safe: a running loop writes six times in this while; a frozen one never does
	assert.Equal(t, frozen, readCount(counter), "the counter moved while auto-paused")

	code, res, body := h.execute(sb.ID, map[string]any{"command": "sleep 0.3; cat counter"})
	require.Equal(t, http.StatusOK, code, "toolbox traffic resumes an auto-paused sandbox: %s", body)
	assert.Equal(t, "started", h.intervalsOf(sb.ID).State)
	n, err := strconv.Atoi(strings.TrimSpace(res.Result))
	require.NoError(t, err, res.Result)
	assert.Greater(t, n, frozen, "the loop counts on after the resume, in the same process")

	advanceBy(h, time.Minute+engine.JobPeriod+time.Second)
	h.waitState(sb.ID, apiclient.SANDBOXSTATE_PAUSED)
	started, _, err := h.api.SandboxAPI.StartSandbox(h.ctx, sb.ID).Execute()
	require.NoError(t, err)
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, started.GetState(), "start resumes it too")
}
