package conformance

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

type scenario struct {
	name string
	run  func(e *env)
}

// scenarios is the one table every provider runs. Names are file names of
// cassettes: keep them stable.
var scenarios = []scenario{
	{"create_get_list", createGetList},
	{"name_conflict", nameConflict},
	{"missing_sandbox", missingSandbox},
	{"delete_twice", deleteTwice},
	{"stop_start_keeps_workdir", stopStartKeepsWorkdir},
	{"traits", traits},
	{"refresh_keeps_alive", refreshKeepsAlive},
	{"idle_auto_stops", idleAutoStops},
	{"reads_are_not_activity", readsAreNotActivity},
	{"autostop_zero_never_stops", autoStopZeroNeverStops},
	{"shorter_interval_keeps_clock", shorterIntervalKeepsClock},
	{"busy_sandbox_still_stops", busySandboxStillStops},
	{"preview_reaches_workload", previewReachesWorkload},
	{"exec_through_toolbox", execThroughToolbox},
	{"entrypoint_logs_redacted", entrypointLogsRedacted},
	{"unreachable_backend", unreachableBackend},
	{"cancelled_call", cancelledCall},
	{"stop_reasons", stopReasons},
	{"watch_sees_lifecycle", watchSeesLifecycle},
	{"ttl_destroys_whatever_activity", ttlDestroysWhateverActivity},
	{"idle_auto_pauses", idleAutoPauses},
	{"secrets_stay_placeholders", secretsStayPlaceholders},
	{"warm_pool_serves_create", warmPoolServesCreate},
}

func createGetList(e *env) {
	sb := e.create(provider.CreateRequest{Name: e.name("first"), Labels: map[string]string{"purpose": "first"}, AutoStopInterval: ptr(7)})
	assert.NotEmpty(e.t, sb.ID)
	assert.Equal(e.t, e.name("first"), sb.Name)
	assert.Equal(e.t, 7, sb.AutoStopInterval)
	assert.Equal(e.t, "first", sb.Labels["purpose"])
	assert.Equal(e.t, e.h.RunID(), sb.Labels[LabelRun])
	assert.False(e.t, sb.CreatedAt.IsZero(), "createdAt")
	assert.False(e.t, sb.LastActivityAt.IsZero(), "lastActivityAt")

	byID, byName := e.get(sb.ID), e.get(sb.Name)
	assert.Equal(e.t, sb.ID, byID.ID)
	assert.Equal(e.t, sb.ID, byName.ID, "get by name")
	assert.Equal(e.t, provider.StateStarted, byID.State)

	other := e.create(provider.CreateRequest{Labels: map[string]string{"purpose": "second"}, AutoStopInterval: ptr(0)})
	assert.NotEqual(e.t, sb.ID, other.ID)

	all, err := e.p.List(e.ctx, provider.ListOptions{Labels: e.labels})
	require.NoError(e.t, err)
	require.Len(e.t, all, 2, "both sandboxes of this scenario")
	assert.Equal(e.t, []string{sb.ID, other.ID}, []string{all[0].ID, all[1].ID}, "oldest first")
	first, err := e.p.List(e.ctx, provider.ListOptions{Labels: map[string]string{LabelRun: e.h.RunID(), "purpose": "first"}})
	require.NoError(e.t, err)
	require.Len(e.t, first, 1, "labels filter by containment")
	assert.Equal(e.t, sb.ID, first[0].ID)
	none, err := e.p.List(e.ctx, provider.ListOptions{Labels: map[string]string{LabelRun: e.h.RunID(), "purpose": "none"}})
	require.NoError(e.t, err)
	assert.Empty(e.t, none)

	if sr, ok := e.p.(provider.StatusReporter); ok {
		st := sr.Status(e.ctx)
		assert.True(e.t, st.OK(), "status of a working provider: %+v", st)
		assert.Equal(e.t, e.p.Traits().Name, st.Provider)
		assert.Empty(e.t, st.Code)
	}
}

func nameConflict(e *env) {
	sb := e.create(provider.CreateRequest{Name: e.name("taken"), AutoStopInterval: ptr(0)})
	_, err := e.p.Create(e.ctx, provider.CreateRequest{Name: e.name("taken"), Labels: e.labels})
	assert.Equal(e.t, provider.AlreadyExists, provider.Code(err), "%v", err)
	assert.NotEmpty(e.t, provider.Message(err))
	assert.Equal(e.t, provider.StateStarted, e.get(sb.ID).State, "the first one is untouched")
	all, err := e.p.List(e.ctx, provider.ListOptions{Labels: e.labels})
	require.NoError(e.t, err)
	assert.Len(e.t, all, 1)
}

func missingSandbox(e *env) {
	nobody := e.name("nobody")
	_, err := e.p.Get(e.ctx, nobody)
	assert.Equal(e.t, provider.NotFound, provider.Code(err), "get: %v", err)
	assert.NoError(e.t, e.p.Delete(e.ctx, nobody), "deleting a missing sandbox is not an error")
	_, err = e.p.Stop(e.ctx, nobody)
	assert.Equal(e.t, provider.NotFound, provider.Code(err), "stop: %v", err)
	_, err = e.p.Start(e.ctx, nobody)
	assert.Equal(e.t, provider.NotFound, provider.Code(err), "start: %v", err)
	assert.Equal(e.t, provider.NotFound, provider.Code(e.p.RefreshActivity(e.ctx, nobody)), "refresh activity")
	_, err = e.p.SetAutoStopInterval(e.ctx, nobody, 5)
	assert.Equal(e.t, provider.NotFound, provider.Code(err), "set auto-stop interval: %v", err)
}

func deleteTwice(e *env) {
	sb := e.create(provider.CreateRequest{Name: e.name("doomed"), AutoStopInterval: ptr(0)})
	require.NoError(e.t, e.p.Delete(e.ctx, sb.ID))
	_, err := e.p.Get(e.ctx, sb.ID)
	assert.Equal(e.t, provider.NotFound, provider.Code(err), "gone once Delete returns: %v", err)
	assert.NoError(e.t, e.p.Delete(e.ctx, sb.ID), "by id, again")
	assert.NoError(e.t, e.p.Delete(e.ctx, sb.Name), "by name, again")
	all, err := e.p.List(e.ctx, provider.ListOptions{Labels: e.labels})
	require.NoError(e.t, err)
	assert.Empty(e.t, all)
}

func stopStartKeepsWorkdir(e *env) {
	sb := e.create(provider.CreateRequest{Name: e.name("box"), AutoStopInterval: ptr(0)})
	out := e.exec(sb, "pwd && echo kept > conformance.txt")
	require.Zero(e.t, out.ExitCode, out.Result)
	dir := lines(out.Result)[0]

	stopped, err := e.p.Stop(e.ctx, sb.ID)
	require.NoError(e.t, err)
	if !e.want.Traits.SyncStop {
		stopped = e.waitState(sb.ID, provider.StateStopped, 1)
	}
	assert.Equal(e.t, provider.StateStopped, stopped.State)
	assert.Equal(e.t, provider.StateStopped, e.get(sb.ID).State)

	started, err := e.p.Start(e.ctx, sb.ID)
	require.NoError(e.t, err)
	assert.Equal(e.t, sb.ID, started.ID, "same sandbox")
	assert.Equal(e.t, provider.StateStarted, started.State)
	out = e.exec(started, "pwd && cat conformance.txt")
	require.Zero(e.t, out.ExitCode, out.Result)
	assert.Equal(e.t, []string{dir, "kept"}, lines(out.Result), "same working directory, files kept")
}

// traits checks that the provider reports the traits its harness promises,
// and behaves as they say.
func traits(e *env) {
	tr := e.p.Traits()
	require.Equal(e.t, e.want.Traits, tr, "the provider's traits")
	require.NotEmpty(e.t, tr.Name)
	_, pools := e.p.(provider.WarmPooler)
	assert.Equal(e.t, tr.WarmPools, pools, "Traits.WarmPools says whether %T implements provider.WarmPooler", e.p)

	sb := e.create(provider.CreateRequest{Name: e.name("box"), AutoStopInterval: ptr(0)})
	resized, err := e.p.Resize(e.ctx, sb.ID, provider.ResizeRequest{CPU: 1, Memory: 1})
	if tr.ResizeIsNoop {
		require.NoError(e.t, err, "ResizeIsNoop: resize is accepted")
		assert.Equal(e.t, sb.ID, resized.ID)
		assert.Equal(e.t, provider.StateStarted, resized.State, "and changes nothing")
	} else if err != nil {
		// A real resize may be off for the organization, or refused for the
		// sandbox's state or size; what it may not be is an unclassified
		// failure.
		assert.Contains(e.t, []provider.ErrorCode{provider.Unsupported, provider.FailedPrecondition, provider.InvalidArgument},
			provider.Code(err), "resize: %v", err)
	}

	stopped, err := e.p.Stop(e.ctx, sb.ID)
	require.NoError(e.t, err)
	if tr.SyncStop {
		assert.Equal(e.t, provider.StateStopped, stopped.State, "SyncStop: stop returns the sandbox stopped")
	} else {
		e.waitState(sb.ID, provider.StateStopped, 1)
	}
	again, err := e.p.Stop(e.ctx, sb.ID)
	if tr.StopStoppedIsNoop {
		require.NoError(e.t, err, "StopStoppedIsNoop: stopping a stopped sandbox succeeds")
		assert.Equal(e.t, provider.StateStopped, again.State)
	} else {
		assert.Equal(e.t, provider.FailedPrecondition, provider.Code(err), "stopping a stopped sandbox: %v", err)
	}

	started, err := e.p.Start(e.ctx, sb.ID)
	require.NoError(e.t, err)
	assert.Equal(e.t, provider.StateStarted, started.State)
	started, err = e.p.Start(e.ctx, sb.ID)
	require.NoError(e.t, err, "starting a started sandbox returns it as it is")
	assert.Equal(e.t, provider.StateStarted, started.State)
}

// stopped checks that an auto-stopped sandbox says why, where it can.
func (e *env) autoStopped(sb *provider.Sandbox) {
	e.t.Helper()
	assert.Equal(e.t, provider.StateStopped, sb.State)
	if !e.want.Traits.NoStopReason {
		assert.Equal(e.t, provider.ErrorReasonAutoStopped, sb.ErrorReason)
	}
}

// stopDeadline is how long, in interval minutes, an idle sandbox with a
// one-minute interval may take to stop: the interval, the reap period, and
// one more minute for the stop itself.
func (e *env) stopDeadline() float64 { return 1 + e.want.Traits.ReapIntervalMinutes + 1 }

func refreshKeepsAlive(e *env) {
	sb := e.create(provider.CreateRequest{Name: e.name("kept"), AutoStopInterval: ptr(1)})
	// Three interval minutes, refreshed four times a minute.
	for i := 0; i < 12; i++ {
		require.NoError(e.t, e.p.RefreshActivity(e.ctx, sb.ID))
		e.sleep(e.minute / 4)
		got := e.get(sb.ID)
		require.Equal(e.t, provider.StateStarted, got.State, "refreshed sandbox stopped after %d refreshes: %s", i+1, describe(got))
	}
	got := e.get(sb.ID)
	assert.True(e.t, got.LastActivityAt.After(sb.LastActivityAt), "refreshes moved lastActivityAt")
}

func idleAutoStops(e *env) {
	sb := e.create(provider.CreateRequest{Name: e.name("idle"), AutoStopInterval: ptr(1)})
	got := e.waitState(sb.ID, provider.StateStopped, e.stopDeadline())
	e.autoStopped(got)
	assert.GreaterOrEqual(e.t, got.UpdatedAt.Sub(sb.CreatedAt), e.wait(0.9), "stopped only after its interval")
}

func readsAreNotActivity(e *env) {
	sb := e.create(provider.CreateRequest{Name: e.name("read"), AutoStopInterval: ptr(1)})
	for i := e.polls(e.stopDeadline()); i > 0; i-- {
		got := e.get(sb.ID)
		_, err := e.p.List(e.ctx, provider.ListOptions{Labels: e.labels})
		require.NoError(e.t, err)
		if got.State == provider.StateStopped {
			e.autoStopped(got)
			return
		}
		e.sleep(e.pace())
	}
	e.t.Fatalf("a sandbox that was only read never auto-stopped")
}

func autoStopZeroNeverStops(e *env) {
	never := e.create(provider.CreateRequest{Name: e.name("never"), AutoStopInterval: ptr(0)})
	assert.Equal(e.t, 0, never.AutoStopInterval, "0 is kept, not replaced by a default")
	later := e.create(provider.CreateRequest{Name: e.name("later"), AutoStopInterval: ptr(1)})
	set, err := e.p.SetAutoStopInterval(e.ctx, later.ID, 0)
	require.NoError(e.t, err)
	assert.Equal(e.t, 0, set.AutoStopInterval)
	// Four interval minutes, several reaps.
	for i := 0; i < 16; i++ {
		e.sleep(e.minute / 4)
		for _, sb := range []*provider.Sandbox{never, later} {
			got := e.get(sb.ID)
			require.Equal(e.t, provider.StateStarted, got.State, "autoStopInterval 0: %s", describe(got))
		}
	}
}

func shorterIntervalKeepsClock(e *env) {
	sb := e.create(provider.CreateRequest{Name: e.name("idle"), AutoStopInterval: ptr(30)})
	// Idle for four interval minutes.
	for i := 0; i < 16; i++ {
		e.sleep(e.minute / 4)
		require.Equal(e.t, provider.StateStarted, e.get(sb.ID).State)
	}
	before := e.get(sb.ID)
	set, err := e.p.SetAutoStopInterval(e.ctx, sb.ID, 3)
	require.NoError(e.t, err)
	assert.Equal(e.t, 3, set.AutoStopInterval)
	assert.Equal(e.t, before.LastActivityAt, set.LastActivityAt, "setting the interval is not activity")
	// The sandbox is now past its interval, so the reaper may already have
	// begun stopping it, and a state change is activity: only a sandbox
	// still started must show the old clock.
	if after := e.get(sb.ID); after.State == provider.StateStarted {
		assert.Equal(e.t, before.LastActivityAt, after.LastActivityAt, "setting the interval is not activity")
	}
	// Idle for four minutes already, it is past a three-minute interval: it
	// stops at the next reap. Had the setter reset the idle clock, it could
	// not stop for three more minutes; two minutes of polls tell the two
	// apart.
	for i := int(e.wait(2)/e.pace()) + 1; i > 0; i-- {
		got := e.get(sb.ID)
		if got.State == provider.StateStopped || got.State == provider.StateStopping {
			if got.State == provider.StateStopping {
				got = e.waitState(sb.ID, provider.StateStopped, 1)
			}
			e.autoStopped(got)
			return
		}
		e.sleep(e.pace())
	}
	e.t.Fatalf("shortening the interval of an idle sandbox reset its idle clock: still %s two minutes later", e.get(sb.ID).State)
}

func busySandboxStillStops(e *env) {
	sb := e.create(provider.CreateRequest{Name: e.name("busy"), AutoStopInterval: ptr(1)})
	// A workload that keeps working on its own is not activity: only
	// clients say a sandbox is in use.
	out := e.exec(sb, "nohup sh -c 'while :; do date >> busy.log; sleep 1; done' </dev/null >/dev/null 2>&1 &")
	require.Zero(e.t, out.ExitCode, out.Result)
	got := e.waitState(sb.ID, provider.StateStopped, e.stopDeadline())
	e.autoStopped(got)
}

func previewReachesWorkload(e *env) {
	sb := e.create(provider.CreateRequest{Name: e.name("web"), AutoStopInterval: ptr(0)})
	marker := "preview-" + e.h.RunID()
	out := e.exec(sb, "echo "+marker+" > preview.txt && pwd")
	require.Zero(e.t, out.ExitCode, out.Result)
	ls := lines(out.Result)
	require.Len(e.t, ls, 1, out.Result)
	dir := ls[0]

	// A host server asks for the workload's port inside the sandbox, as on
	// Daytona. The local default workload is a toolbox there, which reads
	// files back. A backend whose default workload serves no preview
	// (Daytona, the simulator) previews a small web server the sandbox
	// starts: its toolbox answers only its own proxy.
	var preview *provider.Preview
	var path string
	if port := e.want.WorkloadPort; port != 0 {
		var err error
		preview, err = e.p.PreviewURL(e.ctx, sb.ID, port)
		require.NoError(e.t, err, "preview URL of the workload port %d", port)
		path = "/files/download?path=" + dir + "/preview.txt"
	} else {
		// Port 0: the sandbox picks a free one, and the scenario reads it
		// from the server's banner (native sandboxes share the host's
		// ports, and a replay must see the port its recording saw).
		out := e.exec(sb, "nohup python3 -u -m http.server 0 --bind 127.0.0.1 --directory "+dir+" </dev/null >server.log 2>&1 & "+
			"for i in $(seq 100); do grep -o 'port [0-9]*' server.log 2>/dev/null && exit 0; sleep 0.1; done; cat server.log; exit 1")
		require.Zero(e.t, out.ExitCode, out.Result)
		var n int
		_, serr := fmt.Sscanf(strings.TrimSpace(out.Result), "port %d", &n)
		require.NoError(e.t, serr, "the web server's port: %s", out.Result)
		var err error
		preview, err = e.p.PreviewURL(e.ctx, sb.ID, n)
		require.NoError(e.t, err, "preview URL")
		path = "/preview.txt"
	}
	url := strings.TrimRight(preview.URL, "/") + path
	var status int
	var body string
	for i := e.polls(0.5); i > 0; i-- {
		req, err := http.NewRequestWithContext(e.ctx, http.MethodGet, url, nil)
		require.NoError(e.t, err)
		// A URL that carries its own authorisation comes with no token.
		if preview.Token != "" {
			req.Header.Set(provider.PreviewTokenHeader, preview.Token)
		}
		if status, body = e.do(req); status == http.StatusOK {
			break
		}
		e.sleep(e.pace())
	}
	require.Equal(e.t, http.StatusOK, status, "GET %s: %s", url, body)
	assert.Equal(e.t, marker, strings.TrimSpace(body), "the preview reached this sandbox's workload")

	if e.want.DeclaredPorts {
		// A port nothing declares is a clear error, not a URL to nothing.
		const undeclared = 5999
		_, err := e.p.PreviewURL(e.ctx, sb.ID, undeclared)
		assert.Equal(e.t, provider.InvalidArgument, provider.Code(err), "preview of undeclared port %d: %v", undeclared, err)
		assert.ErrorContains(e.t, err, "not declared", "says why and what to do")
	}
}

func execThroughToolbox(e *env) {
	const value = "conformance-value-1234"
	sb := e.create(provider.CreateRequest{Name: e.name("shell"), EnvVars: map[string]string{"CF_VALUE": value}, AutoStopInterval: ptr(0)})
	out := e.exec(sb, "echo out; echo err 1>&2; test \"$CF_VALUE\" = "+value+" && echo env-ok; exit 3")
	assert.Equal(e.t, 3, out.ExitCode, "a failing command's exit code comes back")
	for _, want := range []string{"out", "err", "env-ok"} {
		assert.Contains(e.t, lines(out.Result), want, "stdout and stderr combined, env applied: %q", out.Result)
	}
}

func entrypointLogsRedacted(e *env) {
	secret := "cf-secret-" + e.h.RunID() + "-0123456789"
	sb := e.create(provider.CreateRequest{Name: e.name("logs"), Snapshot: e.want.LogsSnapshot,
		EnvVars: map[string]string{"CF_SECRET": secret}, AutoStopInterval: ptr(0)})
	if e.want.Traits.NoEntrypointLogs {
		_, err := e.p.EntrypointLogs(e.ctx, sb.ID)
		assert.Equal(e.t, provider.Unsupported, provider.Code(err), "%v", err)
		return
	}
	switch {
	case e.want.LogsSnapshot != "":
		// The snapshot's entrypoint prints the line itself.
	case e.want.ShellInWorkload:
		// The toolbox's shell is a child of the workload: write where the
		// workload's own output goes.
		out := e.exec(sb, "echo \"cf-before $CF_SECRET cf-after\" >> /proc/$PPID/fd/1")
		require.Zero(e.t, out.ExitCode, out.Result)
	default:
		logs, err := e.p.EntrypointLogs(e.ctx, sb.ID)
		require.NoError(e.t, err)
		assert.NotContains(e.t, logs.Output, secret, "env values are redacted")
		e.t.Skip("no way to print to the workload's stdout here: the harness gives no LogsSnapshot")
	}
	for i := e.polls(0.5); i > 0; i-- {
		logs, err := e.p.EntrypointLogs(e.ctx, sb.ID)
		require.NoError(e.t, err)
		if strings.Contains(logs.Output, "cf-before") {
			assert.Contains(e.t, logs.Output, "cf-after")
			assert.NotContains(e.t, logs.Output, secret, "env values are redacted")
			assert.NotContains(e.t, logs.Stdout, secret)
			assert.Contains(e.t, logs.Stdout, "cf-before", "printed to stdout")
			return
		}
		e.sleep(e.pace())
	}
	e.t.Fatalf("the workload's output never reached its entrypoint logs")
}

func unreachableBackend(e *env) {
	down := e.h.Unreachable()
	_, err := down.Get(e.ctx, e.name("any"))
	assert.Equal(e.t, provider.Unavailable, provider.Code(err), "get: %v", err)
	_, err = down.List(e.ctx, provider.ListOptions{Labels: e.labels})
	assert.Equal(e.t, provider.Unavailable, provider.Code(err), "list: %v", err)
	_, err = down.Create(e.ctx, provider.CreateRequest{Name: e.name("never"), Labels: e.labels})
	assert.Equal(e.t, provider.Unavailable, provider.Code(err), "create: %v", err)
	assert.NotEmpty(e.t, provider.Message(err), "says what to do")
	if sr, ok := down.(provider.StatusReporter); ok {
		st := sr.Status(e.ctx)
		assert.True(e.t, st.Configured)
		assert.False(e.t, st.Authenticated)
		assert.Equal(e.t, provider.Unavailable, st.Code)
		assert.NotEmpty(e.t, st.Message)
	}
}
