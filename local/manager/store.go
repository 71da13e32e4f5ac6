package manager

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandplane/sandplane/local/runtime"
	"github.com/sandplane/sandplane/provider"
)

const (
	recordFile = "sandbox.json"
	envFile    = "runtime-env.json"
	trashDir   = ".trash"
	corruptDir = ".corrupt"
	// recordVersion is bumped on incompatible changes to record.
	recordVersion = 1
)

// record is what sandbox.json holds. Env values are not here: they live in
// runtime-env.json, mode 0600, so that the registry can be read and logged
// without leaking secrets.
type record struct {
	Version          int               `json:"version"`
	ID               string            `json:"id"`
	Name             string            `json:"name"`
	State            provider.State    `json:"state"`
	Runtime          provider.Runtime  `json:"runtime"`
	Snapshot         string            `json:"snapshot"`
	Labels           map[string]string `json:"labels"`
	Port             int               `json:"port"`
	LastPort         int               `json:"lastPort,omitempty"`
	CreatedAt        time.Time         `json:"createdAt"`
	UpdatedAt        time.Time         `json:"updatedAt"`
	LastActivityAt   time.Time         `json:"lastActivityAt"`
	AutoStopInterval int               `json:"autoStopInterval"`
	ErrorReason      string            `json:"errorReason,omitempty"`
	// StopReason is why the stop in progress was asked for (reasonDeleted
	// for a delete), kept while the state is stopping so that a restart
	// finishes it for the same reason.
	StopReason string          `json:"stopReason,omitempty"`
	Handle     *runtime.Handle `json:"handle,omitempty"`
	// Creating is true until the create was answered. A record found with it
	// after a restart belongs to a create that never finished, and is rolled
	// back.
	Creating bool `json:"creating,omitempty"`
}

func (r *record) clone() *record {
	c := *r
	c.Labels = cloneMap(r.Labels)
	if r.Handle != nil {
		h := *r.Handle
		c.Handle = &h
	}
	return &c
}

// writeFileAtomic writes data so that a crash leaves either the old file or
// the new one, never a torn one: temp file, fsync, rename, fsync of the dir.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (m *Manager) dir(id string) string { return filepath.Join(m.opts.Root, id) }

func (m *Manager) persist(r *record) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(m.dir(r.ID), recordFile), data, 0o644); err != nil {
		return provider.Errorf(provider.Internal, "persist sandbox %s: %w", r.ID, err)
	}
	return nil
}

func (m *Manager) writeEnv(id string, env map[string]string) error {
	data, err := json.Marshal(env)
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(m.dir(id), envFile), data, 0o600)
}

func (m *Manager) readEnv(id string) (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(m.dir(id), envFile))
	if os.IsNotExist(err) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("%s: %w", envFile, err)
	}
	return env, nil
}

// removeDir deletes a sandbox directory by first renaming it into the trash,
// so that a crash midway never leaves a half-deleted sandbox that looks live.
func (m *Manager) removeDir(id string) error {
	trash := filepath.Join(m.opts.Root, trashDir)
	if err := os.MkdirAll(trash, 0o700); err != nil {
		return err
	}
	dst := filepath.Join(trash, fmt.Sprintf("%s-%d", id, m.clk.Now().UnixNano()))
	if err := os.Rename(m.dir(id), dst); err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	return os.RemoveAll(dst)
}

// loadRecords reads every sandbox.json under root. A record that cannot be
// parsed is moved aside into .corrupt (never deleted) and reported.
func (m *Manager) loadRecords() ([]*record, error) {
	entries, err := os.ReadDir(m.opts.Root)
	if err != nil {
		return nil, err
	}
	var recs []*record
	for _, e := range entries {
		if !e.IsDir() || e.Name()[0] == '.' {
			continue
		}
		path := filepath.Join(m.opts.Root, e.Name(), recordFile)
		data, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			if m.unborn(e.Name()) {
				// A create that crashed before its first record: nothing
				// was spawned yet, but the id would stay taken for good.
				if err := m.removeDir(e.Name()); err != nil {
					m.log.Error("remove directory of a create that never wrote its record", "sandbox", e.Name(), "err", err)
				}
			}
			continue // not a sandbox directory
		}
		var r record
		if err == nil {
			err = json.Unmarshal(data, &r)
		}
		if err == nil && (r.ID != e.Name() || r.Version > recordVersion) {
			err = fmt.Errorf("record id %q or version %d does not match its directory", r.ID, r.Version)
		}
		if err != nil {
			m.quarantine(e.Name(), err)
			continue
		}
		if r.Labels == nil {
			r.Labels = map[string]string{}
		}
		recs = append(recs, &r)
	}
	return recs, nil
}

// unborn reports whether the directory of id holds nothing but what a
// create writes before its first record: the env file and temp files.
// Anything else means the directory is not ours to remove.
func (m *Manager) unborn(id string) bool {
	files, err := os.ReadDir(m.dir(id))
	if err != nil {
		return false
	}
	for _, f := range files {
		name := f.Name()
		temp := strings.HasPrefix(name, "."+recordFile+".tmp-") || strings.HasPrefix(name, "."+envFile+".tmp-")
		if !f.Type().IsRegular() || (name != envFile && !temp) {
			return false
		}
	}
	return true
}

func (m *Manager) quarantine(name string, cause error) {
	dst := filepath.Join(m.opts.Root, corruptDir)
	_ = os.MkdirAll(dst, 0o700)
	dst = filepath.Join(dst, fmt.Sprintf("%s-%d", name, m.clk.Now().UnixNano()))
	err := os.Rename(filepath.Join(m.opts.Root, name), dst)
	m.log.Error("unreadable sandbox record moved aside", "sandbox", name, "cause", cause, "to", dst, "moveErr", err)
}

func cloneMap(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}
