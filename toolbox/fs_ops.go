package toolbox

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandplane/sandplane/toolbox/wire"
)

const (
	// maxFindMatches bounds the answer of one find; the walk stops there.
	maxFindMatches = 10000
	// maxFindLineBytes is the longest line find reads; longer lines are
	// skipped, as minified files and data dumps would flood the answer.
	maxFindLineBytes = 1 << 20
	// maxReplaceFileBytes bounds a file that replace loads into memory.
	maxReplaceFileBytes = 256 << 20
	// binarySniffBytes is how much of a file find inspects for a NUL byte,
	// the sign of a binary file it skips (git's heuristic).
	binarySniffBytes = 8000
)

// handleMove renames source to destination. Like the daemon it refuses a
// destination that exists or whose parent does not.
func (s *server) handleMove(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	src, err := s.fs.resolve(q.Get("source"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	dst, err := s.fs.resolve(q.Get("destination"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.fs.move(src, dst); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (f *fsys) move(src, dst target) error {
	if src.rel == "." || dst.rel == "." {
		return errorf(http.StatusBadRequest, "cannot move the toolbox root")
	}
	if _, err := f.root.Lstat(src.rel); err != nil {
		return f.fsError(src, err)
	}
	parent := target{given: filepath.Dir(dst.given), abs: filepath.Dir(dst.abs), rel: filepath.Dir(dst.rel)}
	if fi, err := f.root.Stat(parent.rel); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return errorf(http.StatusBadRequest, "destination parent directory %s does not exist", parent.given)
		}
		return f.fsError(parent, err)
	} else if !fi.IsDir() {
		return errorf(http.StatusBadRequest, "destination parent %s is not a directory", parent.given)
	}
	if _, err := f.root.Lstat(dst.rel); err == nil {
		return errorf(http.StatusConflict, "destination %s already exists", dst.given)
	}
	if dst.abs == src.abs || strings.HasPrefix(dst.abs, src.abs+string(filepath.Separator)) {
		return errorf(http.StatusBadRequest, "cannot move %s into itself", src.given)
	}
	if err := f.root.Rename(src.rel, dst.rel); err != nil {
		return f.fsError(src, err)
	}
	return nil
}

// handleSetPermissions applies mode, owner and group (each optional) to a
// file or directory, following symlinks.
func (s *server) handleSetPermissions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	t, err := s.fs.resolve(q.Get("path"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := parsePermissions(q.Get("mode"), q.Get("owner"), q.Get("group"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.fs.setPermissions(t, req); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

type permissions struct {
	mode     *os.FileMode
	uid, gid int // -1 keeps the current one
}

func parsePermissions(mode, owner, group string) (permissions, error) {
	p := permissions{uid: -1, gid: -1}
	if mode != "" {
		n, err := strconv.ParseUint(mode, 8, 32)
		if err != nil || n > 0o7777 {
			return p, errorf(http.StatusBadRequest, "invalid mode format: %q is not an octal mode like 0755", mode)
		}
		m := os.FileMode(n&0o777) | unixModeBits(n)
		p.mode = &m
	}
	if owner != "" {
		uid, err := lookupID(owner, func(name string) (string, error) {
			u, err := user.Lookup(name)
			if err != nil {
				return "", err
			}
			return u.Uid, nil
		})
		if err != nil {
			return p, errorf(http.StatusBadRequest, "invalid owner %q: no such user", owner)
		}
		p.uid = uid
	}
	if group != "" {
		gid, err := lookupID(group, func(name string) (string, error) {
			g, err := user.LookupGroup(name)
			if err != nil {
				return "", err
			}
			return g.Gid, nil
		})
		if err != nil {
			return p, errorf(http.StatusBadRequest, "invalid group %q: no such group", group)
		}
		p.gid = gid
	}
	return p, nil
}

// unixModeBits turns the setuid, setgid and sticky bits of a numeric mode
// into os.FileMode's own bits.
func unixModeBits(n uint64) os.FileMode {
	var m os.FileMode
	if n&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if n&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if n&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m
}

// lookupID accepts a numeric id or a name that lookup resolves.
func lookupID(v string, lookup func(string) (string, error)) (int, error) {
	if n, err := strconv.ParseUint(v, 10, 31); err == nil {
		return int(n), nil
	}
	id, err := lookup(v)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(id, 10, 31)
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

func (f *fsys) setPermissions(t target, p permissions) error {
	if _, err := f.root.Stat(t.rel); err != nil {
		return f.fsError(t, err)
	}
	// Owner first: chown clears the setuid and setgid bits on Linux.
	if p.uid != -1 || p.gid != -1 {
		if err := f.root.Chown(t.rel, p.uid, p.gid); err != nil {
			return f.fsError(t, err)
		}
	}
	if p.mode != nil {
		if err := f.root.Chmod(t.rel, *p.mode); err != nil {
			return f.fsError(t, err)
		}
	}
	return nil
}

// handleFind greps the files under path for lines containing pattern, as
// plain text. Binary files and symlinks are skipped.
func (s *server) handleFind(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	t, err := s.fs.resolve(q.Get("path"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	pattern := q.Get("pattern")
	if pattern == "" {
		s.fail(w, r, errorf(http.StatusBadRequest, "pattern is required"))
		return
	}
	matches, err := s.fs.find(t, pattern)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, matches)
}

func (f *fsys) find(t target, pattern string) ([]wire.Match, error) {
	matches := []wire.Match{}
	err := f.walk(t, func(rel string, d fs.DirEntry) error {
		if !d.Type().IsRegular() {
			return nil
		}
		var err error
		matches, err = f.grepFile(t, rel, pattern, matches)
		return err
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	return matches, err
}

var errEnough = errors.New("enough matches")

// grepFile appends the matching lines of one file. Unreadable files are
// skipped, as grep -s would.
func (f *fsys) grepFile(t target, rel, pattern string, matches []wire.Match) ([]wire.Match, error) {
	file, err := f.root.Open(path.Join(filepath.ToSlash(t.rel), rel))
	if err != nil {
		return matches, nil
	}
	defer file.Close()
	br := bufio.NewReaderSize(file, 64<<10)
	if head, _ := br.Peek(binarySniffBytes); bytes.IndexByte(head, 0) >= 0 {
		return matches, nil
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 64<<10), maxFindLineBytes)
	name := filepath.Join(t.given, filepath.FromSlash(rel))
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if !strings.Contains(text, pattern) {
			continue
		}
		matches = append(matches, wire.Match{File: name, Line: line, Content: strings.TrimSuffix(text, "\r")})
		if len(matches) >= maxFindMatches {
			return matches, errEnough
		}
	}
	return matches, nil
}

// handleSearch lists the files and directories under path whose name
// matches a shell glob.
func (s *server) handleSearch(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	t, err := s.fs.resolve(q.Get("path"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	pattern := q.Get("pattern")
	if pattern == "" {
		s.fail(w, r, errorf(http.StatusBadRequest, "pattern is required"))
		return
	}
	if _, err := filepath.Match(pattern, ""); err != nil {
		s.fail(w, r, errorf(http.StatusBadRequest, "invalid pattern %q: %v", pattern, err))
		return
	}
	files := []string{}
	err = s.fs.walk(t, func(rel string, d fs.DirEntry) error {
		if ok, _ := filepath.Match(pattern, d.Name()); ok {
			files = append(files, filepath.Join(t.given, filepath.FromSlash(rel)))
		}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.SearchFilesResponse{Files: files})
}

// walk visits everything under t but t itself, in lexical order, with
// paths relative to t in slash form. Directories it cannot read are
// skipped; a missing or forbidden t is an error.
func (f *fsys) walk(t target, visit func(rel string, d fs.DirEntry) error) error {
	if _, err := f.root.Stat(t.rel); err != nil {
		return f.fsError(t, err)
	}
	fsys := f.root.FS()
	start := filepath.ToSlash(t.rel)
	return fs.WalkDir(fsys, start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start {
				return f.fsError(t, err)
			}
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if p == start {
			if !d.IsDir() {
				// A file given as the path is searched on its own.
				return visit("", d)
			}
			return nil
		}
		if abs := filepath.Join(f.base, filepath.FromSlash(p)); f.refused(abs) {
			// A hidden directory is walked only on the way to the work dir.
			if d.IsDir() && !within(f.workDir, abs) {
				return fs.SkipDir
			}
			return nil
		}
		rel := p
		if start != "." {
			rel = strings.TrimPrefix(p, start+"/")
		}
		return visit(rel, d)
	})
}

// handleReplace replaces every occurrence of pattern, as plain text, in
// each file. Each file succeeds or fails on its own; the answer is 200 with
// one result per file.
func (s *server) handleReplace(w http.ResponseWriter, r *http.Request) {
	var req wire.ReplaceRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	switch {
	case len(req.Files) == 0:
		s.fail(w, r, errorf(http.StatusBadRequest, "files is required"))
		return
	case len(req.Files) > maxBulkFiles:
		s.fail(w, r, errorf(http.StatusBadRequest, "too many files: at most %d per request", maxBulkFiles))
		return
	case req.Pattern == "":
		s.fail(w, r, errorf(http.StatusBadRequest, "pattern is required"))
		return
	case req.NewValue == nil:
		s.fail(w, r, errorf(http.StatusBadRequest, "newValue is required"))
		return
	}
	results := make([]wire.ReplaceResult, 0, len(req.Files))
	for _, p := range req.Files {
		res := wire.ReplaceResult{File: p, Success: true}
		if err := s.replaceIn(p, req.Pattern, *req.NewValue); err != nil {
			res.Success, res.Error = false, err.Error()
		}
		results = append(results, res)
	}
	writeJSON(w, http.StatusOK, results)
}

func (s *server) replaceIn(p, pattern, value string) error {
	t, err := s.fs.resolve(p)
	if err != nil {
		return err
	}
	file, _, err := s.fs.openFile(t)
	if err != nil {
		return err
	}
	content, err := io.ReadAll(io.LimitReader(file, maxReplaceFileBytes+1))
	file.Close()
	if err != nil {
		return errorf(http.StatusBadRequest, "reading %s: %v", p, err)
	}
	if len(content) > maxReplaceFileBytes {
		return errorf(http.StatusRequestEntityTooLarge, "%s is larger than %d bytes", p, maxReplaceFileBytes)
	}
	if !bytes.Contains(content, []byte(pattern)) {
		return nil
	}
	replaced := bytes.ReplaceAll(content, []byte(pattern), []byte(value))
	_, err = s.fs.writeFile(t, bytes.NewReader(replaced))
	return err
}
