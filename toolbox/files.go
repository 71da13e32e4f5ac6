package toolbox

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	pathpkg "path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/sandplane/sandplane/toolbox/wire"
)

const (
	// maxBulkFiles bounds the entries of one bulk request.
	maxBulkFiles = 10000
	// maxPathBytes bounds a path sent as a multipart field.
	maxPathBytes = 4096
	// DownloadBoundary is the fixed multipart boundary of bulk downloads;
	// the SDKs do not depend on it, but Daytona always sends this one.
	DownloadBoundary = "DAYTONA-FILE-BOUNDARY"
)

func (s *server) handleFileInfo(w http.ResponseWriter, r *http.Request) {
	t, err := s.fs.resolve(r.URL.Query().Get("path"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	fi, err := s.fs.info(t)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, fi)
}

func (s *server) handleListFiles(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	if p == "" {
		p = "."
	}
	t, err := s.fs.resolve(p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	depth, err := listDepth(r.URL.Query().Get("depth"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	list, err := s.fs.list(t, depth)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// maxListDepth bounds a listing's depth: deep enough for any project tree,
// shallow enough that one request cannot walk a whole disk.
const maxListDepth = 64

// listDepth reads the depth of a listing: absent is 1, the directory's own
// entries, as later toolbox releases define it.
func listDepth(v string) (int, error) {
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxListDepth {
		return 0, errorf(http.StatusBadRequest, "depth must be an integer from 1 to %d, not %q", maxListDepth, v)
	}
	return n, nil
}

func (s *server) handleCreateFolder(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	t, err := s.fs.resolve(q.Get("path"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	perm := os.FileMode(0o755)
	if m := q.Get("mode"); m != "" {
		n, err := strconv.ParseUint(m, 8, 32)
		if err != nil || n > 0o7777 {
			s.fail(w, r, errorf(http.StatusBadRequest, "invalid mode format"))
			return
		}
		perm = os.FileMode(n)
	}
	if err := s.fs.mkdirAll(t, perm); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

func (s *server) handleDeleteFile(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	t, err := s.fs.resolve(q.Get("path"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	recursive := false
	if v := q.Get("recursive"); v != "" {
		recursive, err = strconv.ParseBool(v)
		if err != nil {
			s.fail(w, r, errorf(http.StatusBadRequest, "invalid recursive flag %q", v))
			return
		}
	}
	if err := s.fs.remove(t, recursive); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) handleDownload(w http.ResponseWriter, r *http.Request) {
	t, err := s.fs.resolve(r.URL.Query().Get("path"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, fi, err := s.fs.openFile(t)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": fi.Name()}))
	// ServeContent adds Range and conditional requests for free.
	http.ServeContent(w, r, fi.Name(), fi.ModTime(), f)
}

func (s *server) handleUpload(w http.ResponseWriter, r *http.Request) {
	t, err := s.fs.resolve(r.URL.Query().Get("path"))
	if err == nil {
		err = s.receiveFilePart(w, r, t)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// receiveFilePart writes the multipart part "file" of r to t.
func (s *server) receiveFilePart(w http.ResponseWriter, r *http.Request, t target) error {
	mr, err := s.multipartReader(w, r)
	if err != nil {
		return err
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return errorf(http.StatusBadRequest, "file is required")
		}
		if err != nil {
			return multipartError(err)
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		_, err = s.fs.writeFile(t, part)
		part.Close()
		return err
	}
}

// handleUploadV2 is the newer toolbox's upload of one file to ?path=, which
// pre-signed upload URLs name: the file as the multipart part "file", as
// /files/upload takes it, or as the raw body. It answers the file's name,
// its path as the request gave it, and type "file".
func (s *server) handleUploadV2(w http.ResponseWriter, r *http.Request) error {
	path := r.URL.Query().Get("path")
	t, err := s.fs.resolve(path)
	if err != nil {
		return err
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
		err = s.receiveFilePart(w, r, t)
	} else {
		_, err = s.fs.writeFile(t, http.MaxBytesReader(w, r.Body, s.opts.MaxUploadBytes))
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.UploadedFileV2{Name: pathpkg.Base(path), Path: path, Type: "file"})
	return nil
}

func (s *server) multipartReader(w http.ResponseWriter, r *http.Request) (*multipart.Reader, error) {
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxUploadBytes)
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "invalid multipart form: %v", err)
	}
	return mr, nil
}

func multipartError(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return errorf(http.StatusRequestEntityTooLarge, "upload exceeds %d bytes", tooLarge.Limit)
	}
	return errorf(http.StatusBadRequest, "invalid multipart form: %v", err)
}

// uploadedFile is one entry of a bulk-upload answer.
type uploadedFile struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// bulkUploadFailure is Daytona's partial-failure body ({errors, files})
// merged with the usual error fields, so that clients reading either find
// what they look for.
type bulkUploadFailure struct {
	wire.ErrorResponse
	Errors []string       `json:"errors"`
	Files  []uploadedFile `json:"files"`
}

var bulkField = regexp.MustCompile(`^files\[([0-9]{1,9})\]\.(path|file)$`)

// bulkUpload is one bulk upload under way: the destinations announced so
// far by index, what was stored, and what was refused.
type bulkUpload struct {
	dests map[string]string
	files []uploadedFile
	errs  []string
}

// handleBulkUpload stores parts files[i].file at the path sent in the
// preceding part files[i].path. A file whose path is missing or cannot be
// written is reported and skipped; the others are still stored. The parts
// are taken as they stream in, never held: a file is written as it
// arrives, so each path must come before its file.
func (s *server) handleBulkUpload(w http.ResponseWriter, r *http.Request) error {
	mr, err := s.multipartReader(w, r)
	if err != nil {
		return err
	}
	up := &bulkUpload{dests: map[string]string{}, files: []uploadedFile{}}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return multipartError(err)
		}
		if err := s.takeBulkPart(up, part); err != nil {
			return err
		}
	}
	s.answerBulkUpload(w, r, up)
	return nil
}

// takeBulkPart takes one part: a path to remember, a file to write, or
// anything else to skip. It fails only for what ends the whole upload.
func (s *server) takeBulkPart(up *bulkUpload, part *multipart.Part) error {
	defer part.Close()
	m := bulkField.FindStringSubmatch(part.FormName())
	switch {
	case m == nil:
		return nil
	case m[2] == "path":
		return up.takePath(m[1], part)
	default:
		return s.writeBulkFile(up, m[1], part)
	}
}

// takePath remembers where file idx goes, or why it cannot go anywhere.
func (up *bulkUpload) takePath(idx string, part io.Reader) error {
	if len(up.dests) >= maxBulkFiles {
		return errorf(http.StatusBadRequest, "too many files: at most %d per request", maxBulkFiles)
	}
	dest, err := readBulkPath(part)
	if err != nil {
		up.errs = append(up.errs, "path["+idx+"]: "+err.Error())
		return nil
	}
	up.dests[idx] = dest
	return nil
}

// readBulkPath reads and checks a path part: short, and not blank.
func readBulkPath(part io.Reader) (string, error) {
	dest, err := readSmallPart(part, maxPathBytes)
	if err != nil {
		return "", err
	}
	dest = strings.TrimSpace(dest)
	if dest == "" {
		return "", errors.New("empty path")
	}
	return dest, nil
}

// writeBulkFile stores file idx at its announced path. A file past the
// upload limit ends the upload (the rest of the body is not read); any
// other failure is reported with the rest.
func (s *server) writeBulkFile(up *bulkUpload, idx string, part io.Reader) error {
	dest, ok := up.dests[idx]
	if !ok {
		up.errs = append(up.errs, "file["+idx+"]: missing .path metadata")
		return nil
	}
	n, err := s.writeUpload(dest, part)
	if err != nil {
		if ae := asAPIError(err); ae.status == http.StatusRequestEntityTooLarge {
			return ae
		}
		up.errs = append(up.errs, dest+": "+err.Error())
		return nil
	}
	up.files = append(up.files, uploadedFile{Path: dest, Bytes: n})
	return nil
}

// answerBulkUpload answers what was stored, or, when anything failed,
// Daytona's partial-failure body: 400 with the failures and what was
// stored all the same.
func (s *server) answerBulkUpload(w http.ResponseWriter, r *http.Request, up *bulkUpload) {
	if len(up.errs) == 0 {
		writeJSON(w, http.StatusOK, map[string][]uploadedFile{"files": up.files})
		return
	}
	e := errorf(http.StatusBadRequest, "%d of %d uploads failed: %s", len(up.errs), len(up.errs)+len(up.files), strings.Join(up.errs, "; "))
	s.opts.Logger.Info("request failed", "method", r.Method, "path", r.URL.Path, "status", e.status, "failures", len(up.errs))
	writeJSON(w, http.StatusBadRequest, bulkUploadFailure{
		ErrorResponse: newErrorResponse(r, s.opts.Clock, e),
		Errors:        up.errs,
		Files:         up.files,
	})
}

func (s *server) writeUpload(dest string, r io.Reader) (int64, error) {
	t, err := s.fs.resolve(dest)
	if err != nil {
		return 0, err
	}
	return s.fs.writeFile(t, r)
}

func readSmallPart(r io.Reader, limit int64) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return "", err
	}
	if int64(len(b)) > limit {
		return "", errors.New("path too long")
	}
	return string(b), nil
}

// handleBulkDownload answers 200 with one multipart part per requested path,
// in order: "file" with filename = the path as requested, or "error" holding
// an error body. Once streaming has begun, a read failure aborts the
// connection, so a truncated file can never pass for a complete one.
func (s *server) handleBulkDownload(w http.ResponseWriter, r *http.Request) {
	var req wire.FilesDownloadRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(req.Paths) == 0 {
		s.fail(w, r, errorf(http.StatusBadRequest, `request body must be {"paths": [ ... ]} and non-empty`))
		return
	}
	if len(req.Paths) > maxBulkFiles {
		s.fail(w, r, errorf(http.StatusBadRequest, "too many paths: at most %d per request", maxBulkFiles))
		return
	}

	w.Header().Set("Content-Type", "multipart/form-data; boundary="+DownloadBoundary)
	w.WriteHeader(http.StatusOK)
	mw := multipart.NewWriter(w)
	if err := mw.SetBoundary(DownloadBoundary); err != nil {
		panic(http.ErrAbortHandler)
	}
	for _, p := range req.Paths {
		if err := s.writeDownloadPart(mw, r, p); err != nil {
			panic(http.ErrAbortHandler)
		}
	}
	if err := mw.Close(); err != nil {
		panic(http.ErrAbortHandler)
	}
}

// writeDownloadPart returns an error only when the response itself broke.
func (s *server) writeDownloadPart(mw *multipart.Writer, r *http.Request, p string) error {
	t, err := s.fs.resolve(p)
	var f *os.File
	var fi fs.FileInfo
	if err == nil {
		f, fi, err = s.fs.openFile(t)
	}
	if err != nil {
		return writeErrorPart(mw, r, s, p, downloadError(err, p))
	}
	defer f.Close()
	ctype := mime.TypeByExtension(filepath.Ext(p))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Type", ctype)
	h.Set("Content-Disposition", formDisposition("file", p))
	// The SDKs' progress callbacks take the total from the part's length.
	size := fi.Size()
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	part, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	// Exactly the announced length: a file that shrank meanwhile breaks the
	// response rather than passing for complete, one that grew is cut.
	n, err := io.CopyN(part, f, size)
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// downloadError gives per-file failures the daemon's file error codes.
func downloadError(err error, p string) *apiError {
	e := asAPIError(err)
	code := "FILE_READ_FAILED"
	switch e.status {
	case http.StatusNotFound:
		code = "FILE_NOT_FOUND"
		e = errorf(http.StatusNotFound, "file not found: %s", p)
	case http.StatusForbidden:
		code = "FILE_ACCESS_DENIED"
	case http.StatusBadRequest:
		code = "INVALID_FILE_PATH"
	}
	return &apiError{status: e.status, code: code, msg: e.msg}
}

func writeErrorPart(mw *multipart.Writer, r *http.Request, s *server, p string, e *apiError) error {
	body := newErrorResponse(r, s.opts.Clock, e)
	body.Path = p
	payload, err := json.Marshal(body)
	if err != nil {
		return err
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Disposition", formDisposition("error", p))
	part, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	_, err = part.Write(payload)
	return err
}

var dispositionEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\r", "", "\n", "")

func formDisposition(name, filename string) string {
	return `form-data; name="` + name + `"; filename="` + dispositionEscaper.Replace(filename) + `"`
}
