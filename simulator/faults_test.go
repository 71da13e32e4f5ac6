package simulator

import (
	"encoding/json"
	"math"
	"net/http"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

func TestFaultScriptedStatus(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{Name: ptr("target")})
	other := h.create(apiclient.CreateSandbox{})
	h.sim.AddFault(Fault{Op: "getSandbox", Sandbox: "target", After: 1, Times: 2, Status: http.StatusServiceUnavailable})

	code, _, _ := h.raw("GET", "/api/sandbox/"+other.Id, nil)
	assert.Equal(t, http.StatusOK, code, "another sandbox is not matched")
	code, _, _ = h.raw("GET", "/api/sandbox/"+sb.Id, nil)
	assert.Equal(t, http.StatusOK, code, "after: 1 lets the first call through")
	for i := 0; i < 2; i++ {
		code, body, _ := h.raw("GET", "/api/sandbox/"+sb.Id, nil)
		assert.Equal(t, http.StatusServiceUnavailable, code)
		e := h.nestError(body)
		assert.Equal(t, "Service Unavailable", e.Error)
		assert.Equal(t, msgUnexpected, e.Message)
	}
	code, _, _ = h.raw("GET", "/api/sandbox/target", nil)
	assert.Equal(t, http.StatusOK, code, "times: 2 is used up")
	assert.Empty(t, h.sim.faults.Snapshot(everyOrg.owns))
}

func TestFaultRateLimitHeaders(t *testing.T) {
	h := newHarness(t)
	h.sim.AddFault(Fault{Op: "createSandbox", Status: http.StatusTooManyRequests, RetryAfter: 7, Times: 1})
	_, resp, err := h.api.SandboxAPI.CreateSandbox(h.ctx).CreateSandbox(apiclient.CreateSandbox{}).Execute()
	code, msg := apiStatus(t, resp, err)
	assert.Equal(t, http.StatusTooManyRequests, code)
	assert.Equal(t, "ThrottlerException: Too Many Requests", msg)
	assert.Equal(t, "7", resp.Header.Get("Retry-After"))
	assert.Equal(t, "100", resp.Header.Get("X-RateLimit-Limit-sandbox-create"))
	assert.Equal(t, "0", resp.Header.Get("X-RateLimit-Remaining-sandbox-create"))
	assert.Equal(t, "7", resp.Header.Get("X-RateLimit-Reset-sandbox-create"))

	sb := h.create(apiclient.CreateSandbox{})
	h.sim.AddFault(Fault{Op: "stopSandbox", Status: http.StatusTooManyRequests, Times: 1})
	_, resp, err = h.api.SandboxAPI.StopSandbox(h.ctx, sb.Id).Execute()
	code, _ = apiStatus(t, resp, err)
	assert.Equal(t, http.StatusTooManyRequests, code)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Equal(t, "0", resp.Header.Get("X-RateLimit-Remaining-sandbox-lifecycle"))
}

func TestFaultDelayRunsOnTheClock(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	h.sim.AddFault(Fault{Op: "getSandbox", Delay: Duration(5 * time.Second), Times: 1})
	waiters := h.clk.Waiters()
	done := make(chan int, 1)
	go func() {
		_, resp, err := h.api.SandboxAPI.GetSandbox(h.ctx, sb.Id).Execute()
		assert.NoError(t, err)
		done <- resp.StatusCode
	}()
	require.NoError(t, h.clk.BlockUntilWaiters(t.Context(), waiters+1))
	h.clk.Advance(4 * time.Second)
	select {
	case <-done:
		t.Fatal("the delayed request answered early")
	default:
	}
	h.clk.Advance(time.Second)
	assert.Equal(t, http.StatusOK, <-done)
}

func TestFaultStartEndsInErrorAndRecovers(t *testing.T) {
	h := newHarness(t)
	api := h.api.SandboxAPI
	sb := h.create(apiclient.CreateSandbox{})
	_, _, err := api.StopSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	h.sim.AddFault(Fault{Op: "startSandbox", FailStart: "runner lost the container", Recoverable: true, Times: 1})

	_, resp, err := api.StartSandbox(h.ctx, sb.Id).Execute()
	code, msg := apiStatus(t, resp, err)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "Sandbox failed to start: runner lost the container", msg)
	got := h.get(sb.Id)
	assert.Equal(t, apiclient.SANDBOXSTATE_ERROR, got.GetState())
	assert.Equal(t, "runner lost the container", got.GetErrorReason())
	assert.True(t, got.GetRecoverable())

	_, resp, err = api.StopSandbox(h.ctx, sb.Id).Execute()
	code, msg = apiStatus(t, resp, err)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, msgErrored, msg)

	recovered, _, err := api.RecoverSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, recovered.GetState())
	assert.Nil(t, h.get(sb.Id).ErrorReason)
}

func TestFaultVanish(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	h.sim.AddFault(Fault{Op: "getSandbox", Sandbox: sb.Id, Vanish: true, Times: 1})
	_, resp, err := h.api.SandboxAPI.GetSandbox(h.ctx, sb.Id).Execute()
	code, _ := apiStatus(t, resp, err)
	assert.Equal(t, http.StatusNotFound, code, "the sandbox vanished before the request was handled")

	h.sim.AddFault(Fault{Op: "createSandbox", Vanish: true, Times: 1})
	created := h.create(apiclient.CreateSandbox{})
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, created.GetState(), "the create itself answers")
	_, resp, err = h.api.SandboxAPI.GetSandbox(h.ctx, created.Id).Execute()
	code, _ = apiStatus(t, resp, err)
	assert.Equal(t, http.StatusNotFound, code)

	third := h.create(apiclient.CreateSandbox{})
	assert.True(t, h.sim.Vanish(third.Id))
	assert.False(t, h.sim.Vanish(third.Id))
	list, _, err := h.api.SandboxAPI.ListSandboxes(h.ctx).Execute()
	require.NoError(t, err)
	assert.Empty(t, list.Items)
}

func TestRandomFaultsAreReproducible(t *testing.T) {
	run := func() []int {
		h := newHarness(t)
		h.sim.SetRandomFaults(&RandomFaults{Seed: 7, Rate: 0.5, Ops: []string{"listSandboxes"}})
		var codes []int
		for i := 0; i < 20; i++ {
			code, _, hdr := h.raw("GET", "/api/sandbox", nil)
			codes = append(codes, code)
			if code == http.StatusTooManyRequests {
				assert.NotEmpty(t, hdr.Get("Retry-After"))
			}
		}
		return codes
	}
	a, b := run(), run()
	assert.Equal(t, a, b, "the same seed gives the same faults")
	faulted := 0
	for _, c := range a {
		if c != http.StatusOK {
			assert.Contains(t, []int{500, 503, 429}, c)
			faulted++
		}
	}
	assert.Greater(t, faulted, 2)
	assert.Less(t, faulted, 18)
}

// A fault that could never fire is refused with what to fix, lest a test
// that relies on it pass for the wrong reason; nothing of the call is added.
func TestAdminRefusesAFaultThatCannotFire(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name, body, want string
	}{
		{"unknown op", `{"op":"nosuchop","status":500}`, `op "nosuchop" is not an operation of this simulator`},
		{"op in the wrong case", `{"op":"getsandbox","status":500}`, "did you mean getSandbox?"},
		{"misspelt field", `{"op":"getSandbox","stauts":500}`, `unknown field "stauts"`},
		{"no effect", `{"op":"getSandbox"}`, "the fault does nothing"},
		{"not an error status", `{"op":"getSandbox","status":200}`, "status 200 is not an error status"},
		{"negative count", `{"op":"getSandbox","status":500,"times":-1}`, "cannot be negative"},
		{"one bad in a list", `[{"op":"getSandbox","status":500},{"op":"nosuchop","status":500}]`, `op "nosuchop"`},
		{"two values", `{"op":"getSandbox","status":500} {"op":"getSandbox","status":500}`, "more than one JSON value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, _ := h.admin("POST", "/_sim/faults", tc.body)
			assert.Equal(t, http.StatusBadRequest, code)
			assert.Contains(t, messageOf(t, body), tc.want)
		})
	}
	for _, tc := range []struct {
		name, body, want string
	}{
		{"unknown op", `{"seed":1,"rate":1,"ops":["nosuchop"]}`, `op "nosuchop"`},
		{"rate above 1", `{"seed":1,"rate":2}`, "rate 2 is not a probability"},
		{"misspelt field", `{"seed":1,"rat":1}`, `unknown field "rat"`},
		{"an outcome that does nothing", `{"seed":1,"rate":1,"outcomes":[{"message":"x"}]}`, "outcome 1: the fault does nothing"},
	} {
		t.Run("random "+tc.name, func(t *testing.T) {
			code, body, _ := h.admin("PUT", "/_sim/faults/random", tc.body)
			assert.Equal(t, http.StatusBadRequest, code)
			assert.Contains(t, messageOf(t, body), tc.want)
		})
	}
	code, body, _ := h.admin("GET", "/_sim/faults", nil)
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `[]`, string(body), "nothing was added")
	sb := h.create(apiclient.CreateSandbox{})
	code, _, _ = h.raw("GET", "/api/sandbox/"+sb.Id, nil)
	assert.Equal(t, http.StatusOK, code, "no random fault either")
}

// messageOf is the message of a Daytona error body.
func messageOf(t *testing.T, body []byte) string {
	t.Helper()
	var e struct{ Message string }
	require.NoError(t, json.Unmarshal(body, &e), string(body))
	return e.Message
}

func TestAdminAPI(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{})

	code, body, _ := h.admin("POST", "/_sim/faults", []Fault{{Op: "getSandbox", Status: 500, Times: 1}, {Op: "toolbox", Status: 502}})
	require.Equal(t, http.StatusCreated, code, string(body))
	var added []Fault
	require.NoError(t, json.Unmarshal(body, &added))
	require.Len(t, added, 2)
	assert.NotEmpty(t, added[0].ID)

	code, _, _ = h.raw("GET", "/api/sandbox/"+sb.Id, nil)
	assert.Equal(t, http.StatusInternalServerError, code)
	code, body, _ = h.raw("POST", "/toolbox/"+sb.Id+"/process/execute", map[string]string{"command": "true"})
	assert.Equal(t, http.StatusBadGateway, code)
	var gin wire.ErrorResponse
	require.NoError(t, json.Unmarshal(body, &gin))
	assert.Equal(t, "INTERNAL_SERVER_ERROR", gin.Code)

	code, body, _ = h.admin("GET", "/_sim/calls", nil)
	require.Equal(t, http.StatusOK, code)
	var log struct {
		Calls  []Call            `json:"calls"`
		Counts map[string]uint64 `json:"counts"`
	}
	require.NoError(t, json.Unmarshal(body, &log))
	assert.EqualValues(t, 1, log.Counts["createSandbox"])
	assert.EqualValues(t, 1, log.Counts["getSandbox"])
	assert.EqualValues(t, 1, log.Counts["toolbox"])
	last := log.Calls[len(log.Calls)-1]
	assert.Equal(t, "toolbox", last.Operation)
	assert.Equal(t, added[1].ID, last.Fault)
	assert.Equal(t, sb.Id, last.SandboxID)

	code, _, _ = h.admin("DELETE", "/_sim/faults", nil)
	assert.Equal(t, http.StatusNoContent, code)
	code, _, _ = h.admin("DELETE", "/_sim/calls", nil)
	assert.Equal(t, http.StatusNoContent, code)
	assert.Empty(t, h.sim.Calls())

	code, body, _ = h.admin("PUT", "/_sim/faults/random", RandomFaults{Seed: 1, Rate: 1, Ops: []string{"getSandbox"}, Outcomes: []Fault{{Status: 418}}})
	require.Equal(t, http.StatusOK, code, string(body))
	code, _, _ = h.raw("GET", "/api/sandbox/"+sb.Id, nil)
	assert.Equal(t, http.StatusTeapot, code)
	code, _, _ = h.admin("DELETE", "/_sim/faults/random", nil)
	assert.Equal(t, http.StatusNoContent, code)

	code, _, _ = h.admin("POST", "/_sim/sandboxes/"+sb.Id+"/vanish", nil)
	assert.Equal(t, http.StatusNoContent, code)
	code, _, _ = h.raw("GET", "/api/sandbox/"+sb.Id, nil)
	assert.Equal(t, http.StatusNotFound, code)

	code, body, _ = h.admin("GET", "/_sim/info", nil)
	require.Equal(t, http.StatusOK, code)
	var info Info
	require.NoError(t, json.Unmarshal(body, &info))
	assert.Equal(t, "none", info.Backend)
	assert.Equal(t, "instant", info.Profile)
	assert.NotEmpty(t, info.SpecExceptions)

	code, body, _ = h.admin("POST", "/_sim/faults", map[string]any{"status": 500})
	assert.Equal(t, http.StatusBadRequest, code, string(body))
}

func TestCostReport(t *testing.T) {
	h := newHarness(t)
	api := h.api.SandboxAPI
	sb := h.create(apiclient.CreateSandbox{AutoStopInterval: ptr[int32](0)})
	h.clk.Advance(100 * time.Second)
	_, _, err := api.StopSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	h.clk.Advance(50 * time.Second)
	_, _, err = api.DeleteSandbox(h.ctx, sb.Id).Execute()
	require.NoError(t, err)
	h.clk.Advance(time.Hour)

	p := Prices{CPUPerSecond: 1, MemoryGiBPerSecond: 0.5, DiskGiBPerSecond: 0.01, FreeDiskGiB: 1}
	rep := h.sim.Cost(p)
	require.Len(t, rep.Sandboxes, 1)
	assert.InDelta(t, 100, rep.RunningSeconds, 1e-9)
	assert.InDelta(t, 50, rep.StoppedSeconds, 1e-9)
	// running: 100 s × (1 vCPU×1 + 1 GiB×0.5 + 2 billed GiB×0.01); stopped: 50 s × 2 GiB × 0.01
	assert.InDelta(t, 100*(1+0.5+0.02)+50*0.02, rep.Cost, 1e-9)

	code, body, _ := h.admin("GET", "/_sim/cost?cpuPerSecond=1&memoryGiBPerSecond=0.5&diskGiBPerSecond=0.01&freeDiskGiB=1", nil)
	require.Equal(t, http.StatusOK, code)
	var viaHTTP CostReport
	require.NoError(t, json.Unmarshal(body, &viaHTTP))
	assert.InDelta(t, rep.Cost, viaHTTP.Cost, 1e-9)

	def := h.sim.Cost(Prices{})
	assert.False(t, math.IsNaN(def.Cost))
	assert.Equal(t, DefaultPrices(), def.Prices)
}
