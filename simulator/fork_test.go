package simulator

import (
	"context"
	"net/http"
	"testing"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/docker/docker/api/types/image"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/simulator/internal/engine"
)

// fork forks id through the official client and returns the fork.
func (h *harness) fork(id, name string) *apiclient.Sandbox {
	h.t.Helper()
	req := apiclient.NewForkSandbox()
	if name != "" {
		req.SetName(name)
	}
	f, _, err := h.api.SandboxAPI.ForkSandbox(h.ctx, id).ForkSandbox(*req).Execute()
	require.NoError(h.t, err)
	return f
}

// lineage is what forks, parent and ancestors answer for id: the ids of
// its forks and ancestors, and its parent's id ("" on a 404).
func (h *harness) lineage(id string) (forks []string, parent string, ancestors []string) {
	h.t.Helper()
	fs, _, err := h.api.SandboxAPI.GetSandboxForks(h.ctx, id).Execute()
	require.NoError(h.t, err)
	for _, f := range fs {
		forks = append(forks, f.Id)
	}
	if p, resp, err := h.api.SandboxAPI.GetSandboxParent(h.ctx, id).Execute(); err == nil {
		parent = p.Id
	} else {
		require.Equal(h.t, http.StatusNotFound, resp.StatusCode, err)
	}
	as, _, err := h.api.SandboxAPI.GetSandboxAncestors(h.ctx, id).Execute()
	require.NoError(h.t, err)
	for _, a := range as {
		ancestors = append(ancestors, a.Id)
	}
	return forks, parent, ancestors
}

// forkCopiesFiles drives a fork on h's runtime backend: the fork of a
// started source has the source's files, its own id and toolbox, and the
// source keeps running; files written on either side after the fork stay
// there; a fork of a stopped source starts; the lineage answers.
func forkCopiesFiles(t *testing.T, h *harness) (src, fork, again *apiclient.Sandbox) {
	src = h.create(apiclient.CreateSandbox{Env: &map[string]string{"GREETING": "hello"}, Labels: &map[string]string{"suite": "fork"}})
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, src.GetState(), src.GetErrorReason())
	exit, out := h.run(src.Id, "mkdir -p $HOME/d && echo before > $HOME/d/note.txt && chmod 640 $HOME/d/note.txt && ln -s d/note.txt $HOME/link")
	require.Equal(t, 0, exit, out)

	fork = h.fork(src.Id, "the-fork")
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, fork.GetState(), fork.GetErrorReason())
	assert.NotEqual(t, src.Id, fork.Id)
	assert.Equal(t, "the-fork", fork.Name)
	assert.Equal(t, "fork", fork.Labels["suite"])
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, h.get(src.Id).GetState(), "a started source keeps running")

	_, out = h.run(fork.Id, "cat $HOME/d/note.txt; cat $HOME/link; stat -c %a $HOME/d/note.txt; echo $GREETING $DAYTONA_SANDBOX_ID")
	assert.Equal(t, "before\nbefore\n640\nhello "+fork.Id+"\n", out)

	_, _ = h.run(fork.Id, "echo fork-only > $HOME/fork.txt; echo changed > $HOME/d/note.txt")
	_, _ = h.run(src.Id, "echo source-only > $HOME/source.txt")
	_, out = h.run(src.Id, "cat $HOME/d/note.txt; ls $HOME")
	assert.Equal(t, "before\nd\nlink\nsource.txt\n", out, "the fork's writes stay in the fork")
	_, out = h.run(fork.Id, "ls $HOME")
	assert.Equal(t, "d\nfork.txt\nlink\n", out, "the source's writes after the fork stay in the source")

	_, _, err := h.api.SandboxAPI.StopSandbox(h.ctx, fork.Id).Execute()
	require.NoError(t, err)
	h.waitState(fork.Id, apiclient.SANDBOXSTATE_STOPPED)
	again = h.fork(fork.Id, "")
	require.Equal(t, apiclient.SANDBOXSTATE_STARTED, again.GetState(), again.GetErrorReason())
	_, out = h.run(again.Id, "cat $HOME/fork.txt")
	assert.Equal(t, "fork-only\n", out, "a stopped source is forked from its files")
	_, _, err = h.api.SandboxAPI.StartSandbox(h.ctx, fork.Id).Execute()
	require.NoError(t, err)
	h.waitState(fork.Id, apiclient.SANDBOXSTATE_STARTED)
	_, out = h.run(fork.Id, "cat $HOME/d/note.txt")
	assert.Equal(t, "changed\n", out, "a fork restarted keeps its own files")

	forks, parent, ancestors := h.lineage(src.Id)
	assert.Equal(t, []string{fork.Id}, forks)
	assert.Empty(t, parent)
	assert.Empty(t, ancestors)
	forks, parent, ancestors = h.lineage(again.Id)
	assert.Empty(t, forks)
	assert.Equal(t, fork.Id, parent)
	assert.Equal(t, []string{fork.Id, src.Id}, ancestors)
	return src, fork, again
}

func TestForkNativeCopiesTheHome(t *testing.T) {
	h := nativeHarness(t)
	src, fork, again := forkCopiesFiles(t, h)
	for _, id := range []string{again.Id, fork.Id, src.Id} {
		_, _, err := h.api.SandboxAPI.DeleteSandbox(h.ctx, id).Execute()
		require.NoError(t, err)
		h.waitGone(id)
	}
}

func TestForkDockerCommitsTheContainer(t *testing.T) {
	h, cli, _ := dockerExtHarness(t)
	src, fork, again := forkCopiesFiles(t, h)
	c := containerOf(t, cli, h, fork.Id)
	forkImage := c.Config.Image
	assert.Contains(t, forkImage, "sandplane-sim/fork:", "the fork's container is made from the commit of its source")
	for _, id := range []string{again.Id, fork.Id, src.Id} {
		_, _, err := h.api.SandboxAPI.DeleteSandbox(h.ctx, id).Execute()
		require.NoError(t, err)
		h.waitGone(id)
	}
	imgs, err := cli.ImageList(context.Background(), image.ListOptions{})
	require.NoError(t, err)
	for _, img := range imgs {
		for _, tag := range img.RepoTags {
			assert.NotEqual(t, forkImage, tag, "the fork's image goes with the fork")
		}
	}
}

// TestForkRefusals: what a fork refuses, with Daytona's error bodies that
// say what to do instead.
func TestForkRefusals(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Profile = engine.DaytonaProfile() })
	started := h.createOnFakeClock()
	paused := h.createOnFakeClock()
	require.Equal(t, apiclient.SANDBOXSTATE_PAUSING, h.pause(paused.Id))
	code, b, _ := h.raw("POST", "/api/sandbox/"+paused.Id+"/fork", map[string]any{})
	require.Equal(t, http.StatusConflict, code, string(b))
	assert.Equal(t, msgInProgress+": wait until the sandbox is started or stopped, then fork it", h.nestError(b).Message)
	h.clk.Advance(h.sim.cfg.Profile.Pause.Max)
	require.Equal(t, apiclient.SANDBOXSTATE_PAUSED, h.get(paused.Id).GetState())
	tests := []struct {
		name   string
		id     string
		body   map[string]any
		status int
		msg    string
	}{
		{"unknown sandbox", "nope", map[string]any{}, http.StatusNotFound, "Sandbox with ID or name nope not found"},
		{"name taken", started.Id, map[string]any{"name": paused.Name}, http.StatusConflict, "Sandbox with name " + paused.Name + " already exists: choose another name for the fork"},
		{"unsafe name", started.Id, map[string]any{"name": "<b>x</b>"}, http.StatusBadRequest, "name must not contain HTML tags, URLs, or control characters"},
		{"paused source", paused.Id, map[string]any{}, http.StatusBadRequest, "Sandbox " + paused.Id + " is paused: resume it (start) before forking it"},
		{"bad body", started.Id, nil, http.StatusBadRequest, "Unexpected token in JSON body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body any = tt.body
			if tt.body == nil {
				body = `{"name":`
			}
			code, b, _ := h.raw("POST", "/api/sandbox/"+tt.id+"/fork", body)
			require.Equal(t, tt.status, code, string(b))
			assert.Equal(t, tt.msg, h.nestError(b).Message)
		})
	}
	code, b, _ = h.raw("GET", "/api/sandbox/"+started.Id+"/parent", nil)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, "Sandbox "+started.Id+" has no parent: it is not a fork", h.nestError(b).Message)
}

// TestForkLineageOutlivesItsParent: on the none backend a fork is a record;
// once its parent is deleted, parent answers 404 and ancestors stop there.
func TestForkLineageOutlivesItsParent(t *testing.T) {
	h := newHarness(t)
	src := h.create(apiclient.CreateSandbox{})
	fork := h.fork(src.Id, "")
	assert.Equal(t, apiclient.SANDBOXSTATE_STARTED, fork.GetState())
	_, _, err := h.api.SandboxAPI.DeleteSandbox(h.ctx, src.Id).Execute()
	require.NoError(t, err)
	h.waitGone(src.Id)
	code, b, _ := h.raw("GET", "/api/sandbox/"+fork.Id+"/parent", nil)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, "The parent of sandbox "+fork.Id+" ("+src.Id+") was deleted", h.nestError(b).Message)
	_, _, ancestors := h.lineage(fork.Id)
	assert.Empty(t, ancestors)
}
