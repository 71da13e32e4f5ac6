package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver/native"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/wire"
)

// A daemon whose native sandboxes fell back to no isolation says so in its
// info, with the reason, and its dashboard marks the page and each such
// sandbox (the fake runtime runs every native sandbox on the host).
func TestUnisolatedIsShown(t *testing.T) {
	why := "isolation bwrap needs bubblewrap, which is not installed: apt-get install bubblewrap (or set isolation: none)"
	ts, m := newTestServerWith(t, t.TempDir(), Options{Containment: "pid-namespace", Isolation: "none", IsolationFallback: errors.New(why)})
	s, err := m.Create(context.Background(), provider.CreateRequest{Name: "open"})
	require.NoError(t, err)
	assert.True(t, s.Unisolated, "a native sandbox on the host is unisolated")

	var info wire.Info
	require.NoError(t, json.Unmarshal([]byte(do(t, ts, "GET", "/v1/info", "").body), &info))
	assert.Equal(t, wire.IsolationNone, info.Isolation)
	assert.Equal(t, why, info.IsolationFallback)
	var list wire.SandboxList
	require.NoError(t, json.Unmarshal([]byte(do(t, ts, "GET", "/v1/sandboxes", "").body), &list))
	require.Len(t, list.Items, 1)
	assert.True(t, list.Items[0].Unisolated)

	body := do(t, ts, "GET", "/", "").body
	assert.Contains(t, body, `<p id="isolation" class="note warn">Native sandboxes run <b>unisolated</b>`, "the page says so")
	assert.Contains(t, body, `<span id="isolation-why">isolation bwrap needs bubblewrap`)
	assert.Contains(t, body, `data-unisolated title=`, "and marks the sandbox")
}

// An isolated daemon, or one whose user opted out, shows no fallback.
func TestIsolatedShowsNoFallback(t *testing.T) {
	for _, iso := range []string{"bwrap", "none"} {
		ts, _ := newTestServerWith(t, t.TempDir(), Options{Containment: "pid-namespace", Isolation: iso})
		var info wire.Info
		require.NoError(t, json.Unmarshal([]byte(do(t, ts, "GET", "/v1/info", "").body), &info))
		assert.Equal(t, wire.InfoIsolation(iso), info.Isolation)
		assert.Empty(t, info.IsolationFallback)
		assert.Contains(t, do(t, ts, "GET", "/", "").body, `<p id="isolation" class="note warn" hidden>`)
	}
}

// settleIsolation logs one line when native sandboxes fall back to none,
// nothing when they are isolated or their user opted out, and fails the
// start when isolation: bwrap cannot work.
func TestSettleIsolationSaysSoOnce(t *testing.T) {
	settle := func(t *testing.T, isolation string) (string, error) {
		var out bytes.Buffer
		err := settleIsolation(context.Background(), native.New(native.WithIsolation(isolation)), slog.New(slog.NewTextHandler(&out, nil)))
		return out.String(), err
	}
	t.Run("no bubblewrap", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		logged, err := settle(t, "")
		require.NoError(t, err)
		assert.Equal(t, 1, strings.Count(logged, "\n"), logged)
		assert.Contains(t, logged, "native sandboxes run unisolated")
		assert.Contains(t, logged, "set isolation: none", "it names the opt-out")
		assert.Contains(t, logged, "apt-get install bubblewrap", "and the fix")

		logged, err = settle(t, "none")
		require.NoError(t, err)
		assert.Empty(t, logged, "an explicit opt-out is not warned of")

		_, err = settle(t, "bwrap")
		assert.Equal(t, provider.PreflightFailed, provider.Code(err), "isolation asked for must work: %v", err)
		assert.ErrorContains(t, err, "apt-get install bubblewrap")
	})
	t.Run("bubblewrap", func(t *testing.T) {
		if err := native.New().ProbeIsolation(context.Background()); err != nil {
			t.Skipf("bubblewrap does not isolate here: %v", err)
		}
		logged, err := settle(t, "")
		require.NoError(t, err)
		assert.Empty(t, logged)
	})
}
