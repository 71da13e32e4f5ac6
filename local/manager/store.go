package manager

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/local/driver"
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
	Version  int               `json:"version"`
	ID       string            `json:"id"`
	Name     string            `json:"name"`
	State    provider.State    `json:"state"`
	Runtime  provider.Runtime  `json:"runtime"`
	Snapshot string            `json:"snapshot"`
	Labels   map[string]string `json:"labels"`
	// Port is the host port of the workload's own port while it runs;
	// SandboxPort is that port inside the sandbox (0 in records of daemons
	// before ports were declared: the snapshot's). ExtraPorts are the host
	// ports of the other declared ports, by sandbox port. The Last ones are
	// taken again by the next start when free.
	Port           int         `json:"port"`
	LastPort       int         `json:"lastPort,omitempty"`
	SandboxPort    int         `json:"sandboxPort,omitempty"`
	ExtraPorts     map[int]int `json:"extraPorts,omitempty"`
	LastExtraPorts map[int]int `json:"lastExtraPorts,omitempty"`
	// HostIP is the loopback address the host ports of the last spawn are
	// bound on, the sandbox's own (launcher.OwnAddress) when it has a
	// network of its own; "" is 127.0.0.1: a workload on the host's
	// network, or one spawned before sandboxes had addresses of their own.
	// Recorded, not derived, so that a daemon that adopts the workload
	// after a restart reaches it where it listens.
	HostIP           string    `json:"hostIp,omitempty"`
	CreatedAt        time.Time `json:"createdAt"`
	UpdatedAt        time.Time `json:"updatedAt"`
	LastActivityAt   time.Time `json:"lastActivityAt"`
	AutoStopInterval int       `json:"autoStopInterval"`
	// CPU (cores) and Memory (GiB) are the limits the create asked for;
	// the docker runtime enforces them, zero is none.
	CPU    int `json:"cpu,omitempty"`
	Memory int `json:"memory,omitempty"`
	// Public makes the sandbox's previews answer without its token.
	Public bool `json:"public,omitempty"`
	// AutoDeleteInterval is the minutes stopped before auto-delete; nil
	// (the default, and every record before auto-delete) is never.
	AutoDeleteInterval *int `json:"autoDeleteInterval,omitempty"`
	// SessionID is the agent session the sandbox belongs to, nil for none.
	SessionID   *string `json:"sessionId,omitempty"`
	ErrorReason string  `json:"errorReason,omitempty"`
	// StopReason is why the stop in progress was asked for (reasonDeleted
	// for a delete), kept while the state is stopping so that a restart
	// finishes it for the same reason.
	StopReason string         `json:"stopReason,omitempty"`
	Handle     *driver.Handle `json:"handle,omitempty"`
	// Creating is true until the create was answered. A record found with it
	// after a restart belongs to a create that never finished, and is rolled
	// back.
	Creating bool `json:"creating,omitempty"`
}

func (r *record) clone() *record {
	c := *r
	c.Labels = cloneMap(r.Labels)
	c.ExtraPorts = cloneInts(r.ExtraPorts)
	c.LastExtraPorts = cloneInts(r.LastExtraPorts)
	c.SessionID = clonePtr(r.SessionID)
	c.AutoDeleteInterval = clonePtr(r.AutoDeleteInterval)
	if r.Handle != nil {
		h := *r.Handle
		c.Handle = &h
	}
	return &c
}

func cloneInts(m map[int]int) map[int]int {
	if m == nil {
		return nil
	}
	c := make(map[int]int, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// writeFileAtomic writes data so that a crash leaves either the old file or
// the new one, never a torn one: temp file, fsync, rename, and, when
// durable, fsync of the dir, without which a machine crash may bring back
// the old file.
func writeFileAtomic(path string, data []byte, perm os.FileMode, durable bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if err := fillSynced(f, data, perm); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if !durable {
		return nil
	}
	return syncDir(dir)
}

// nextFile is where a transition prepares the record it writes once its
// workload is up (see prepare), beside recordFile, and where the record it
// replaced stays afterwards, where the filesystem exchanges them. Nothing
// reads it: the next prepare replaces it, the directory's removal takes it.
const nextFile = "." + recordFile + ".next"

// prepared is a record written and synced before it is due, while a
// workload starts, so that writing it when it is due costs a rename and,
// durable, the directory's sync instead of a new file, its write and its
// sync as well.
type prepared struct {
	// base is the record it follows: it may replace only that one.
	base *record
	next *record
	dir  string
	done chan struct{}
	err  error // set before done is closed
}

// prepare writes what fn makes of e's record now into nextFile, in the
// background, stamped now: the time the workload was started, not the
// time it was up. The caller holds e.op, so that no other transition
// prepares meanwhile, and waits for it (write or discard) before anything
// may remove e's directory.
func (m *Manager) prepare(e *entry, fn func(r *record)) *prepared {
	m.mu.Lock()
	base := e.rec
	m.mu.Unlock()
	next := base.clone()
	fn(next)
	next.UpdatedAt = m.clk.Now()
	p := &prepared{base: base, next: next, dir: m.dir(base.ID), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		data, err := encodeRecord(next)
		if err == nil {
			err = writeSynced(filepath.Join(p.dir, nextFile), data, 0o644)
		}
		p.err = err
	}()
	return p
}

// follows reports whether p, ready, may replace cur. A nil p follows
// nothing.
func (p *prepared) follows(cur *record) bool {
	if p == nil {
		return false
	}
	<-p.done
	return p.err == nil && p.base == cur
}

// install puts p's record in place, as writeFileAtomic's rename does,
// atomically: exchanged with the record it replaces, which stays behind as
// nextFile, where the filesystem can, renamed over it elsewhere. A rename
// over a file frees the old one within the call, which on ext4 costs more
// than the directory's sync; the next prepare's removal of it pays for
// that, while its workload starts. Only a regular file is exchanged: anything
// else in the record's place goes to the rename, which refuses what it
// refuses (a directory). The caller holds the entry's persist lock.
func (p *prepared) install(durable bool) error {
	next, cur := filepath.Join(p.dir, nextFile), filepath.Join(p.dir, recordFile)
	var err error = unix.ENOSYS
	if fi, lerr := os.Lstat(cur); lerr == nil && fi.Mode().IsRegular() {
		err = renameExchange(next, cur)
	}
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		err = os.Rename(next, cur)
	}
	if err != nil {
		return storageErr(err, "persist sandbox %s", p.next.ID)
	}
	if !durable {
		return nil
	}
	if err := syncDir(p.dir); err != nil {
		return storageErr(err, "persist sandbox %s", p.next.ID)
	}
	return nil
}

// discard waits for p and removes its file. A nil p does nothing.
func (p *prepared) discard() {
	if p == nil {
		return
	}
	<-p.done
	if p.err == nil {
		_ = os.Remove(filepath.Join(p.dir, nextFile))
	}
}

// writeSynced writes data to a new file at path, with perm, and syncs it.
// Whatever was at path is removed first, never followed nor written into.
func writeSynced(path string, data []byte, perm os.FileMode) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	return fillSynced(f, data, perm)
}

// fillSynced gives the new file f perm (past the umask), writes data,
// syncs and closes it; f is closed whatever fails.
func fillSynced(f *os.File, data []byte, perm os.FileMode) error {
	err := f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (m *Manager) dir(id string) string { return filepath.Join(m.opts.Root, id) }

// persist writes r, durably: a state it records survives a machine crash.
func (m *Manager) persist(r *record) error { return persistIn(m.dir(r.ID), r, true) }

// persistIn writes r as dir's sandbox.json, durably or not (see
// writeFileAtomic). resource_exhausted (a full disk), internal.
func persistIn(dir string, r *record, durable bool) error {
	data, err := encodeRecord(r)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, recordFile), data, 0o644, durable); err != nil {
		return storageErr(err, "persist sandbox %s", r.ID)
	}
	return nil
}

// encodeRecord is r as a record file holds it.
func encodeRecord(r *record) ([]byte, error) {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, provider.Errorf(provider.Internal, "encode sandbox %s: %w", r.ID, err)
	}
	return data, nil
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
	trashed, err := m.trash(id)
	if err != nil || trashed == "" {
		return err
	}
	return os.RemoveAll(trashed)
}

// trash renames a sandbox directory into the trash, where nothing reads it
// and the next start removes what is left, and returns its new path; ""
// when there was none. The rename is a delete's commit point; the removal
// of what it moved may follow without any lock.
func (m *Manager) trash(id string) (string, error) {
	trash := filepath.Join(m.opts.Root, trashDir)
	if err := os.MkdirAll(trash, 0o700); err != nil {
		return "", err
	}
	dst := filepath.Join(trash, fmt.Sprintf("%s-%d", id, m.clk.Now().UnixNano()))
	if err := os.Rename(m.dir(id), dst); err != nil {
		if os.IsNotExist(err) {
			return "", nil
		}
		return "", err
	}
	return dst, nil
}

// registry is what loadRecords finds under the root.
type registry struct {
	records []*record
	// unreadable are the sandbox directories whose record cannot be read,
	// by directory name.
	unreadable map[string]error
	// foreign are the names of folders in the root that are not sandboxes.
	foreign []string
}

// loadRecords reads every sandbox.json under root. Nothing is moved or
// removed: a record that cannot be read is reported as unreadable, and a
// folder without a record as foreign, since a create only ever puts a
// directory in place with its first record in it (see stage).
func (m *Manager) loadRecords() (registry, error) {
	reg := registry{unreadable: map[string]error{}}
	entries, err := os.ReadDir(m.opts.Root)
	if err != nil {
		return reg, err
	}
	for _, e := range entries {
		name := e.Name()
		if name[0] == '.' || e.Type().IsRegular() {
			continue // ours (.trash, .corrupt, staging) or a file such as daemon.lock
		}
		if !e.IsDir() {
			reg.foreign = append(reg.foreign, name)
			continue
		}
		path := filepath.Join(m.opts.Root, name, recordFile)
		r, err := loadRecord(path, name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			reg.foreign = append(reg.foreign, name)
		case err != nil:
			reg.unreadable[name] = err
		default:
			reg.records = append(reg.records, r)
		}
	}
	return reg, nil
}

// loadRecord reads and checks the record at path, which must belong to the
// directory named id. fs.ErrNotExist when there is none.
func loadRecord(path, id string) (*record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	switch {
	case r.Version > recordVersion:
		return nil, fmt.Errorf("%s has version %d, newer than this daemon's %d: upgrade sandplane", path, r.Version, recordVersion)
	case r.ID != id:
		return nil, fmt.Errorf("%s names sandbox %q, not its directory %q", path, r.ID, id)
	}
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
	return &r, nil
}

// stagingPrefix starts the name of a directory a create fills before it
// renames it into place. Such a directory left in the root is a create
// that crashed before its sandbox existed, and is removed at start.
const stagingPrefix = ".staging-"

// stage makes a private directory in the root for a new sandbox's first
// files.
func (m *Manager) stage(id string) (string, error) {
	return os.MkdirTemp(m.opts.Root, stagingPrefix+id+"-")
}

// publish renames a staged directory to the sandbox's own name, never over
// anything already there. already_exists when the name is taken.
func (m *Manager) publish(staged, id string) error {
	dst := m.dir(id)
	err := renameNoReplace(staged, dst)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// A filesystem without RENAME_NOREPLACE: check, then rename. A
		// rename over an empty directory would succeed, so the check is
		// what keeps a folder the user just made.
		if _, lerr := os.Lstat(dst); lerr == nil {
			err = unix.EEXIST
		} else {
			err = os.Rename(staged, dst)
		}
	}
	switch {
	case err == nil:
		return nil // durable once the root is synced: see makeDir
	case errors.Is(err, unix.EEXIST), errors.Is(err, unix.ENOTEMPTY):
		return provider.Errorf(provider.AlreadyExists, "%s already exists and is not a sandbox of this daemon: pick another id, or move that folder out of the root", dst)
	}
	return provider.Errorf(provider.Internal, "move the new sandbox directory into place: %w", err)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// clearLeftovers removes what crashed operations left in the root's private
// directories: deletes past their commit point and creates before theirs.
func (m *Manager) clearLeftovers() {
	_ = os.RemoveAll(m.dir(trashDir))
	entries, err := os.ReadDir(m.opts.Root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), stagingPrefix) && e.IsDir() {
			if err := os.RemoveAll(m.dir(e.Name())); err != nil {
				m.log.Error("remove the directory of a create that never finished", "dir", e.Name(), "err", err)
			}
		}
	}
}

// quarantine moves the directory name out of the root's namespace into
// .corrupt, keeping its contents for whoever wants to look. Whatever sits at
// .corrupt and is not a directory (a file, a symlink) is moved aside first,
// never followed nor deleted.
func (m *Manager) quarantine(name string) (string, error) {
	dir := m.dir(corruptDir)
	if fi, err := os.Lstat(dir); err == nil && !fi.IsDir() {
		aside := fmt.Sprintf("%s.displaced-%d", dir, m.clk.Now().UnixNano())
		if err := os.Rename(dir, aside); err != nil {
			return "", fmt.Errorf("move %s, which is not a directory, aside: %w", dir, err)
		}
		m.log.Warn("moved a non-directory found at the quarantine path aside", "path", dir, "to", aside)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	dst := filepath.Join(dir, fmt.Sprintf("%s-%d", name, m.clk.Now().UnixNano()))
	if err := os.Rename(m.dir(name), dst); err != nil {
		return "", err
	}
	return dst, nil
}

func cloneMap(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// clonePtr copies an optional value, so that a record shares nothing with
// its caller.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// storageErr is the error of a write to the daemon's root that failed with
// err, what naming the write: resource_exhausted, saying what to free, when
// the disk or the quota is full (the write left nothing half-done: every
// record is written beside the old one and renamed over it), internal
// otherwise.
func storageErr(err error, what string, args ...any) error {
	what = fmt.Sprintf(what, args...)
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return provider.Errorf(provider.ResourceExhausted,
			"%s: %v: the disk that holds the daemon's root is full; free space there (delete sandboxes you no longer need, or what they wrote), then retry", what, err)
	}
	return provider.Errorf(provider.Internal, "%s: %w", what, err)
}
