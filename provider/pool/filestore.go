package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sandplane/sandplane/provider"
)

// FileStore is a Store in one JSON file, so that a host server that
// restarts finds its parked sandboxes again. Every change is written to a
// temporary file, synced, renamed over the old one and the directory
// synced: a crash leaves the old records or the new ones, never a mix. The
// file is 0600 (it holds the fingerprint secret). One process uses a file at
// a time: a second OpenFileStore of it fails while the first is open.
type FileStore struct {
	path string
	lock *os.File

	mu     sync.Mutex
	s      *state
	closed bool
}

var _ Store = (*FileStore)(nil)

const fileStoreVersion = 1

// OpenFileStore opens the store at path, creating it (and its directory,
// 0700) when missing. failed_precondition: another process has it open.
// internal: the file cannot be read or parsed; it is left as it is.
func OpenFileStore(path string) (*FileStore, error) {
	if path == "" {
		return nil, provider.Errorf(provider.InvalidArgument, "a file store needs a path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, provider.Errorf(provider.Internal, "pool store directory: %v", err)
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, provider.Errorf(provider.Internal, "pool store lock: %v", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, provider.Errorf(provider.FailedPrecondition, "pool store %s is open in another process: one pool per store", path)
		}
		return nil, provider.Errorf(provider.Internal, "lock pool store %s: %v", path, err)
	}
	s, err := readState(path)
	if err != nil {
		lock.Close()
		return nil, err
	}
	fst := &FileStore{path: path, lock: lock, s: s}
	if s.Records == nil { // a new store: write its secret before anything depends on it
		s.Records = map[string]Record{}
		if err := fst.persist(); err != nil {
			lock.Close()
			return nil, err
		}
	}
	return fst, nil
}

// readState reads the file, or makes a new state (with nil Records, so that
// the caller knows to write it) when there is none.
func readState(path string) (*state, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		s, err := newState()
		if err != nil {
			return nil, err
		}
		s.Records = nil
		return s, nil
	}
	if err != nil {
		return nil, provider.Errorf(provider.Internal, "read pool store %s: %v", path, err)
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, provider.Errorf(provider.Internal, "pool store %s is corrupt (%v): move it away to start afresh", path, err)
	}
	if s.Version != fileStoreVersion || len(s.Secret) != 32 {
		return nil, provider.Errorf(provider.Internal, "pool store %s has version %d (want %d) or no secret: move it away to start afresh", path, s.Version, fileStoreVersion)
	}
	if s.Records == nil {
		s.Records = map[string]Record{}
	}
	return &s, nil
}

// Close releases the file for another process. The records stay.
func (f *FileStore) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	return f.lock.Close()
}

func (f *FileStore) usable() error {
	if f.closed {
		return provider.Errorf(provider.FailedPrecondition, "pool store %s is closed", f.path)
	}
	return nil
}

func (f *FileStore) Load(_ context.Context, key string) (Record, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.usable(); err != nil {
		return Record{}, false, err
	}
	r, ok := f.s.Records[key]
	return r, ok, nil
}

// Swap changes the records in memory, writes them, and undoes the change
// when the write fails, so memory never runs ahead of the disk.
func (f *FileStore) Swap(_ context.Context, key string, gen uint64, next *Record) (Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.usable(); err != nil {
		return Record{}, err
	}
	prev, had := f.s.Records[key]
	lastGen := f.s.LastGen
	rec, err := f.s.swap(key, gen, next)
	if err != nil {
		return Record{}, err
	}
	if err := f.persist(); err != nil {
		f.s.LastGen = lastGen
		if had {
			f.s.Records[key] = prev
		} else {
			delete(f.s.Records, key)
		}
		return Record{}, err
	}
	return rec, nil
}

func (f *FileStore) List(context.Context) ([]Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.usable(); err != nil {
		return nil, err
	}
	return f.s.list(), nil
}

func (f *FileStore) Secret(context.Context) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]byte(nil), f.s.Secret...), nil
}

// Durable is true: the records outlive the process.
func (f *FileStore) Durable() bool { return true }

// persist writes the state: temp file, fsync, rename, fsync of the
// directory. The caller holds f.mu.
func (f *FileStore) persist() error {
	b, err := json.MarshalIndent(f.s, "", "  ")
	if err != nil {
		return provider.Errorf(provider.Internal, "encode pool store: %v", err)
	}
	if err := writeAtomic(f.path, b); err != nil {
		return provider.Errorf(provider.Internal, "write pool store %s: %v", f.path, err)
	}
	return nil
}

func writeAtomic(path string, b []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
