package main

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

func TestShellJoin(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"echo", "hi"}, "echo hi"},
		{[]string{"ls", "-l", "/tmp/a_b.c"}, "ls -l /tmp/a_b.c"},
		{[]string{"sh", "-c", "exit 3"}, "sh -c 'exit 3'"},
		{[]string{"echo", "it's"}, `echo 'it'\''s'`},
		{[]string{"echo", "$HOME", "*"}, `echo '$HOME' '*'`},
		{[]string{"echo", ""}, "echo ''"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			assert.Equal(t, tt.want, shellJoin(tt.args))
		})
	}
}

func TestWorkloadCode(t *testing.T) {
	tests := []struct {
		name string
		s    *provider.Sandbox
		want int
	}{
		{"gone", nil, 0},
		{"exited zero", &provider.Sandbox{State: provider.StateStopped, ErrorReason: "exited: code 0"}, 0},
		{"exited four", &provider.Sandbox{State: provider.StateStopped, ErrorReason: "exited: code 4"}, 4},
		{"killed", &provider.Sandbox{State: provider.StateStopped, ErrorReason: "killed: signal SIGKILL"}, 1},
		{"error", &provider.Sandbox{State: provider.StateError, ErrorReason: "boom"}, 1},
		{"stopped by someone", &provider.Sandbox{State: provider.StateStopped, ErrorReason: "auto_stopped"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, workloadCode(tt.s))
		})
	}
}

func TestShortDurationAndIdle(t *testing.T) {
	assert.Equal(t, "0s", shortDuration(-time.Second))
	assert.Equal(t, "250ms", shortDuration(250*time.Millisecond))
	assert.Equal(t, "3m12s", shortDuration(3*time.Minute+12*time.Second))
	assert.Equal(t, "2h5m", shortDuration(2*time.Hour+5*time.Minute+9*time.Second))
	assert.Equal(t, "3d4h", shortDuration(76*time.Hour))

	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	s := provider.Sandbox{State: provider.StateStarted, LastActivityAt: now.Add(-45 * time.Second), AutoStopInterval: 15}
	assert.Equal(t, "45s/15m0s", idleColumn(s, now, time.Minute))
	assert.Equal(t, "45s/3s", idleColumn(s, now, 200*time.Millisecond))
	s.AutoStopInterval = 99999999999 // accepted by the API; longer than a Duration holds
	assert.Equal(t, "45s/106751d23h", idleColumn(s, now, time.Minute))
	s.AutoStopInterval = 0
	assert.Equal(t, "45s/never", idleColumn(s, now, time.Minute))
	s.State = provider.StateStopped
	assert.Equal(t, "-/never", idleColumn(s, now, time.Minute))
}

func TestParseKeyValues(t *testing.T) {
	got, err := parseKeyValues("label", []string{"a=1", "b=x=y", "c="})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "1", "b": "x=y", "c": ""}, got)
	for _, bad := range []string{"novalue", "=v"} {
		_, err := parseKeyValues("label", []string{bad})
		assert.Equal(t, provider.InvalidArgument, provider.Code(err), bad)
	}
}

func TestPrintEvent(t *testing.T) {
	at := time.Date(2025, 1, 1, 12, 0, 0, 0, time.Local)
	s := provider.Sandbox{ID: "id1", Name: "box", State: provider.StateStopped, ErrorReason: "auto_stopped", Labels: map[string]string{"origin": "harness"}}
	var b bytes.Buffer
	require.NoError(t, printEvent(&b, provider.Event{Type: provider.EventStopped, Time: at, Sandbox: &s}))
	require.NoError(t, printEvent(&b, provider.Event{Type: provider.EventActivity, Time: at, Sandbox: &s, Source: provider.SourceRefresh}))
	require.NoError(t, printEvent(&b, provider.Event{Type: provider.EventSandboxesReplaced, Time: at, Sandboxes: []provider.Sandbox{s}}))
	assert.Equal(t, ""+
		"12:00:00.000  stopped            box (id1) stopped reason=\"auto_stopped\" origin=harness\n"+
		"12:00:00.000  activity           box (id1) stopped reason=\"auto_stopped\" source=refresh origin=harness\n"+
		"12:00:00.000  snapshot           1 sandbox\n"+
		"12:00:00.000                     box (id1) stopped reason=\"auto_stopped\" origin=harness\n", b.String())
}

// refreshCounter is a provider whose only working method is RefreshActivity.
type refreshCounter struct {
	provider.Provider
	n atomic.Int32
}

func (r *refreshCounter) RefreshActivity(context.Context, string) error {
	r.n.Add(1)
	return nil
}

func TestKeepAliveRefreshesWithinTheWindow(t *testing.T) {
	tests := []struct {
		name      string
		interval  int
		minute    time.Duration
		wantEvery time.Duration
	}{
		{"a quarter of the window", 1, 200 * time.Millisecond, 50 * time.Millisecond},
		{"never sooner than the floor", 1, 40 * time.Millisecond, minKeepAlive},
		{"never later than the cap", 15, time.Minute, maxKeepAlive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktest.NewFake(time.Time{})
			p := &refreshCounter{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				keepAlive(ctx, p, clk, &provider.Sandbox{ID: "s", AutoStopInterval: tt.interval}, tt.minute)
				close(done)
			}()
			wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer wcancel()
			require.NoError(t, clk.BlockUntilWaiters(wctx, 1))
			clk.Advance(tt.wantEvery - time.Millisecond)
			assert.Zero(t, p.n.Load())
			for i := int32(1); i <= 3; i++ {
				clk.Advance(time.Millisecond)
				require.Eventually(t, func() bool { return p.n.Load() == i }, 20*time.Second, time.Millisecond)
				clk.Advance(tt.wantEvery - time.Millisecond)
			}
			cancel()
			<-done
		})
	}
}

func TestKeepAliveIdlesWithoutAutoStop(t *testing.T) {
	clk := clocktest.NewFake(time.Time{})
	done := make(chan struct{})
	go func() {
		keepAlive(context.Background(), &refreshCounter{}, clk, &provider.Sandbox{ID: "s"}, time.Minute)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("keepAlive waits for a sandbox that never auto-stops")
	}
	assert.Zero(t, clk.Waiters())
}

func TestExecArgsRefuseExecsFlagsAfterTheSandbox(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		command []string // when it runs
		say     string   // when it is refused
	}{
		{"a flag before --", []string{"demo", "--json", "--", "sh", "-c", "echo x"}, nil, "sandplane exec --json demo -- sh -c 'echo x'"},
		{"several, one with a value", []string{"demo", "--provider", "daytona://", "-it", "--", "bash"}, nil, "sandplane exec --provider daytona:// -it demo -- bash"},
		{"a value after =", []string{"demo", "--provider=local://", "--", "true"}, nil, "sandplane exec --provider=local:// demo -- true"},
		{"--help", []string{"demo", "--help"}, nil, "for help, run sandplane exec --help"},
		{"-h", []string{"demo", "-h"}, nil, "for help, run sandplane exec --help"},
		{"a word that is no flag before --", []string{"demo", "--json", "ls", "--", "-l"}, nil, "sandplane exec [flags] ID|NAME -- COMMAND [ARG...]"},
		{"a value missing before --", []string{"demo", "--provider", "--", "true"}, nil, "sandplane exec [flags] ID|NAME -- COMMAND [ARG...]"},
		{"the command after --", []string{"demo", "--", "--json"}, []string{"--json"}, ""},
		{"the command's own flags", []string{"demo", "ls", "--json", "--", "x"}, []string{"ls", "--json", "--", "x"}, ""},
		{"no -- after the flag", []string{"demo", "--json", "x"}, []string{"--json", "x"}, ""},
		{"a flag exec does not have", []string{"demo", "--nope", "--", "x"}, []string{"--nope", "--", "x"}, ""},
		{"--help after --", []string{"demo", "--", "--help"}, []string{"--help"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, command, err := execArgs(newExecCmd(), tt.args)
			if tt.say == "" {
				require.NoError(t, err)
				assert.Equal(t, "demo", id)
				assert.Equal(t, tt.command, command)
				return
			}
			require.Error(t, err)
			assert.Equal(t, 2, exitCode(err), "a usage error")
			assert.Contains(t, cliMessage(err), "flags go before the sandbox")
			assert.Contains(t, cliMessage(err), tt.say)
		})
	}
}

func TestUnknownProviderInTheCommandLinesTerms(t *testing.T) {
	for _, raw := range []string{"bogus://", "bogus", "Bogus://x"} {
		_, err := openProvider(context.Background(), raw)
		require.Error(t, err, raw)
		assert.Equal(t, 2, exitCode(err), raw)
		assert.Equal(t, `unknown provider "`+raw+`": --provider (or SANDBOX_PROVIDER) must be one of daytona://, local://`, cliMessage(err))
	}
	t.Setenv(provider.EnvProvider, "nowhere")
	_, err := openProvider(context.Background(), "")
	assert.Equal(t, `unknown provider "nowhere": --provider (or SANDBOX_PROVIDER) must be one of daytona://, local://`, cliMessage(err))
	p, err := openProvider(context.Background(), "LOCAL://127.0.0.1:1")
	require.NoError(t, err, "schemes are case-insensitive, as provider.Open reads them")
	assert.Equal(t, "local", p.Traits().Name)
}
