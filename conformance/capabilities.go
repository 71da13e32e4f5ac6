package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
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

// warmPoolServesCreate: a warm pool fills with started sandboxes, and a
// create that asks for what they have is answered by one of them, whose
// workload was running before the create was sent; a create with an env
// of its own is not. The pool follows a resize, and a delete removes it
// but not the sandbox it handed over.
func warmPoolServesCreate(e *env) {
	wp, ok := e.p.(provider.WarmPooler)
	require.Equal(e.t, e.want.Traits.WarmPools, ok, "Traits.WarmPools says whether %T implements provider.WarmPooler", e.p)
	if !ok {
		// No create field asks for a pool: a provider without one serves
		// every create cold, which is all there is to check.
		e.t.Skipf("%s keeps no warm pools (Traits.WarmPools is false)", e.want.Traits.Name)
		return
	}
	snap := e.want.WarmPoolSnapshot
	if snap == "" {
		e.t.Skipf("the harness names no snapshot to keep a warm pool of (Expectations.WarmPoolSnapshot)")
		return
	}
	const size = 2
	pool, err := wp.CreateWarmPool(e.ctx, provider.WarmPoolRequest{Snapshot: snap, Size: size})
	require.NoError(e.t, err, "create a warm pool of %s", snap)
	deleted := false
	e.t.Cleanup(func() {
		// Before the sweep (cleanups run last first), so that no member
		// outlives the scenario; the scenario's context is done by now.
		if !deleted {
			if err := wp.DeleteWarmPool(context.WithoutCancel(e.ctx), pool.ID); err != nil {
				e.t.Errorf("delete warm pool %s: %v", pool.ID, err)
			}
		}
	})
	assert.Equal(e.t, snap, pool.Snapshot)
	assert.Equal(e.t, size, pool.Size)
	_, err = wp.CreateWarmPool(e.ctx, provider.WarmPoolRequest{Snapshot: snap, Size: 1})
	assert.Equal(e.t, provider.AlreadyExists, provider.Code(err), "a second pool of the same snapshot: %v", err)

	e.waitPool(wp, pool.ID, size, 1)
	// A member's workload has run since the pool started it: a minute
	// more tells its age from a cold sandbox's, started by its create.
	e.sleep(e.wait(1))
	warm := e.create(provider.CreateRequest{Name: e.name("warm"), Snapshot: snap, AutoStopInterval: ptr(0)})
	cold := e.create(provider.CreateRequest{Name: e.name("cold"), Snapshot: snap, EnvVars: map[string]string{"CF_COLD": "1"}, AutoStopInterval: ptr(0)})
	assert.GreaterOrEqual(e.t, e.workloadAge(warm), e.wait(0.9), "served by the pool: its workload ran before the create")
	assert.Less(e.t, e.workloadAge(cold), e.wait(0.9), "a create with an env of its own is started for it")
	assert.Equal(e.t, e.name("warm"), warm.Name, "the takeover gives the sandbox the create's name")
	assert.Equal(e.t, e.h.RunID(), warm.Labels[LabelRun], "and its labels")
	e.waitPool(wp, pool.ID, size, 1) // it refills

	resized, err := wp.ResizeWarmPool(e.ctx, pool.ID, 1)
	require.NoError(e.t, err, "shrink")
	assert.Equal(e.t, 1, resized.Size)
	e.waitPool(wp, pool.ID, 1, 1)
	_, err = wp.ResizeWarmPool(e.ctx, pool.ID, -1)
	assert.Equal(e.t, provider.InvalidArgument, provider.Code(err), "a negative size: %v", err)

	require.NoError(e.t, wp.DeleteWarmPool(e.ctx, pool.ID), "delete")
	deleted = true
	assert.Nil(e.t, e.findPool(wp, pool.ID), "a deleted pool is not listed")
	assert.NoError(e.t, wp.DeleteWarmPool(e.ctx, pool.ID), "deleting a missing pool is not an error")
	_, err = wp.ResizeWarmPool(e.ctx, pool.ID, 1)
	assert.Equal(e.t, provider.NotFound, provider.Code(err), "resize a deleted pool: %v", err)
	assert.Equal(e.t, provider.StateStarted, e.get(warm.ID).State, "the sandbox the pool handed over stays")
}

// findPool is the pool id as the provider lists it, or nil.
func (e *env) findPool(wp provider.WarmPooler, id string) *provider.WarmPool {
	e.t.Helper()
	list, err := wp.WarmPools(e.ctx)
	require.NoError(e.t, err, "list warm pools")
	for i := range list {
		if list[i].ID == id {
			return &list[i]
		}
	}
	return nil
}

// waitPool polls until pool id has size sandboxes ready, for at most
// minutes interval minutes plus fixedSlack.
func (e *env) waitPool(wp provider.WarmPooler, id string, size int, minutes float64) *provider.WarmPool {
	e.t.Helper()
	var last *provider.WarmPool
	for i := e.polls(minutes); i > 0; i-- {
		last = e.findPool(wp, id)
		require.NotNil(e.t, last, "warm pool %s is not listed", id)
		if last.Size == size && last.Ready == size {
			return last
		}
		e.sleep(e.pace())
	}
	e.t.Fatalf("warm pool %s has %d of %d sandboxes ready (%s), not %d, after %.1f interval minutes and %v",
		id, last.Ready, last.Size, last.ErrorReason, size, minutes, fixedSlack)
	return nil
}

// workloadAge is how long the sandbox's workload, the parent of the
// toolbox's shell, had run when the shell started: the two processes'
// start times, in clock ticks since boot (/proc/<pid>/stat's 22nd field,
// the 20th after the command name, which may hold spaces).
func (e *env) workloadAge(sb *provider.Sandbox) time.Duration {
	e.t.Helper()
	out := e.exec(sb, `start() { sed 's/^.*) //' /proc/$1/stat | cut -d' ' -f20; }; `+
		`echo $(( ($(start $$) - $(start $PPID)) * 1000 / $(getconf CLK_TCK) ))`)
	require.Zero(e.t, out.ExitCode, out.Result)
	ms, err := strconv.Atoi(strings.TrimSpace(out.Result))
	require.NoError(e.t, err, "the workload's age: %s", out.Result)
	return time.Duration(ms) * time.Millisecond
}
