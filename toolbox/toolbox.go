package toolbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/sandplane/sandplane/provider/clock"
)

// Name is what GET /api/info reports as "name".
const Name = "sandplane-toolbox"

// Defaults for the zero values of Options.
const (
	DefaultMaxUploadBytes   int64 = 4 << 30
	DefaultMaxOutputBytes         = 64 << 20
	DefaultOutputGrace            = time.Second
	DefaultShutdownGrace          = 5 * time.Second
	defaultMaxJSONBodyBytes int64 = 16 << 20
)

// Options configures the toolbox server. Only WorkDir matters in practice;
// everything else has a default.
type Options struct {
	// WorkDir is reported by GET /work-dir, is the default cwd of commands and
	// anchors relative paths. Empty means the process's current directory.
	WorkDir string
	// HomeDir is reported by GET /user-home-dir. Empty means the user's home.
	HomeDir string
	// Version is reported by GET /version and GET /api/info.
	Version string
	// SandboxID is reported by GET /api/info; the command sets it from
	// SANDPLANE_SANDBOX_ID.
	SandboxID string
	// Root, when set, confines the file endpoints to this directory tree.
	Root string
	// Clock times command timeouts and shutdown. Nil means clock.Real().
	Clock clock.Clock
	// Logger receives one line per failed request (method, path, status,
	// message; never bodies). Nil discards.
	Logger *slog.Logger

	// MaxUploadBytes bounds one upload request body.
	MaxUploadBytes int64
	// MaxOutputBytes bounds the output kept per command; the rest is read
	// and dropped so the command never blocks on a full pipe.
	MaxOutputBytes int
	// OutputGrace is how long a command's output is still collected after
	// its shell exits, for background children that keep the pipe open
	// (`nohup server &`). They keep running; their later output is dropped.
	OutputGrace time.Duration
	// ShutdownGrace is how long Serve lets requests finish after ctx ends
	// before cutting them off (which kills their commands).
	ShutdownGrace time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if o.WorkDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return o, fmt.Errorf("toolbox: work dir: %w", err)
		}
		o.WorkDir = wd
	}
	wd, err := filepath.Abs(o.WorkDir)
	if err != nil {
		return o, fmt.Errorf("toolbox: work dir: %w", err)
	}
	o.WorkDir = wd
	if o.HomeDir == "" {
		if h, err := os.UserHomeDir(); err == nil {
			o.HomeDir = h
		} else {
			o.HomeDir = o.WorkDir
		}
	}
	if o.Root != "" {
		r, err := filepath.Abs(o.Root)
		if err != nil {
			return o, fmt.Errorf("toolbox: root: %w", err)
		}
		o.Root = r
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.MaxUploadBytes <= 0 {
		o.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if o.OutputGrace <= 0 {
		o.OutputGrace = DefaultOutputGrace
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = DefaultShutdownGrace
	}
	return o, nil
}

// server is the handler behind NewHandler. Its Close ends session shells.
type server struct {
	opts     Options
	fs       *fsys
	mux      *http.ServeMux
	sessions *sessions
}

// NewHandler returns the toolbox API. The handler also implements io.Closer:
// Close kills every session shell and the commands still running in them.
// A misconfiguration (an unusable Root) makes every request fail with 500,
// which Serve reports up front instead.
func NewHandler(opts Options) http.Handler {
	s, err := newServer(opts)
	if err != nil {
		return brokenHandler{err: err, clock: opts.Clock}
	}
	return s
}

func newServer(opts Options) (*server, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	fsys, err := newFsys(opts.Root, opts.WorkDir)
	if err != nil {
		return nil, err
	}
	s := &server{opts: opts, fs: fsys, mux: http.NewServeMux()}
	s.sessions = newSessions(s)
	s.routes()
	return s, nil
}

func (s *server) routes() {
	m := s.mux
	m.HandleFunc("GET /api/info", s.handleInfo)
	m.HandleFunc("GET /version", s.handleVersion)
	m.HandleFunc("GET /work-dir", s.handleDir(func() string { return s.opts.WorkDir }))
	m.HandleFunc("GET /user-home-dir", s.handleDir(func() string { return s.opts.HomeDir }))

	m.HandleFunc("POST /process/execute", s.handleExecute)

	m.HandleFunc("POST /process/session", s.handleCreateSession)
	m.HandleFunc("GET /process/session", s.handleListSessions)
	m.HandleFunc("GET /process/session/{sessionId}", s.handleGetSession)
	m.HandleFunc("DELETE /process/session/{sessionId}", s.handleDeleteSession)
	m.HandleFunc("POST /process/session/{sessionId}/exec", s.handleSessionExec)
	m.HandleFunc("GET /process/session/{sessionId}/command/{commandId}", s.handleGetCommand)
	m.HandleFunc("GET /process/session/{sessionId}/command/{commandId}/logs", s.handleCommandLogs)

	m.HandleFunc("GET /files", s.handleListFiles)
	m.HandleFunc("DELETE /files", s.handleDeleteFile)
	m.HandleFunc("GET /files/info", s.handleFileInfo)
	m.HandleFunc("POST /files/folder", s.handleCreateFolder)
	m.HandleFunc("GET /files/download", s.handleDownload)
	m.HandleFunc("POST /files/upload", s.handleUpload)
	m.HandleFunc("POST /files/bulk-download", s.handleBulkDownload)
	m.HandleFunc("POST /files/bulk-upload", s.handleBulkUpload)

	// gin answers unknown routes and wrong methods alike with a 404.
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, errorf(http.StatusNotFound, "route %s %s not found", r.Method, r.URL.Path))
	})
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close kills every session shell. Idempotent.
func (s *server) Close() error {
	s.sessions.closeAll()
	return nil
}

type info struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	PID       int    `json:"pid"`
	SandboxID string `json:"sandboxId"`
	WorkDir   string `json:"workDir"`
}

func (s *server) handleInfo(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, info{
		Name:      Name,
		Version:   s.opts.Version,
		PID:       os.Getpid(),
		SandboxID: s.opts.SandboxID,
		WorkDir:   s.opts.WorkDir,
	})
}

func (s *server) handleVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": s.opts.Version})
}

func (s *server) handleDir(dir func() string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"dir": dir()})
	}
}

// Serve listens on addr and serves the toolbox until ctx ends, then shuts
// down gracefully: new connections are refused at once, running requests get
// Options.ShutdownGrace to finish, and whatever is left is cut off, which
// kills the commands those requests started. It returns nil after a shutdown
// caused by ctx, or the listen or serve error.
func Serve(ctx context.Context, addr string, opts Options) error {
	s, err := newServer(opts)
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("toolbox: %w", err)
	}
	return s.serve(ctx, ln)
}

func (s *server) serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler: s,
		// Slow-header protection only; net/http owns this deadline.
		ReadHeaderTimeout: 30 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		return fmt.Errorf("toolbox: %w", err)
	case <-ctx.Done():
	}

	graceCtx, cancel := clock.WithTimeout(context.Background(), s.opts.Clock, s.opts.ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(graceCtx); err != nil {
		// Grace is over: cancel the remaining requests' contexts, which
		// kills their process groups.
		srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("toolbox: %w", err)
	}
	return nil
}

type brokenHandler struct {
	err   error
	clock clock.Clock
}

func (b brokenHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := b.clock
	if c == nil {
		c = clock.Real()
	}
	writeError(w, r, c, errorf(http.StatusInternalServerError, "%v", b.err))
}

func (brokenHandler) Close() error { return nil }
