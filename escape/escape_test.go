package escape_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/escape"
)

// TestEscape runs the suite on every runtime the machine has: each entry
// must be blocked on every runtime but those its Gaps name, and escape on
// those (where the gap's condition holds here).
func TestEscape(t *testing.T) {
	if testing.Short() {
		t.Skip("the escape suite runs real sandboxes")
	}
	for _, rt := range escape.Runtimes {
		t.Run(string(rt), func(t *testing.T) {
			w := setUp(t, rt)
			base := w.hostBaseline(t)
			got := w.run(t)
			report(t, rt, got)
			for _, e := range escape.Entries {
				v, ok := got[e.Name]
				if !assert.True(t, ok, "%s: never attempted", e.Name) {
					continue
				}
				want := expected(t, e, rt, base)
				assert.Equal(t, want, v.outcome, "%s on %s: %s (secrets read: %v)", e.Name, rt, v.evidence, v.leaked)
			}
			for name := range got {
				assert.NotNil(t, escape.Lookup(name), "%s is attempted but not in escape.Entries", name)
			}
		})
	}
}

// setUp makes rt's world, or skips t where the machine lacks rt.
func setUp(t *testing.T, rt escape.Runtime) *world {
	t.Helper()
	switch rt {
	case escape.Native:
		// The native column is the unisolated runtime, which a default
		// daemon runs only where bubblewrap cannot: asked for explicitly.
		return newWorld(t, rt, "isolation: none\n", nil)
	case escape.NativeBwrap:
		if err := bwrapWorks(); err != nil {
			t.Skip(err)
		}
		return newWorld(t, rt, "isolation: bwrap\n", nil)
	case escape.Docker:
		dw := newDockerWorld(t)
		return newWorld(t, rt, dw.config(), dw)
	}
	t.Fatalf("unknown runtime %s", rt)
	return nil
}

// run tries every entry: the probe's from inside A, the host-driven ones
// through A's toolbox and the daemon, A's delete last.
func (w *world) run(t *testing.T) map[string]verdict {
	t.Helper()
	w.installProbe(t)
	got := w.runProbe(t)
	got["files-api-neighbour"] = w.worst(
		w.tryFileAPI(t, w.bState, filepath.Join(w.bState, "runtime-env.json"), "escape-neighbour"),
		w.tryFileAPI(t, filepath.Dir(w.bSecretFile), w.bSecretFile, "escape-neighbour"),
	)
	got["files-api-host"] = w.tryFileAPI(t, w.hostDir, filepath.Join(w.hostDir, "canary"), "escape-host")
	w.stillWorks(t)
	got["leftover-after-delete"] = w.tryLeftover(t)
	return got
}

// worst is the worse of verdicts: an escape of any one.
func (w *world) worst(vs ...verdict) verdict {
	out := verdict{outcome: escape.Blocked}
	var ev []string
	for _, v := range vs {
		ev = append(ev, v.evidence)
		out.leaked = append(out.leaked, v.leaked...)
		if v.outcome == escape.Escaped {
			out.outcome = escape.Escaped
		}
	}
	out.evidence = strings.Join(ev, " | ")
	return out
}

// expected is what e must come to on rt on this machine.
func expected(t *testing.T, e escape.Entry, rt escape.Runtime, base map[string]escape.Result) escape.Outcome {
	t.Helper()
	gap, ok := e.Gaps[rt]
	if !ok {
		return escape.Blocked
	}
	switch gap.When {
	case escape.Always:
	case escape.AsRoot:
		if os.Geteuid() != 0 {
			return escape.Blocked
		}
	case escape.HostCan:
		r, ok := base[e.Name]
		require.True(t, ok, "%s: the host baseline never tried it", e.Name)
		return r.Outcome
	default:
		t.Fatalf("%s: unknown condition %q", e.Name, gap.When)
	}
	return escape.Escaped
}

// report logs the runtime's results as a table, for the closing note.
func report(t *testing.T, rt escape.Runtime, got map[string]verdict) {
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	fmt.Fprintf(&b, "results on %s:\n", rt)
	for _, n := range names {
		v := got[n]
		fmt.Fprintf(&b, "  %-22s %-8s leaked=%v %s\n", n, v.outcome, v.leaked, v.evidence)
	}
	t.Log(b.String())
}

// TestDocsHoldTheTable checks that docs/security.md holds escape.Table as
// it is, and that every entry says, for every runtime, what stops it or
// why nothing does.
func TestDocsHoldTheTable(t *testing.T) {
	doc, err := os.ReadFile("../docs/security.md")
	require.NoError(t, err)
	if !strings.Contains(string(doc), escape.Table()) {
		t.Errorf("docs/security.md must hold the escape table as escape.Table makes it:\n%s", escape.Table())
	}
	for _, e := range escape.Entries {
		for _, rt := range escape.Runtimes {
			g, gap := e.Gaps[rt]
			assert.True(t, gap && g.Why != "" || !gap && e.Stops[rt] != "", "%s on %s: say what stops it, or why nothing does", e.Name, rt)
		}
	}
}

// TestProbeTriesEveryProbeEntry keeps the probe and the table in step: an
// entry of the table that is not host-driven must be the probe's.
func TestProbeTriesEveryProbeEntry(t *testing.T) {
	src, err := os.ReadFile("probe/attempts.go")
	require.NoError(t, err)
	for _, e := range escape.Entries {
		assert.Equal(t, !e.Host, strings.Contains(string(src), `{"`+e.Name+`", `), "%s: the probe tries it exactly when the host does not", e.Name)
	}
}

// hostBaseline runs the probe on the host itself, as the daemon's user and
// outside any sandbox: what a sandbox that adds no barrier of its own
// reaches. Its privileged attempts (mounts, cgroups) act on directories of
// the test's own and undo themselves; it runs no fork bomb and fills no
// disk.
func (w *world) hostBaseline(t *testing.T) map[string]escape.Result {
	t.Helper()
	dir := t.TempDir()
	cfg := w.cfg
	cfg.WorkDir, cfg.Links, cfg.Bomb, cfg.Fill = dir, nil, false, false
	b, err := jsonBytes(cfg)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600))
	probe := filepath.Join(dir, "probe")
	require.NoError(t, os.WriteFile(probe, probeBinary(t), 0o700))
	out, err := exec.Command(probe, "run", filepath.Join(dir, "config.json")).Output()
	require.NoError(t, err, "the probe on the host")
	return parseResults(t, string(out))
}
