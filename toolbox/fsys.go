package toolbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// fsys performs every file operation through a tree. Confined, the tree is
// an os.Root, so the toolbox cannot be walked out of it by ".." or by
// symlinks, races included. Unconfined, it is the host's file system, where
// symlinks are followed wherever they point, absolute ones included, as the
// sandbox user sees them.
type fsys struct {
	root    tree
	base    string // the tree's absolute path
	workDir string
	hidden  []string // absolute, symlinks resolved; see Options.Hidden
	// homeAlias stands for home in request paths; see Options.HomeAlias.
	homeAlias, home string
}

// tree is the part of *os.Root that fsys uses; names are relative to it.
type tree interface {
	Open(name string) (*os.File, error)
	OpenFile(name string, flag int, perm os.FileMode) (*os.File, error)
	Stat(name string) (fs.FileInfo, error)
	Lstat(name string) (fs.FileInfo, error)
	MkdirAll(name string, perm os.FileMode) error
	Remove(name string) error
	RemoveAll(name string) error
	Rename(oldname, newname string) error
	Chmod(name string, mode os.FileMode) error
	Chown(name string, uid, gid int) error
	// FS walks the tree; it does not follow symlinks to directories.
	FS() fs.FS
}

func newFsys(rootDir, workDir string, hidden []string) (*fsys, error) {
	f := &fsys{root: hostTree{}, base: string(filepath.Separator), workDir: workDir}
	for _, h := range hidden {
		if h == "" {
			continue
		}
		abs, err := filepath.Abs(h)
		if err != nil {
			return nil, fmt.Errorf("toolbox: hidden directory: %w", err)
		}
		f.hidden = append(f.hidden, realPath(abs))
	}
	if rootDir == "" {
		return f, nil
	}
	r, err := os.OpenRoot(rootDir)
	if err != nil {
		return nil, fmt.Errorf("toolbox: root: %w", err)
	}
	f.root, f.base = r, rootDir
	return f, nil
}

// refused reports whether abs, or where its symlinks lead, lies in a hidden
// directory and not in the work dir.
func (f *fsys) refused(abs string) bool {
	if len(f.hidden) == 0 {
		return false
	}
	own := realPath(f.workDir)
	for _, p := range []string{abs, realPath(abs)} {
		for _, h := range f.hidden {
			if within(p, h) && !within(p, own) {
				return true
			}
		}
	}
	return false
}

// realPath resolves the symlinks of the longest existing prefix of abs and
// appends the rest, so that a path about to be created resolves too.
func realPath(abs string) string {
	rest := ""
	for p := abs; ; p = filepath.Dir(p) {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		if p == filepath.Dir(p) {
			return abs
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

// within reports whether p is dir or lies below it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// hostTree is the whole file system, with no confinement: os.Root would
// refuse every absolute symlink, even with "/" as its root.
type hostTree struct{}

func (hostTree) abs(name string) string { return filepath.Join(string(filepath.Separator), name) }

func (h hostTree) Open(name string) (*os.File, error) { return os.Open(h.abs(name)) }
func (h hostTree) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(h.abs(name), flag, perm)
}
func (h hostTree) Stat(name string) (fs.FileInfo, error)  { return os.Stat(h.abs(name)) }
func (h hostTree) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(h.abs(name)) }
func (h hostTree) MkdirAll(name string, perm os.FileMode) error {
	return os.MkdirAll(h.abs(name), perm)
}
func (h hostTree) Remove(name string) error    { return os.Remove(h.abs(name)) }
func (h hostTree) RemoveAll(name string) error { return os.RemoveAll(h.abs(name)) }
func (h hostTree) Rename(oldname, newname string) error {
	return os.Rename(h.abs(oldname), h.abs(newname))
}
func (h hostTree) Chmod(name string, mode os.FileMode) error { return os.Chmod(h.abs(name), mode) }
func (h hostTree) Chown(name string, uid, gid int) error     { return os.Chown(h.abs(name), uid, gid) }
func (hostTree) FS() fs.FS                                   { return os.DirFS(string(filepath.Separator)) }

// mapHome takes a clean absolute path at or under alias to the same place
// under home; any other path, or an empty alias, stays as it is.
func mapHome(p, alias, home string) string {
	if alias == "" || home == "" {
		return p
	}
	if p == alias {
		return home
	}
	if rest, ok := strings.CutPrefix(p, alias+string(filepath.Separator)); ok {
		return filepath.Join(home, rest)
	}
	return p
}

// target is a resolved request path.
type target struct {
	given string // as the client sent it, for messages
	abs   string // cleaned absolute path
	rel   string // relative to fsys.base, never starting with ".."
}

// resolve turns a client path into a target: relative paths are anchored at
// the work dir, ".." is resolved lexically, and a path that leaves the root
// is refused with 403. Symlinks that leave it are refused later, by os.Root.
func (f *fsys) resolve(p string) (target, error) {
	if p == "" {
		return target{}, errorf(http.StatusBadRequest, "path is required")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return target{}, errorf(http.StatusBadRequest, "invalid path: contains a NUL byte")
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(f.workDir, abs)
	}
	abs = mapHome(filepath.Clean(abs), f.homeAlias, f.home)
	rel, err := filepath.Rel(f.base, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return target{}, errorf(http.StatusForbidden, "path %s is outside the toolbox root", p)
	}
	if f.refused(abs) {
		return target{}, errorf(http.StatusForbidden, "path %s is in the sandplane daemon's state directory, which holds other sandboxes' files", p)
	}
	return target{given: p, abs: abs, rel: rel}, nil
}

// fsError classifies a file system error the way the daemon does: missing is
// 404, denied (or escaping the root) is 403, anything else is 400.
func (f *fsys) fsError(t target, err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	if isEscape(err) {
		return errorf(http.StatusForbidden, "path %s leaves the toolbox root through a symlink", t.given)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		// os.Root reports paths relative to the root; show the client's.
		err = &fs.PathError{Op: pe.Op, Path: t.abs, Err: pe.Err}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return codedf(http.StatusNotFound, wire.CodeFileNotFound, "%v", err)
	case errors.Is(err, fs.ErrPermission):
		return codedf(http.StatusForbidden, wire.CodeFileAccessDenied, "%v", err)
	}
	return errorf(http.StatusBadRequest, "%v", err)
}

// isEscape reports os.Root's refusal to follow a path out of the root. The
// os package does not export that error; TestConfinedRoot pins the message.
func isEscape(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

func newFileInfo(name string, fi fs.FileInfo) wire.FileInfo {
	owner, group := ownerGroup(fi)
	mod := fi.ModTime().UTC()
	return wire.FileInfo{
		Group: group,
		IsDir: fi.IsDir(),
		// The spec's deprecated modTime is in Go's time.String() layout;
		// modifiedAt is RFC 3339.
		ModTime:     mod.String(),
		Mode:        fi.Mode().String(),
		ModifiedAt:  mod.Format(time.RFC3339Nano),
		Name:        name,
		Owner:       owner,
		Permissions: fmt.Sprintf("%04o", fi.Mode().Perm()),
		Size:        fi.Size(),
	}
}

func (f *fsys) info(t target) (wire.FileInfo, error) {
	fi, err := f.root.Stat(t.rel)
	if err != nil {
		return wire.FileInfo{}, f.fsError(t, err)
	}
	return newFileInfo(filepath.Base(t.abs), fi), nil
}

// list returns the entries of a directory sorted by name, following
// symlinks; entries that cannot be stat'ed (dangling links) are skipped.
// list lists the directory t and, depth levels down, its subdirectories:
// depth 1 is the directory's own entries. Each entry is followed by its
// children, names sorted on every level. Links are followed for the
// details but never descended into, so a link cannot make a loop.
func (f *fsys) list(t target, depth int) ([]wire.FileInfo, error) {
	out := []wire.FileInfo{}
	if err := f.listInto(&out, t, depth); err != nil {
		return nil, f.fsError(t, err)
	}
	return out, nil
}

func (f *fsys) listInto(out *[]wire.FileInfo, t target, depth int) error {
	d, err := f.root.Open(t.rel)
	if err != nil {
		return err
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		child := target{abs: filepath.Join(t.abs, e.Name()), rel: filepath.Join(t.rel, e.Name())}
		child.given = child.abs
		if f.refused(child.abs) && !within(f.workDir, child.abs) {
			// Not even its name or size: another sandbox's, or a link
			// there. The way down to the work dir stays listed.
			continue
		}
		fi, err := f.root.Stat(child.rel)
		if err != nil {
			continue
		}
		info := newFileInfo(e.Name(), fi)
		info.Path = child.abs
		*out = append(*out, info)
		if depth > 1 && e.IsDir() {
			// A subdirectory that vanished or cannot be read is listed
			// without its children, as an unreadable entry is skipped.
			_ = f.listInto(out, child, depth-1)
		}
	}
	return nil
}

func (f *fsys) mkdirAll(t target, perm os.FileMode) error {
	if err := f.root.MkdirAll(t.rel, perm); err != nil {
		return f.fsError(t, err)
	}
	return nil
}

func (f *fsys) remove(t target, recursive bool) error {
	if t.rel == "." {
		return errorf(http.StatusBadRequest, "refusing to delete %s: it is the toolbox root", t.abs)
	}
	// Lstat: deleting a symlink removes the link, whatever it points to.
	fi, err := f.root.Lstat(t.rel)
	if err != nil {
		return f.fsError(t, err)
	}
	if fi.IsDir() && !recursive {
		return errorf(http.StatusBadRequest, "cannot delete directory without recursive flag")
	}
	if recursive {
		err = f.root.RemoveAll(t.rel)
	} else {
		err = f.root.Remove(t.rel)
	}
	if err != nil {
		return f.fsError(t, err)
	}
	return nil
}

// openFile opens a regular file for download. Other files are refused:
// without O_NONBLOCK, opening a named pipe would wait for a writer forever.
func (f *fsys) openFile(t target) (*os.File, fs.FileInfo, error) {
	file, err := f.root.OpenFile(t.rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, f.fsError(t, err)
	}
	fi, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, nil, f.fsError(t, err)
	}
	switch {
	case fi.IsDir():
		file.Close()
		return nil, nil, errorf(http.StatusBadRequest, "invalid file path: path points to a directory: %s", t.given)
	case !fi.Mode().IsRegular():
		file.Close()
		return nil, nil, errorf(http.StatusBadRequest, "invalid file path: %s is not a regular file (%s)", t.given, fi.Mode().Type())
	}
	return file, fi, nil
}

// writeFile stores r at t, creating parent directories. A new or replaced
// file appears atomically (temp file and rename in the same directory), so a
// reader never sees half an upload. An existing file keeps its permissions;
// an existing symlink is written through.
func (f *fsys) writeFile(t target, r io.Reader) (int64, error) {
	if t.rel == "." {
		return 0, errorf(http.StatusBadRequest, "cannot write to %s: it is a directory", t.abs)
	}
	dir := filepath.Dir(t.rel)
	if dir != "." {
		if err := f.root.MkdirAll(dir, 0o755); err != nil {
			return 0, f.fsError(t, err)
		}
	}
	perm := os.FileMode(0o644)
	if fi, err := f.root.Lstat(t.rel); err == nil {
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			return f.writeThrough(t, r)
		case fi.IsDir():
			return 0, errorf(http.StatusBadRequest, "cannot write to %s: it is a directory", t.abs)
		}
		perm = fi.Mode().Perm()
	}

	tmp := filepath.Join(dir, ".sandplane-upload-"+randomHex(8))
	file, err := f.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, f.fsError(t, err)
	}
	committed := false
	defer func() {
		if !committed {
			file.Close()
			f.root.Remove(tmp)
		}
	}()
	n, err := io.Copy(file, r)
	if err != nil {
		return n, uploadCopyError(t, err)
	}
	if err := file.Chmod(perm); err != nil {
		return n, f.fsError(t, err)
	}
	if err := file.Close(); err != nil {
		return n, f.fsError(t, err)
	}
	if err := f.root.Rename(tmp, t.rel); err != nil {
		return n, f.fsError(t, err)
	}
	committed = true
	return n, nil
}

// writeThrough writes the file a symlink points to, creating it when the
// link dangles, as Daytona does.
func (f *fsys) writeThrough(t target, r io.Reader) (int64, error) {
	file, err := f.root.OpenFile(t.rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, f.fsError(t, err)
	}
	n, err := io.Copy(file, r)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, uploadCopyError(t, err)
	}
	return n, nil
}

func uploadCopyError(t target, err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return errorf(http.StatusRequestEntityTooLarge, "upload exceeds %d bytes", tooLarge.Limit)
	}
	return errorf(http.StatusBadRequest, "writing %s: %v", t.given, err)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
