package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/simulator"
)

// simCLI runs `sandplane sim args...` against a running simulator and
// returns its output.
func simCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRootCmd()
	root.SetArgs(append([]string{"sim"}, args...))
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestSimAdminSubcommands(t *testing.T) {
	addr := testdaemon.FreeAddr(t)
	runSim(t, addr, "--listen", addr, "--admin-key", "cli-admin")
	t.Setenv("DAYTONA_API_URL", "http://"+addr+"/api")
	t.Setenv("DAYTONA_API_KEY", "cli-key")
	t.Setenv(envSimAdminKey, "cli-admin")

	out, err := simCLI(t, "faults", `{"op":"createSandbox","status":429,"retryAfter":5,"times":1}`)
	require.NoError(t, err, out)
	assert.Contains(t, out, "createSandbox")
	out, err = simCLI(t, "faults")
	require.NoError(t, err, out)
	assert.Contains(t, out, "createSandbox")
	assert.Contains(t, out, "429")

	req, err := http.NewRequest("POST", "http://"+addr+"/api/sandbox", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer cli-key")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the fault the CLI added")

	out, err = simCLI(t, "calls", "--json")
	require.NoError(t, err, out)
	var log struct {
		Counts map[string]int `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &log), out)
	assert.Equal(t, 1, log.Counts["createSandbox"])

	out, err = simCLI(t, "cost", "--cpu-per-second", "1")
	require.NoError(t, err, out)
	assert.Contains(t, out, "TOTAL")
	assert.Contains(t, out, "prices per second: $1 a vCPU")
	out, err = simCLI(t, "cost", "--cpu-per-second", "1", "--json")
	require.NoError(t, err, out)
	var report simulator.CostReport
	require.NoError(t, json.Unmarshal([]byte(out), &report), out)
	assert.Equal(t, 1.0, report.Prices.CPUPerSecond)

	out, err = simCLI(t, "faults", "--clear")
	require.NoError(t, err, out)
	out, err = simCLI(t, "faults", "--json")
	require.NoError(t, err, out)
	assert.JSONEq(t, "[]", out)

	t.Run("without the admin key", func(t *testing.T) {
		t.Setenv(envSimAdminKey, "")
		_, err := simCLI(t, "calls")
		require.Error(t, err)
		assert.Equal(t, 2, exitCode(err))
		_, err = simCLI(t, "calls", "--admin-key", "wrong")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "401")
	})
}

// TestSimAdminErrorsReadAsTheAPIs: an admin answer's status carries the
// code the main API's would, through the same table.
func TestSimAdminErrorsReadAsTheAPIs(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound,
		http.StatusConflict, http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusInternalServerError} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"message":"no"}`))
		}))
		a := &simAdmin{url: srv.URL, adminKey: "k", org: "o"}
		err := a.do(context.Background(), "GET", "/_sim/faults", nil, nil, nil)
		srv.Close()
		assert.Equal(t, provider.CodeForHTTPStatus(status), provider.Code(err), "status %d: %v", status, err)
	}
}
