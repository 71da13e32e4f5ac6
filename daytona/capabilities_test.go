package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

// advance steps the fake clock by d in ten-second steps, so that the
// simulator's crons run on the way.
func (h *harness) advance(d time.Duration) {
	for ; d > 0; d -= 10 * time.Second {
		h.clk.Advance(min(d, 10*time.Second))
	}
}

// gone reports whether the sandbox is deleted or on its way there.
func (h *harness) gone(id string) bool {
	sb, err := h.p.Get(context.Background(), id)
	return provider.IsNotFound(err) || err == nil && sb.State == provider.StateDestroyed
}

// TestTTL: a TTL given at create or by SetTTL destroys the sandbox that
// many minutes after it was set, whatever its activity; 0 clears it.
func TestTTL(t *testing.T) {
	type step func(h *harness, id string)
	setTTL := func(m int) step {
		return func(h *harness, id string) {
			sb, err := h.p.SetTTL(context.Background(), id, m)
			require.NoError(h.t, err)
			if m == 0 {
				assert.Nil(h.t, sb.AutoDestroyAt, "0 clears the TTL")
			} else {
				require.NotNil(h.t, sb.AutoDestroyAt)
				assert.Equal(h.t, h.clk.Now().Add(time.Duration(m)*time.Minute).UTC(), sb.AutoDestroyAt.UTC())
			}
		}
	}
	busy := func(minutes int) step {
		return func(h *harness, id string) {
			for range minutes {
				// Activity until the TTL ends it, which activity does not
				// put off.
				err := h.p.RefreshActivity(context.Background(), id)
				if provider.IsNotFound(err) {
					return
				}
				require.NoError(h.t, err)
				h.advance(time.Minute)
			}
		}
	}
	wait := func(d time.Duration) step { return func(h *harness, _ string) { h.advance(d) } }
	tests := []struct {
		name  string
		ttl   int
		steps []step
		gone  bool
	}{
		{"created with a TTL, busy past it", 3, []step{busy(4), wait(time.Minute)}, true},
		{"created with a TTL, not yet", 10, []step{busy(4)}, false},
		{"set after create", 0, []step{setTTL(2), wait(3 * time.Minute)}, true},
		{"re-anchored later", 3, []step{wait(2 * time.Minute), setTTL(3), wait(2 * time.Minute)}, false},
		{"cleared", 2, []step{setTTL(0), wait(5 * time.Minute)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			sb, err := h.p.Create(context.Background(), provider.CreateRequest{Name: "ttl", TTLMinutes: tt.ttl, AutoStopInterval: ptr(0)})
			require.NoError(t, err)
			if tt.ttl > 0 {
				require.NotNil(t, sb.AutoDestroyAt, "the create's TTL is the sandbox's deadline")
			}
			for _, s := range tt.steps {
				s(h, sb.ID)
			}
			if tt.gone {
				assert.Eventually(t, func() bool { return h.gone(sb.ID) }, 10*time.Second, 10*time.Millisecond, "destroyed by its TTL")
			} else {
				assert.False(t, h.gone(sb.ID), "not destroyed before its TTL")
			}
		})
	}
}

// TestAutoPause: an idle sandbox with an auto-pause interval pauses,
// start resumes it, and the setter's refusals have the contract's codes.
func TestAutoPause(t *testing.T) {
	ctx := context.Background()
	t.Run("an idle sandbox pauses and start resumes it", func(t *testing.T) {
		h := newHarness(t)
		sb, err := h.p.Create(ctx, provider.CreateRequest{Name: "nap", AutoPauseInterval: ptr(2)})
		require.NoError(t, err)
		assert.Equal(t, 2, sb.AutoPauseInterval)
		assert.Equal(t, 0, sb.AutoStopInterval, "auto-pause alone turns auto-stop off")
		h.advance(3 * time.Minute)
		require.Eventually(t, func() bool {
			got, err := h.p.Get(ctx, sb.ID)
			return err == nil && got.State == provider.StatePaused
		}, 10*time.Second, 10*time.Millisecond, "paused after its interval")
		got := drive(h.clk, func() *provider.Sandbox {
			s, err := h.p.Start(ctx, sb.ID)
			require.NoError(t, err)
			return s
		})
		assert.Equal(t, provider.StateStarted, got.State, "start resumes a paused sandbox")
	})
	tests := []struct {
		name    string
		create  provider.CreateRequest
		minutes int
		want    provider.ErrorCode
	}{
		{"set on a sandbox without auto-stop", provider.CreateRequest{AutoStopInterval: ptr(0)}, 5, ""},
		{"0 disables", provider.CreateRequest{AutoPauseInterval: ptr(5)}, 0, ""},
		{"negative", provider.CreateRequest{AutoStopInterval: ptr(0)}, -1, provider.InvalidArgument},
		{"beside auto-stop", provider.CreateRequest{AutoStopInterval: ptr(15)}, 5, provider.FailedPrecondition},
		{"on an ephemeral sandbox", provider.CreateRequest{AutoStopInterval: ptr(0), AutoDeleteInterval: ptr(0)}, 5, provider.FailedPrecondition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			sb, err := h.p.Create(ctx, tt.create)
			require.NoError(t, err)
			got, err := h.p.SetAutoPauseInterval(ctx, sb.ID, tt.minutes)
			assert.Equal(t, tt.want, provider.Code(err), "%v", err)
			if tt.want == "" {
				assert.Equal(t, tt.minutes, got.AutoPauseInterval)
				assert.Equal(t, sb.LastActivityAt, got.LastActivityAt, "setting the interval is not activity")
			}
		})
	}
	t.Run("the other intervals refuse what auto-pause excludes", func(t *testing.T) {
		h := newHarness(t)
		sb, err := h.p.Create(ctx, provider.CreateRequest{AutoPauseInterval: ptr(5)})
		require.NoError(t, err)
		_, err = h.p.SetAutoStopInterval(ctx, sb.ID, 10)
		assert.Equal(t, provider.FailedPrecondition, provider.Code(err), "auto-stop beside auto-pause: %v", err)
		_, err = h.p.SetAutoDeleteInterval(ctx, sb.ID, 0)
		assert.Equal(t, provider.FailedPrecondition, provider.Code(err), "ephemeral beside auto-pause: %v", err)
		_, err = h.p.Create(ctx, provider.CreateRequest{AutoPauseInterval: ptr(5), AutoStopInterval: ptr(10)})
		assert.Equal(t, provider.InvalidArgument, provider.Code(err), "a create asking for both: %v", err)
	})
	h := newHarness(t)
	_, err := h.p.SetAutoPauseInterval(ctx, "missing", 5)
	assert.Equal(t, provider.NotFound, provider.Code(err))
	_, err = h.p.SetTTL(ctx, "missing", 5)
	assert.Equal(t, provider.NotFound, provider.Code(err))
}

// createSecret makes a secret of the simulator's organization, as a host
// would with Daytona's dashboard.
func (h *harness) createSecret(name, value string) {
	h.t.Helper()
	body, err := json.Marshal(map[string]string{"name": name, "value": value})
	require.NoError(h.t, err)
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/api/secret", bytes.NewReader(body))
	require.NoError(h.t, err)
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	require.Equal(h.t, http.StatusCreated, resp.StatusCode, string(data))
}

// TestSecrets: secrets are mounted by name at create and by SetSecrets;
// a secret the organization lacks is refused with the contract's codes,
// and no answer carries a value.
func TestSecrets(t *testing.T) {
	const value = "sk-capabilities-test-value"
	ctx := context.Background()
	tests := []struct {
		name    string
		create  map[string]string
		set     map[string]string
		wantNew provider.ErrorCode
		wantSet provider.ErrorCode
	}{
		{"at create", map[string]string{"API_KEY": "api"}, nil, "", ""},
		{"set later", nil, map[string]string{"API_KEY": "api"}, "", ""},
		{"detach all", map[string]string{"API_KEY": "api"}, map[string]string{}, "", ""},
		{"an unknown secret at create", map[string]string{"API_KEY": "nobody"}, nil, provider.PreflightFailed, ""},
		{"an unknown secret later", nil, map[string]string{"API_KEY": "nobody"}, "", provider.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sent []string
			rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if r.Body != nil {
					b, _ := io.ReadAll(r.Body)
					r.Body = io.NopCloser(bytes.NewReader(b))
					sent = append(sent, string(b))
				}
				resp, err := http.DefaultTransport.RoundTrip(r)
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body = io.NopCloser(bytes.NewReader(b))
					sent = append(sent, string(b))
				}
				return resp, err
			})
			h := newHarness(t)
			h.p = h.provider(testKey, rt)
			h.createSecret("api", value)
			sb, err := h.p.Create(ctx, provider.CreateRequest{Name: "sec", Secrets: tt.create, AutoStopInterval: ptr(0)})
			assert.Equal(t, tt.wantNew, provider.Code(err), "create: %v", err)
			if err != nil {
				return
			}
			if tt.set != nil {
				err := h.p.SetSecrets(ctx, sb.ID, tt.set)
				assert.Equal(t, tt.wantSet, provider.Code(err), "set: %v", err)
			}
			_, err = h.p.Get(ctx, sb.ID)
			require.NoError(t, err)
			_, err = h.p.List(ctx, provider.ListOptions{})
			require.NoError(t, err)
			for _, s := range sent {
				assert.NotContains(t, s, value, "no request or answer of the provider carries a value")
			}
		})
	}
	h := newHarness(t)
	assert.Equal(t, provider.NotFound, provider.Code(h.p.SetSecrets(ctx, "missing", map[string]string{})))
}

// TestCreateBodyIsSDK0218s: the create body has the shape SDK 0.218 sends:
// env always (an object, {} for none), the newer fields only when asked
// for, secrets as a list of one-entry {ENV: secretName} objects.
func TestCreateBodyIsSDK0218s(t *testing.T) {
	tests := []struct {
		name string
		req  provider.CreateRequest
		want map[string]string // key: its JSON, in the body
		none []string          // keys absent from the body
	}{
		{"plain", provider.CreateRequest{Name: "plain"}, map[string]string{"env": `{}`, "name": `"plain"`},
			[]string{"ttlMinutes", "autoPauseInterval", "secrets"}},
		{"newer fields", provider.CreateRequest{
			Name: "newer", EnvVars: map[string]string{"A": "1"}, TTLMinutes: 60, AutoPauseInterval: ptr(5), AutoStopInterval: ptr(0),
			Secrets: map[string]string{"Z_KEY": "z", "A_KEY": "a"},
		}, map[string]string{
			"env": `{"A":"1"}`, "ttlMinutes": `60`, "autoPauseInterval": `5`, "autoStopInterval": `0`,
			"secrets": `[{"A_KEY":"a"},{"Z_KEY":"z"}]`,
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body map[string]json.RawMessage
			rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/api/sandbox") {
					b, _ := io.ReadAll(r.Body)
					require.NoError(t, json.Unmarshal(b, &body))
					return &http.Response{StatusCode: http.StatusTeapot, Body: io.NopCloser(strings.NewReader(`{"message":"seen"}`)),
						Header: http.Header{}, Request: r}, nil
				}
				return http.DefaultTransport.RoundTrip(r)
			})
			h := newHarness(t)
			_, _ = h.provider(testKey, rt).Create(context.Background(), tt.req)
			require.NotNil(t, body, "the create was sent")
			for k, v := range tt.want {
				assert.JSONEq(t, v, string(body[k]), k)
			}
			for _, k := range tt.none {
				assert.NotContains(t, body, k)
			}
		})
	}
}
