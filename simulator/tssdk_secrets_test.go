package simulator

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/sandplane/sandplane/internal/testdaemon"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver/native"
)

// The newest SDK's secrets against a simulator whose sandboxes run the
// real toolbox natively: daytona.secret.{create,get,list,update,delete},
// a create with secrets, sandbox.updateSecrets, and the sandbox's python
// sending its placeholder to the allowed host, which gets the rotated
// value. No answer, call log line or log line holds a value.
func TestOfficialTypeScriptSDKSecrets(t *testing.T) {
	sdk := tsSDKs[1]
	tsSDKDir(t, sdk.pkg)
	u := newUpstream(t)
	var logs testdaemon.Buffer
	be, err := NewRuntimeBackend(RuntimeBackendConfig{Runtime: native.New(), Root: t.TempDir(), Command: []string{toolboxBinary(t)}})
	require.NoError(t, err)
	sim, err := New(Config{Backend: be, ValidateResponses: true, APIKeys: []string{"ts-sdk-key"}, AdminKey: "ts-sdk-admin-key",
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		egress: egressHooks{rootCAs: u.pool, resolve: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}}})
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, sim.Close())
	})

	send := sendScript(u.caPEM, "https://"+testAllowedHost+":"+u.port()+"/v1/messages", "")
	out := runSDK(t, sdk.pkg, "secrets", srv.URL, "SECRET_VALUE="+testSecretValue, "ROTATED_VALUE="+testRotatedValue,
		"ALLOWED_HOST="+testAllowedHost, "SEND_SCRIPT="+send)
	var res struct {
		OK   bool `json:"ok"`
		Seen struct {
			Placeholder, Got, UpdatedDescription, Created, Env, Sent string
			Hosts                                                    []string
			Listed, Total                                            int
			SamePlaceholder                                          bool
			Conflict, MissingMount, Deleted                          string
		} `json:"seen"`
	}
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	seen := res.Seen
	assert.True(t, res.OK)
	assert.Regexp(t, `^dtn_secret_[0-9a-f]{32}$`, seen.Placeholder)
	assert.Equal(t, []string{testAllowedHost}, seen.Hosts)
	assert.Equal(t, "ts-api-key", seen.Got)
	assert.Equal(t, 1, seen.Listed)
	assert.Equal(t, 1, seen.Total)
	assert.Equal(t, "rotated", seen.UpdatedDescription)
	assert.True(t, seen.SamePlaceholder, "an update keeps the placeholder")
	assert.Contains(t, seen.Conflict, "already exists")
	assert.Equal(t, "started", seen.Created)
	assert.Equal(t, seen.Placeholder, seen.Env, "the sandbox sees the placeholder only")
	assert.Equal(t, "200", seen.Sent)
	assert.Contains(t, seen.MissingMount, "not found")
	assert.Contains(t, seen.Deleted, "not found")

	got := u.take()
	require.Len(t, got, 1)
	assert.Equal(t, testRotatedValue, got[0].Header, "the allowed host got the rotated value")
	assert.Equal(t, "key="+testRotatedValue, got[0].Body)

	counts := sim.calls.counts(everyOrg)
	for _, op := range []string{"createSecret", "getSecret", "listSecretsPaginated", "updateSecret", "deleteSecret", "updateSandboxSecrets"} {
		assert.NotZero(t, counts[op], "the SDK run made no %s call", op)
	}
	assert.Empty(t, sim.SpecViolations())
	for _, c := range sim.calls.snapshot(everyOrg) {
		b, _ := json.Marshal(c)
		assert.NotContains(t, string(b), testSecretValue)
	}
	assert.NotContains(t, logs.String(), testSecretValue)
	assert.NotContains(t, logs.String(), testRotatedValue)
}
