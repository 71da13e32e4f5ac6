package simulator

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/simulator/internal/engine"
)

// ttlState is what a GET shows of a sandbox's TTL: whether it is going
// (404, or desired destroyed) and its autoDestroyAt.
func ttlState(h *harness, id string) (going bool, autoDestroyAt string) {
	h.t.Helper()
	code, body, _ := h.raw("GET", "/api/sandbox/"+id, nil)
	if code == http.StatusNotFound {
		return true, ""
	}
	require.Equal(h.t, http.StatusOK, code, string(body))
	var sb struct{ DesiredState, AutoDestroyAt string }
	require.NoError(h.t, json.Unmarshal(body, &sb))
	return sb.DesiredState == "destroyed", sb.AutoDestroyAt
}

// advanceBy steps the fake clock by d in ten-second steps, so that the
// crons run on the way.
func advanceBy(h *harness, d time.Duration) {
	for ; d > 0; d -= 10 * time.Second {
		h.clk.Advance(min(d, 10*time.Second))
	}
}

// TestTTLDestroysTheSandboxWhateverItsActivity: a TTL set at create or by
// setTtl destroys the sandbox that many minutes after it was set, stopped
// or busy with activity; 0 clears it; a setTtl re-anchors it.
func TestTTLDestroysTheSandboxWhateverItsActivity(t *testing.T) {
	type act func(h *harness, id string)
	setTTL := func(v string, want int) act {
		return func(h *harness, id string) {
			code, body, _ := h.raw("POST", "/api/sandbox/"+id+"/ttl/"+v, nil)
			require.Equal(h.t, want, code, string(body))
		}
	}
	wait := func(d time.Duration) act { return func(h *harness, _ string) { advanceBy(h, d) } }
	stop := func(h *harness, id string) {
		code, body, _ := h.raw("POST", "/api/sandbox/"+id+"/stop", nil)
		require.Less(h.t, code, 300, string(body))
	}
	busy := func(h *harness, id string) { // activity every minute for ten
		for range 10 {
			code, _, _ := h.raw("POST", "/api/sandbox/"+id+"/last-activity", nil)
			require.Equal(h.t, http.StatusCreated, code)
			advanceBy(h, time.Minute)
		}
	}
	tests := []struct {
		name string
		body map[string]any
		acts []act
		// deadline is the autoDestroyAt after the acts, from the create; 0
		// for none.
		deadline time.Duration
	}{
		{"no TTL", map[string]any{"autoStopInterval": 0}, []act{wait(3 * time.Hour)}, 0},
		{"ttlMinutes 0 is none", map[string]any{"ttlMinutes": 0, "autoStopInterval": 0}, []act{wait(3 * time.Hour)}, 0},
		{"TTL at create", map[string]any{"ttlMinutes": 30, "autoStopInterval": 0}, nil, 30 * time.Minute},
		{"activity does not extend it", map[string]any{"ttlMinutes": 12, "autoStopInterval": 0}, []act{busy}, 12 * time.Minute},
		{"stopped, it still goes", map[string]any{"ttlMinutes": 20}, []act{stop}, 20 * time.Minute},
		{"setTtl re-anchors at now", map[string]any{"ttlMinutes": 5, "autoStopInterval": 0},
			[]act{wait(3 * time.Minute), setTTL("10", http.StatusOK)}, 13 * time.Minute},
		{"setTtl on a sandbox without one", map[string]any{"autoStopInterval": 0},
			[]act{wait(time.Minute), setTTL("2", http.StatusOK)}, 3 * time.Minute},
		{"setTtl 0 clears it", map[string]any{"ttlMinutes": 5, "autoStopInterval": 0},
			[]act{setTTL("0", http.StatusOK), wait(time.Hour)}, 0},
		{"a negative setTtl is refused", map[string]any{"ttlMinutes": 5, "autoStopInterval": 0},
			[]act{setTTL("-1", http.StatusBadRequest), setTTL("1.5", http.StatusBadRequest), setTTL("x", http.StatusBadRequest)}, 5 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.Profile = InstantProfile() })
			created := h.clk.Now()
			code, body, _ := h.raw("POST", "/api/sandbox", tt.body)
			require.Equal(t, http.StatusOK, code, string(body))
			var sb struct{ ID string }
			require.NoError(t, json.Unmarshal(body, &sb))
			for _, a := range tt.acts {
				a(h, sb.ID)
			}
			going, at := ttlState(h, sb.ID)
			require.False(t, going, "gone before its deadline")
			if tt.deadline == 0 {
				assert.Empty(t, at)
				return
			}
			assert.Equal(t, iso(created.Add(tt.deadline)), at)
			advanceBy(h, created.Add(tt.deadline).Sub(h.clk.Now())-time.Second)
			going, _ = ttlState(h, sb.ID)
			assert.False(t, going, "gone a second before its deadline")
			advanceBy(h, engine.JobPeriod+time.Second) // the cron runs once within a period
			going, _ = ttlState(h, sb.ID)
			assert.True(t, going, "not gone a cron period after its deadline")
		})
	}
}

// A create's ttlMinutes must be a whole number from 0, with the
// class-validator wording for its type.
func TestCreateRefusesABadTTL(t *testing.T) {
	h := newHarness(t)
	for _, v := range []any{-1, "soon", 1.5} {
		code, body, _ := h.raw("POST", "/api/sandbox", map[string]any{"ttlMinutes": v})
		assert.Equal(t, http.StatusBadRequest, code, "ttlMinutes %v: %s", v, body)
	}
}

// With a shrunk minute the TTL shrinks too, like every interval.
func TestMinuteShrinksTheTTL(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Minute = time.Second })
	code, body, _ := h.raw("POST", "/api/sandbox", map[string]any{"ttlMinutes": 2, "autoStopInterval": 0})
	require.Equal(t, http.StatusOK, code, string(body))
	var sb struct{ ID string }
	require.NoError(t, json.Unmarshal(body, &sb))
	h.clk.Advance(1900 * time.Millisecond)
	going, _ := ttlState(h, sb.ID)
	assert.False(t, going)
	h.clk.Advance(300 * time.Millisecond) // the 10 s cron runs every 10/60 s
	going, _ = ttlState(h, sb.ID)
	assert.True(t, going)
}
