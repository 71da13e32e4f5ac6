package conformance

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

// The scenarios of this file hold providers to the optional capabilities
// of provider/optional.go that Daytona has and the local control plane
// does not: each one runs where its trait says the provider has it, and
// is skipped, saying why, where it does not. The trait and the interface
// must agree either way, and a provider without the trait must refuse a
// create that asks for it rather than ignore it.

// capable reports whether the provider has the capability that trait
// says, after checking that it implements the interface (has) exactly
// then; without it, a create asking for the capability (ask) must answer
// unsupported, and the scenario is skipped.
func (e *env) capable(what string, trait, has bool, ask provider.CreateRequest) bool {
	e.t.Helper()
	require.Equal(e.t, trait, has, "Traits.%s says whether %T implements the %s interface", what, e.p, what)
	if trait {
		return true
	}
	ask.Name, ask.Labels = e.name("unasked"), e.labels
	_, err := e.p.Create(e.ctx, ask)
	assert.Equal(e.t, provider.Unsupported, provider.Code(err), "a create asking for %s on a provider without it: %v", what, err)
	e.t.Skipf("%s has no %s (Traits.%s is false): a create asking for it answers unsupported", e.want.Traits.Name, what, what)
	return false
}

// gone reports whether the sandbox is deleted or on its way there.
func (e *env) gone(id string) bool {
	e.t.Helper()
	sb, err := e.p.Get(e.ctx, id)
	if provider.IsNotFound(err) {
		return true
	}
	require.NoError(e.t, err, "get %s", id)
	return sb.State == provider.StateDestroyed
}

// ttlDestroysWhateverActivity: a sandbox with a TTL, given at create or
// set later, is destroyed once it runs out, however busy its clients keep
// it, and not before.
func ttlDestroysWhateverActivity(e *env) {
	ts, ok := e.p.(provider.TTLSetter)
	if !e.capable("TTL", e.want.Traits.TTL, ok, provider.CreateRequest{TTLMinutes: 1, AutoStopInterval: ptr(0)}) {
		return
	}
	// Each TTL counts from its request, which is sent after these.
	asked := map[string]time.Time{}
	before := e.clk.Now()
	created := e.create(provider.CreateRequest{Name: e.name("born"), TTLMinutes: 1, AutoStopInterval: ptr(0)})
	asked[created.ID] = before
	assert.NotNil(e.t, created.AutoDestroyAt, "a sandbox with a TTL says when it ends")
	set := e.create(provider.CreateRequest{Name: e.name("set"), AutoStopInterval: ptr(0)})
	assert.Nil(e.t, set.AutoDestroyAt, "no TTL, no end")
	asked[set.ID] = e.clk.Now()
	got, err := ts.SetTTL(e.ctx, set.ID, 1)
	require.NoError(e.t, err, "set TTL")
	assert.NotNil(e.t, got.AutoDestroyAt, "the set TTL's end")
	_, err = ts.SetTTL(e.ctx, set.ID, -1)
	assert.Equal(e.t, provider.InvalidArgument, provider.Code(err), "a negative TTL: %v", err)

	// Busy: refreshed twice a pace, which would keep any idle interval
	// from ending.
	// In order, so that a replay makes the recording's requests.
	live := []string{created.ID, set.ID}
	for i := e.polls(e.stopDeadline()); i > 0 && len(live) > 0; i-- {
		for _, id := range slices.Clone(live) {
			if e.gone(id) {
				assert.GreaterOrEqual(e.t, e.clk.Now().Sub(asked[id]), e.wait(0.9), "destroyed only when its TTL ran out")
				live = slices.DeleteFunc(live, func(l string) bool { return l == id })
				continue
			}
			if err := e.p.RefreshActivity(e.ctx, id); err != nil && !provider.IsNotFound(err) {
				require.NoError(e.t, err, "refresh %s", id)
			}
		}
		e.sleep(e.pace())
	}
	require.Empty(e.t, live, "sandboxes still there after their TTL, for all their activity")
}

// idleAutoPauses: an idle sandbox with an auto-pause interval pauses;
// traffic through its toolbox resumes it and is answered, and so does a
// start once it paused again.
func idleAutoPauses(e *env) {
	ap, ok := e.p.(provider.AutoPauser)
	if !e.capable("AutoPause", e.want.Traits.AutoPause, ok, provider.CreateRequest{AutoPauseInterval: ptr(1), AutoStopInterval: ptr(0)}) {
		return
	}
	sb := e.create(provider.CreateRequest{Name: e.name("nap"), AutoPauseInterval: ptr(1), AutoStopInterval: ptr(0)})
	assert.Equal(e.t, 1, sb.AutoPauseInterval)
	paused := e.waitState(sb.ID, provider.StatePaused, e.stopDeadline())
	assert.GreaterOrEqual(e.t, paused.UpdatedAt.Sub(sb.CreatedAt), e.wait(0.9), "paused only after its interval")

	out := e.exec(paused, "echo awake")
	require.Zero(e.t, out.ExitCode, out.Result)
	assert.Equal(e.t, []string{"awake"}, lines(out.Result), "toolbox traffic resumes a paused sandbox and is answered")
	assert.Equal(e.t, provider.StateStarted, e.get(sb.ID).State, "running again")

	e.waitState(sb.ID, provider.StatePaused, e.stopDeadline())
	started, err := e.p.Start(e.ctx, sb.ID)
	require.NoError(e.t, err, "start a paused sandbox")
	assert.Equal(e.t, provider.StateStarted, started.State, "start resumes a paused sandbox")

	off, err := ap.SetAutoPauseInterval(e.ctx, sb.ID, 0)
	require.NoError(e.t, err)
	assert.Equal(e.t, 0, off.AutoPauseInterval, "0 disables auto-pause")
	_, err = ap.SetAutoPauseInterval(e.ctx, sb.ID, -1)
	assert.Equal(e.t, provider.InvalidArgument, provider.Code(err), "a negative interval: %v", err)
}

// secretsStayPlaceholders: a sandbox that mounts a secret has a
// placeholder in its env, not the value, and no answer carries the value;
// a secret the organization lacks is refused, at create and later.
func secretsStayPlaceholders(e *env) {
	sa, ok := e.p.(provider.SecretsAttacher)
	if !e.capable("Secrets", e.want.Traits.Secrets, ok, provider.CreateRequest{Secrets: map[string]string{"CF_MOUNTED": "any"}, AutoStopInterval: ptr(0)}) {
		return
	}
	fx := e.want.Secret
	if fx == nil {
		e.t.Skipf("the harness made no secret in the backend's organization (Expectations.Secret) for sandboxes to mount")
		return
	}
	sb := e.create(provider.CreateRequest{Name: e.name("mounts"), Secrets: map[string]string{"CF_MOUNTED": fx.Name}, AutoStopInterval: ptr(0)})
	// The env var's digest, not the var: what it holds never reaches an
	// answer the suite records, placeholder or not.
	out := e.exec(sb, `test -n "$CF_MOUNTED" && printf %s "$CF_MOUNTED" | sha256sum | cut -c1-64`)
	require.Zero(e.t, out.ExitCode, "the env var is set: %s", out.Result)
	sum := sha256.Sum256([]byte(fx.Value))
	assert.NotEqual(e.t, hex.EncodeToString(sum[:]), strings.TrimSpace(out.Result), "the env holds a placeholder, not the value")

	list, err := e.p.List(e.ctx, provider.ListOptions{Labels: e.labels})
	require.NoError(e.t, err)
	for what, v := range map[string]any{"get": e.get(sb.ID), "list": list} {
		b, err := json.Marshal(v)
		require.NoError(e.t, err)
		assert.NotContains(e.t, string(b), fx.Value, "%s carries no secret value", what)
	}

	nobody := map[string]string{"CF_OTHER": e.name("nobody")}
	assert.Equal(e.t, provider.InvalidArgument, provider.Code(sa.SetSecrets(e.ctx, sb.ID, nobody)), "mount a secret nobody made")
	assert.NoError(e.t, sa.SetSecrets(e.ctx, sb.ID, map[string]string{}), "detach all")
	_, err = e.p.Create(e.ctx, provider.CreateRequest{Name: e.name("never"), Labels: e.labels, Secrets: nobody})
	assert.Equal(e.t, provider.PreflightFailed, provider.Code(err), "create mounting a secret nobody made: %v", err)
	_, err = e.p.Get(e.ctx, e.name("never"))
	assert.ErrorIs(e.t, err, provider.ErrNotFound, "the refused create made nothing")
}
