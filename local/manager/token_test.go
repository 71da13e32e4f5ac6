package manager

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

func TestSandboxToken(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.create(provider.CreateRequest{ID: "tok"})
	h.create(provider.CreateRequest{ID: "other"})
	tokPath := filepath.Join(h.root, "tok", tokenFile)

	fi, err := os.Stat(tokPath)
	require.NoError(t, err, "made at create")
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	tok, err := h.m.readToken("tok")
	require.NoError(t, err)
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	require.NoError(t, err, "URL-safe")
	assert.Len(t, raw, 32)
	other, err := h.m.readToken("other")
	require.NoError(t, err)
	assert.NotEqual(t, tok, other, "one secret per sandbox")

	t.Run("handed to the workload", func(t *testing.T) {
		assert.Equal(t, tok, h.rt.Specs()[0].Env[TokenEnv])
	})
	t.Run("answered with the preview URL", func(t *testing.T) {
		p, err := h.m.PreviewURL(ctx, "tok", 0)
		require.NoError(t, err)
		assert.Equal(t, tok, p.Token)
	})
	t.Run("never in sandbox.json or the sandbox", func(t *testing.T) {
		rec, err := os.ReadFile(filepath.Join(h.root, "tok", recordFile))
		require.NoError(t, err)
		assert.NotContains(t, string(rec), tok)
		env, err := os.ReadFile(filepath.Join(h.root, "tok", envFile))
		require.NoError(t, err)
		assert.NotContains(t, string(env), tok, "nor among the env values a start merges")
		for _, s := range h.m.List(ctx, Filter{}) {
			assert.NotContains(t, s.PreviewURL, tok)
		}
	})
	t.Run("redacted from entrypoint logs", func(t *testing.T) {
		h.rt.SetLogs(h.handle("tok"), "token="+tok+"\n")
		logs, err := h.m.EntrypointLogs(ctx, "tok")
		require.NoError(t, err)
		assert.Equal(t, "token=[REDACTED]\n", logs.Stdout)
	})
	t.Run("kept across stop and start", func(t *testing.T) {
		_, err := h.m.Stop(ctx, "tok")
		require.NoError(t, err)
		_, err = h.m.Start(ctx, "tok")
		require.NoError(t, err)
		specs := h.rt.Specs()
		assert.Equal(t, tok, specs[len(specs)-1].Env[TokenEnv])
	})
	t.Run("removed with the sandbox", func(t *testing.T) {
		require.NoError(t, h.m.Delete(ctx, "tok"))
		assert.NoFileExists(t, tokPath)
	})
}

func TestSandboxTokenCannotBeChosen(t *testing.T) {
	h := newHarness(t)
	_, err := h.m.Create(context.Background(), provider.CreateRequest{EnvVars: map[string]string{TokenEnv: "mine"}})
	assert.Equal(t, provider.InvalidArgument, provider.Code(err))
}

func TestSandboxFromBeforeTokensGetsOneAtStart(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.create(provider.CreateRequest{ID: "old"})
	_, err := h.m.Stop(ctx, "old")
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(h.root, "old", tokenFile)))
	h.restart()

	_, err = h.m.Start(ctx, "old")
	require.NoError(t, err)
	tok, err := h.m.readToken("old")
	require.NoError(t, err)
	assert.NotEmpty(t, tok)
	specs := h.rt.Specs()
	assert.Equal(t, tok, specs[len(specs)-1].Env[TokenEnv])
}
