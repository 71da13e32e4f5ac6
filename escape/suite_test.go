package escape_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/escape"
	"github.com/sandplane/sandplane/internal/testdaemon"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/wire"
)

// world is one runtime's setting for the suite: a daemon with a token, a
// simulator, a host canary file, service and process, and two sandboxes,
// A (the attacker, running the probe) and B (the neighbour).
type world struct {
	rt      escape.Runtime
	d       *testdaemon.Daemon
	a, b    *box
	secrets secrets
	// hostDir holds the host user's canary file.
	hostDir string
	// bFiles is where B's files are on the host: its secret file and its
	// state in the daemon root.
	bSecretFile, bState string
	cfg                 probeConfig
	docker              *dockerWorld
}

// probeConfig is escape/probe's config; the test builds it as JSON.
type probeConfig struct {
	Hosts           []string          `json:"hosts"`
	DaemonPort      int               `json:"daemonPort"`
	SimPort         int               `json:"simPort"`
	HostServicePort int               `json:"hostServicePort"`
	Neighbour       probeNeighbour    `json:"neighbour"`
	Paths           []string          `json:"paths"`
	HostFile        string            `json:"hostFile"`
	Walk            []string          `json:"walk"`
	DockerSockets   []string          `json:"dockerSockets"`
	WorkDir         string            `json:"workDir"`
	Links           map[string]string `json:"links"`
	TokenSearch     []string          `json:"tokenSearch"`
	Fill            bool              `json:"fill"`
	Bomb            bool              `json:"bomb"`
}

type probeNeighbour struct {
	ID          string   `json:"id"`
	Toolbox     []string `json:"toolbox"`
	PreviewPath string   `json:"previewPath"`
	PIDs        []int    `json:"pids"`
}

const bSecretName = "escape-secret.txt"

// newWorld sets up rt's world: config is the daemon's YAML.
func newWorld(t *testing.T, rt escape.Runtime, config string, dw *dockerWorld) *world {
	t.Helper()
	w := &world{rt: rt, docker: dw, secrets: secrets{
		"daemon token": secret("daemon-token"), "daemon env": secret("daemon-env"),
		"neighbour env": secret("neighbour-env"), "neighbour file": secret("neighbour-file"),
		"host file": secret("host-file"), "host service": secret("host-service"), "host process": secret("host-process"),
		"simulator api key": secret("sim-api"), "simulator admin key": secret("sim-admin"),
	}}
	w.hostDir = t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(w.hostDir, "canary"), []byte(w.secrets["host file"]+"\n"), 0o600))
	startHostProcess(t, w.secrets["host process"])
	servicePort := startHostService(t, w.secrets["host service"])
	simPort := startSim(t, w.secrets["simulator api key"], w.secrets["simulator admin key"])

	var root string
	if dw != nil {
		root = t.TempDir()
		t.Cleanup(func() { dw.removeRoot(t, root) })
	}
	w.d = testdaemon.Start(t, testdaemon.Options{Root: root, Token: w.secrets["daemon token"], Config: config,
		Env: []string{"ESCAPE_DAEMON_SECRET=" + w.secrets["daemon env"]}})
	if rt != escape.Docker {
		info, err := w.d.P.Info(context.Background())
		require.NoError(t, err)
		if info.Containment != wire.PIDNamespace {
			t.Skipf("native sandboxes are contained by %q here: the table holds for pid-namespace containment, where /proc, signals and a delete are the sandbox's own", info.Containment)
		}
	}
	prt := provider.RuntimeNative
	if rt == escape.Docker {
		prt = provider.RuntimeDocker
	}
	w.a = newBox(t, w.d, prt, "attacker", nil)
	w.b = newBox(t, w.d, prt, "neighbour", map[string]string{"KEY": w.secrets["neighbour env"]})
	code, body := w.b.upload(t, filepath.Join(w.b.workDir, bSecretName), []byte(w.secrets["neighbour file"]+"\n"))
	require.Equal(t, 200, code, "%s", body)
	prev, err := w.d.P.PreviewURL(context.Background(), w.b.ID, 0)
	require.NoError(t, err)
	w.secrets["neighbour token"] = prev.Token
	w.bState = filepath.Join(w.d.Root, w.b.ID)
	w.bSecretFile = w.hostPathOfB(t)
	w.cfg = w.probeConfig(t, servicePort, simPort, prev.URL)
	return w
}

// hostPathOfB finds B's secret file on the host.
func (w *world) hostPathOfB(t *testing.T) string {
	t.Helper()
	if w.docker != nil {
		return filepath.Join(w.docker.mergedDir(t, w.b.ID), w.b.workDir, bSecretName)
	}
	var found string
	_ = filepath.WalkDir(w.d.Root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == bSecretName && strings.Contains(p, w.b.ID) {
			found = p
		}
		return nil
	})
	if found == "" {
		found = filepath.Join(w.b.workDir, bSecretName) // no isolation: the path is the host's
	}
	b, err := os.ReadFile(found)
	require.NoError(t, err, "B's secret file on the host")
	require.Contains(t, string(b), w.secrets["neighbour file"])
	return found
}

// probeConfig is what A's probe is told: addresses, ids and paths an
// attacker could learn, never a secret.
func (w *world) probeConfig(t *testing.T, servicePort, simPort int, previewURL string) probeConfig {
	t.Helper()
	_, daemonPort := splitPort(t, w.d.Addr)
	hosts := []string{"127.0.0.1"}
	toolbox := []string{fmt.Sprintf("http://127.0.0.1:%d", w.b.Port)}
	if w.docker != nil {
		hosts = append(hosts, "host.docker.internal")
		toolbox = append(toolbox, fmt.Sprintf("http://host.docker.internal:%d", w.b.Port))
		toolbox = append(toolbox, w.docker.containerURLs(t, w.b.ID)...)
	}
	preview := "/preview/"
	if u, err := url.Parse(previewURL); err == nil && strings.HasPrefix(u.Path, "/preview/") {
		preview = u.Path
	}
	if !strings.HasSuffix(preview, "/") {
		preview += "/"
	}
	var pids []int
	for _, pid := range hostProcesses(t, "environ", "SANDPLANE_SANDBOX_ID="+w.b.ID) {
		pids = append(pids, pid)
	}
	return probeConfig{
		Hosts: hosts, DaemonPort: daemonPort, SimPort: simPort, HostServicePort: servicePort,
		Neighbour: probeNeighbour{ID: w.b.ID, Toolbox: toolbox, PreviewPath: preview, PIDs: pids},
		Paths: []string{
			filepath.Join(w.bState, "runtime-env.json"), filepath.Join(w.bState, "sandbox-token"),
			filepath.Join(w.bState, "sandbox.json"), w.bSecretFile,
		},
		HostFile:      filepath.Join(w.hostDir, "canary"),
		Walk:          []string{w.bState},
		DockerSockets: []string{"/var/run/docker.sock", "/run/docker.sock"},
		WorkDir:       w.a.workDir,
		Links: map[string]string{
			"to-neighbour": w.bState, "to-neighbour-work": filepath.Dir(w.bSecretFile),
			"to-host": w.hostDir, "to-root": "/",
		},
		// Where testdaemon keeps the daemon's token file, as a user's home
		// keeps theirs.
		TokenSearch: []string{os.TempDir()},
		Bomb:        w.ownPidsLimit(t),
		Fill:        w.ownQuota(t),
	}
}

// ownPidsLimit reports, from the host, whether A runs under a pids limit
// of its own, the only place where the probe may run a fork bomb.
func (w *world) ownPidsLimit(t *testing.T) bool {
	if w.docker != nil {
		return w.docker.pidsLimit(t, w.a.ID) > 0
	}
	// A native sandbox stays in the daemon's cgroup: any limit there is
	// the daemon's and the host's too.
	return false
}

// ownQuota reports, from the host, whether A writes under a disk quota
// of its own, the only place where the probe may fill a disk.
func (w *world) ownQuota(t *testing.T) bool {
	if w.docker != nil {
		return w.docker.storageQuota(t, w.a.ID)
	}
	return false // native sandboxes write to the daemon root's file system
}

// installProbe uploads the probe and its config into A.
func (w *world) installProbe(t *testing.T) {
	t.Helper()
	code, body := w.a.upload(t, filepath.Join(w.a.workDir, "escape-probe"), probeBinary(t))
	require.Equal(t, 200, code, "%s", body)
	cfg, err := json.Marshal(w.cfg)
	require.NoError(t, err)
	code, body = w.a.upload(t, filepath.Join(w.a.workDir, "escape-config.json"), cfg)
	require.Equal(t, 200, code, "%s", body)
	exit, out := w.a.exec(t, "chmod 755 escape-probe && ./escape-probe links escape-config.json")
	require.Zero(t, exit, out)
}

// verdict is the suite's judgement of one entry on one runtime.
type verdict struct {
	outcome  escape.Outcome
	evidence string
	// leaked names the planted secrets the attempt could read.
	leaked []string
}

// judge turns the probe's line into a verdict: the probe's claim of an
// escape stands, and so does any secret found in what it read.
func (w *world) judge(r escape.Result) verdict {
	v := verdict{outcome: r.Outcome, evidence: r.Evidence}
	v.leaked = w.secrets.found(strings.Join(r.Read, "\n") + "\n" + r.Evidence)
	if len(v.leaked) > 0 {
		v.outcome = escape.Escaped
	}
	return v
}

// runProbe runs the probe's attempts in A and judges each.
func (w *world) runProbe(t *testing.T) map[string]verdict {
	t.Helper()
	exit, out := w.a.exec(t, "./escape-probe run escape-config.json")
	require.Zero(t, exit, "the probe failed: %s", out)
	res := parseResults(t, out)
	out2 := map[string]verdict{}
	for name, r := range res {
		require.True(t, r.Attempted, name)
		out2[name] = w.judge(r)
	}
	return out2
}

// splitPort is addr's host and port.
func splitPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	u, err := url.Parse("http://" + addr)
	require.NoError(t, err)
	var port int
	_, err = fmt.Sscan(u.Port(), &port)
	require.NoError(t, err)
	return u.Hostname(), port
}

// stillWorks checks that the host and the neighbour answer after the
// attempts: the daemon lists, B runs a command.
func (w *world) stillWorks(t *testing.T) {
	t.Helper()
	_, err := w.d.P.List(context.Background(), provider.ListOptions{})
	assert.NoError(t, err, "the daemon answers")
	exit, out := w.b.exec(t, "echo still-here")
	assert.Zero(t, exit)
	assert.Contains(t, out, "still-here", "the neighbour works")
	b, err := os.ReadFile(w.bSecretFile)
	assert.NoError(t, err)
	assert.Contains(t, string(b), w.secrets["neighbour file"], "B's file is intact")
}

// bwrapWorks says why bwrap cannot isolate here, or nil: installed, and
// able to make the namespaces the runtime asks for.
func bwrapWorks() error {
	if _, err := exec.LookPath("bwrap"); err != nil {
		return fmt.Errorf("bubblewrap is not installed: apt-get install bubblewrap")
	}
	out, err := exec.Command("bwrap", "--unshare-all", "--unshare-user", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true").CombinedOutput()
	if err != nil {
		return fmt.Errorf("bwrap cannot make its namespaces here: %v: %s", err, out)
	}
	return nil
}
