package baseimage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/docker/go-connections/nat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

// realEngine returns a client of the engine DOCKER_HOST names, skipping t
// when none answers.
func realEngine(t *testing.T) *client.Client {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		t.Skipf("no Docker engine answers: install docker.io and start dockerd (make test does this in CI) (%v)", err)
	}
	cli.NegotiateAPIVersion(ctx)
	return cli
}

// buildingEngine is realEngine for a test that builds, skipping t also when
// this process cannot build (not root, no debootstrap).
func buildingEngine(t *testing.T) *client.Client {
	t.Helper()
	cli := realEngine(t)
	if os.Geteuid() != 0 {
		t.Skip("building a base image needs root: run these tests as root (CI does); TestBuildWithoutRootFailsNamingTheFix covers the refusal")
	}
	if _, err := debootstrapPath(); err != nil {
		t.Skip("debootstrap is not installed: apt-get install -y debootstrap (.ci/run does)")
	}
	return cli
}

// buildContext bounds a test that downloads a Debian system by the test's
// own deadline (make test allows 30 minutes).
func buildContext(t *testing.T) context.Context {
	ctx := t.Context()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
		t.Cleanup(cancel)
	}
	return ctx
}

// removeByHash removes the images labelled with hash, and fails t unless
// that worked or there were none.
func removeByHash(t *testing.T, cli *client.Client, hash string) {
	ctx := context.Background()
	imgs, err := cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelHash+"="+hash))})
	require.NoError(t, err)
	for _, img := range imgs {
		_, err := cli.ImageRemove(ctx, img.ID, image.RemoveOptions{Force: true, PruneChildren: true})
		require.NoError(t, err)
	}
}

// safeLog collects progress for assertions and echoes it to the test log.
type safeLog struct {
	t      *testing.T
	mu     sync.Mutex
	phases []string
}

func (l *safeLog) add(p Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phases = append(l.phases, p.Phase)
	l.t.Log(p.String())
}

func (l *safeLog) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.phases...)
}

func TestEnsureBuildsForRealOnceThenUsesTheCache(t *testing.T) {
	cli := buildingEngine(t)
	ctx := buildContext(t)
	// minbase and the setup script only: a real build every run, in a
	// couple of minutes, with a hash no other test or daemon uses.
	spec := Spec{Packages: []string{}, Setup: DefaultSetup + "echo built-by-the-test > /etc/sandplane-test\n"}
	hash := spec.Fill().Hash()
	removeByHash(t, cli, hash)
	t.Cleanup(func() { removeByHash(t, cli, hash) })

	first := &safeLog{t: t}
	ref, err := Ensure(ctx, cli, Options{Spec: spec, Progress: first.add})
	require.NoError(t, err)
	assert.Equal(t, Tag(hash), ref)
	assert.Subset(t, first.got(), []string{PhaseBootstrap, PhaseSetup, PhaseImport, PhaseDone})
	assert.NotContains(t, first.got(), PhaseCached)

	second := &safeLog{t: t}
	again, err := Ensure(ctx, cli, Options{Spec: spec, Progress: second.add})
	require.NoError(t, err)
	assert.Equal(t, ref, again)
	assert.Equal(t, []string{PhaseCached}, second.got(), "the second call builds nothing")

	img, err := cli.ImageInspect(ctx, ref)
	require.NoError(t, err)
	assert.Equal(t, hash, img.Config.Labels[LabelHash])
	out := runOnce(t, cli, ref, "id daytona && test -d /home/daytona && cat /etc/sandplane-test")
	assert.Contains(t, out, "uid=1000(daytona)")
	assert.Contains(t, out, "built-by-the-test")
}

func TestCancelledBuildLeavesNothingBehind(t *testing.T) {
	cli := buildingEngine(t)
	ctx, cancel := context.WithCancel(buildContext(t))
	defer cancel()
	// Not t.TempDir: should mounts be left in it, its removal would reach
	// through them.
	tmp, err := os.MkdirTemp("", "baseimage-cancel-")
	require.NoError(t, err)
	t.Cleanup(func() {
		if len(mountsUnder(tmp)) == 0 {
			_ = os.RemoveAll(tmp)
		}
	})
	spec := Spec{Packages: []string{}, Setup: DefaultSetup + "echo cancelled-by-the-test > /etc/sandplane-test\n"}
	hash := spec.Fill().Hash()
	removeByHash(t, cli, hash)

	// debootstrap has mounted /proc and more in the new tree by the time it
	// installs the core packages: killing it there leaves them mounted.
	log := &safeLog{t: t}
	_, err = Ensure(ctx, cli, Options{Spec: spec, TempDir: tmp, Progress: func(p Progress) {
		log.add(p)
		if p.Detail == "Installing core packages" {
			cancel()
		}
	}})
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, mountsUnder(tmp), "mounts left in the root filesystem")
	left, err := filepath.Glob(filepath.Join(tmp, "sandplane-base-*"))
	require.NoError(t, err)
	assert.Equal(t, []string{lockPath(tmp, hash)}, left, "only the lock file stays")
	_, found, err := Find(context.Background(), cli, hash)
	require.NoError(t, err)
	assert.False(t, found)
}

// runOnce runs script with /bin/sh in a container of ref and returns its
// output; it fails t unless the script exits 0.
func runOnce(t *testing.T, cli *client.Client, ref, script string) string {
	t.Helper()
	ctx := t.Context()
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: ref, Entrypoint: []string{"/bin/sh", "-c", script}}, nil, nil, nil, "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}) })
	require.NoError(t, cli.ContainerStart(ctx, c.ID, container.StartOptions{}))
	waitC, errC := cli.ContainerWait(ctx, c.ID, container.WaitConditionNotRunning)
	var code int64
	select {
	case w := <-waitC:
		code = w.StatusCode
	case err := <-errC:
		require.NoError(t, err)
	}
	logs, err := cli.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	require.NoError(t, err)
	defer logs.Close()
	var out bytes.Buffer
	_, err = stdcopy.StdCopy(&out, &out, logs)
	require.NoError(t, err)
	require.Zero(t, code, "%s: %s", script, out.String())
	return out.String()
}

func TestDefaultImageRunsTheToolboxWithDaytonasTools(t *testing.T) {
	cli := buildingEngine(t)
	ctx := buildContext(t)
	// The default image, as the daemon gets it: cached when `sandplane
	// image build` ran before (CI runs it before the tests), else built now.
	ref, err := Ensure(ctx, cli, Options{Progress: (&safeLog{t: t}).add})
	require.NoError(t, err)

	tag := "sandplane-baseimage-test:" + randomHex(t, 6)
	require.NoError(t, LayerToolbox(ctx, cli, Toolbox{
		Base:     ref,
		Binary:   sandplaneBinary(t),
		Tag:      tag,
		Labels:   map[string]string{"io.sandplane.test": "baseimage"},
		Progress: (&safeLog{t: t}).add,
	}))
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true, PruneChildren: true})
	})

	token := randomHex(t, 16)
	url := startToolbox(t, cli, tag, token)
	for _, tc := range []struct{ command, want string }{
		{`bash -c '[[ 1 == 1 ]] && echo bash-ok'`, "bash-ok"},
		{`python3 -c 'print(1+1)'`, "2"},
		{`python -c 'print(3)'`, "3"},
		{`pip3 --version`, "pip "},
		{`node -e 'console.log(40+2)'`, "42"},
		{`npm --version`, "."},
		{`git --version`, "git version"},
		{`curl --version`, "curl "},
		{`printenv HOME`, "/home/daytona"},
		{`pwd`, "/home/daytona"},
		{`id daytona`, "uid=1000(daytona)"},
		{`test -d /home/daytona && stat -c %U /home/daytona`, "daytona"},
		{`ps -e -o comm`, "sandplane"},
		{`ls /etc/ssl/certs/ca-certificates.crt`, "ca-certificates.crt"},
	} {
		t.Run(strings.Fields(tc.command)[0], func(t *testing.T) {
			code, out := execute(t, url, token, tc.command)
			assert.Zero(t, code, out)
			assert.Contains(t, out, tc.want)
		})
	}
}

func TestLayerToolboxOnAMissingBaseIsNotFound(t *testing.T) {
	cli := realEngine(t)
	err := LayerToolbox(t.Context(), cli, Toolbox{Base: "sandplane/base:no-such-image", Binary: []byte("x"), Tag: "sandplane-baseimage-test:missing"})
	assert.Equal(t, provider.NotFound, provider.Code(err), "%v", err)
}

// startToolbox runs the toolbox image tag as the docker runtime does (the
// same port inside and out, on 127.0.0.1, the token in the environment)
// and returns its URL once it answers.
func startToolbox(t *testing.T, cli *client.Client, tag, token string) string {
	t.Helper()
	ctx := t.Context()
	const port = "2280"
	c, err := cli.ContainerCreate(ctx,
		&container.Config{Image: tag, Env: []string{"PORT=" + port, "SANDPLANE_SANDBOX_TOKEN=" + token}, ExposedPorts: nat.PortSet{port + "/tcp": {}}},
		&container.HostConfig{PortBindings: nat.PortMap{port + "/tcp": {{HostIP: "127.0.0.1"}}}},
		nil, nil, "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}) })
	require.NoError(t, cli.ContainerStart(ctx, c.ID, container.StartOptions{}))
	info, err := cli.ContainerInspect(ctx, c.ID)
	require.NoError(t, err)
	bindings := info.NetworkSettings.Ports[port+"/tcp"]
	require.NotEmpty(t, bindings)
	url := "http://127.0.0.1:" + bindings[0].HostPort
	require.Eventually(t, func() bool {
		code, _ := execute(t, url, token, "true")
		return code == 0
	}, time.Minute, 200*time.Millisecond, "the toolbox did not answer at %s", url)
	return url
}

// execute runs command through the toolbox's POST /process/execute, as the
// SDKs' executeCommand does. code is -1 when the toolbox did not answer.
func execute(t *testing.T, url, token, command string) (code int, output string) {
	body, err := json.Marshal(map[string]string{"command": command})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/process/execute", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Daytona-Preview-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return -1, resp.Status + ": " + string(raw)
	}
	var got struct {
		ExitCode int    `json:"exitCode"`
		Result   string `json:"result"`
	}
	require.NoError(t, json.Unmarshal(raw, &got), string(raw))
	return got.ExitCode, got.Result
}

// sandplaneBinary builds this module's sandplane for the engine (linux, the
// host's architecture: realEngine's preflight), static as make build does.
func sandplaneBinary(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "sandplane")
	cmd := exec.Command("go", "build", "-o", out, "github.com/sandplane/sandplane/cmd/sandplane")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", msg)
	bin, err := os.ReadFile(out)
	require.NoError(t, err)
	return bin
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}
