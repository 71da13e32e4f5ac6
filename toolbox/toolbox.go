package toolbox

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sandplane/sandplane/internal/serve"
	"github.com/sandplane/sandplane/provider/clock"
)

// Name is what GET /api/info reports as "name".
const Name = "sandplane-toolbox"

// Defaults for the zero values of Options.
const (
	DefaultMaxUploadBytes     int64 = 4 << 30
	DefaultMaxOutputBytes           = 16 << 20
	DefaultMaxSessionLogBytes int64 = 256 << 20
	DefaultOutputGrace              = time.Second
	DefaultShutdownGrace            = 5 * time.Second
	defaultMaxJSONBodyBytes   int64 = 16 << 20
)

// HomeAliasEnv is the variable through which whoever starts `sandplane
// toolbox` sets Options.HomeAlias (the simulator, for native sandboxes
// whose home cannot be shown at /home/daytona).
const HomeAliasEnv = "SANDPLANE_HOME_ALIAS"

// EntrypointEnv is the variable through which whoever starts `sandplane
// toolbox` without arguments to spare (a parked workload, an image's fixed
// ENTRYPOINT) sets Options.Entrypoint: a shell command line. The toolbox
// takes it out of its environment, so that commands do not inherit it.
const EntrypointEnv = "SANDPLANE_ENTRYPOINT"

// Options configures the toolbox server. Only WorkDir matters in practice;
// everything else has a default.
type Options struct {
	// WorkDir is reported by GET /work-dir, is the default cwd of commands and
	// anchors relative paths. Empty means the process's current directory.
	WorkDir string
	// HomeDir is reported by GET /user-home-dir. Empty means the user's home.
	HomeDir string
	// HomeAlias, when set, is a path that stands for HomeDir in every path
	// a request names (files, git, working directories): the simulator's
	// native sandboxes, where no mount namespace shows their home at
	// Daytona's /home/daytona, map that path here so that an SDK's
	// /home/daytona/x lands in the sandbox's own home and never in the
	// host's /home/daytona. Commands see HomeDir itself ($HOME); the
	// alias means nothing to a shell.
	HomeAlias string
	// Version is reported by GET /version and GET /api/info.
	Version string
	// SandboxID is reported by GET /api/info; the command sets it from
	// DAYTONA_SANDBOX_ID, else SANDPLANE_SANDBOX_ID.
	SandboxID string
	// Root, when set, confines the file endpoints to this directory tree.
	Root string
	// Hidden are directories the file endpoints refuse (403), except where
	// they hold WorkDir: `sandplane toolbox` hides the daemon's state
	// directory ($SANDPLANE_ROOT), where other sandboxes keep their files,
	// tokens and env. A shell in the sandbox is not stopped by this; only
	// isolation is (docs/security.md).
	Hidden []string
	// GitURLRewrites apply to every git command, like url.<To>.insteadOf
	// entries in git's configuration (which git honours too).
	GitURLRewrites []GitURLRewrite
	// Token is the sandbox's secret. Every request but GET /version and
	// GET /api/info must present it, in the X-Daytona-Preview-Token header
	// or as "Authorization: Bearer <token>". Empty turns the token check
	// off (the Host, Origin and Content-Type checks stay); `sandplane
	// toolbox` refuses to start that way unless told to.
	Token string
	// AllowedHosts are Host names admitted besides the loopback ones, for a
	// toolbox reached through a proxy that keeps the caller's Host.
	AllowedHosts []string
	// Shell runs process execution and session commands, which it reads on
	// its stdin. Empty means bash when /etc/shells lists one, else /bin/sh.
	Shell string
	// Entrypoint, when set, is a shell command that the toolbox starts at
	// once as the sandbox's entrypoint: the only command of the session
	// "entrypoint", which GET /process/session/entrypoint and its /logs
	// report, as Daytona's daemon reports the image's entrypoint. Its
	// stdin takes session input. It ends with the toolbox (Close).
	Entrypoint string
	// Clock times command timeouts and shutdown. Nil means clock.Real().
	Clock clock.Clock
	// Logger receives one line per failed request (method, path, status,
	// message; never bodies). Nil discards.
	Logger *slog.Logger

	// MaxUploadBytes bounds one upload request body.
	MaxUploadBytes int64
	// MaxOutputBytes bounds the output kept per command and stream: the
	// first MaxOutputBytes are kept, the rest is read, counted and dropped
	// (so the command never blocks on a full pipe), and the answer ends
	// with a note saying how much was dropped.
	MaxOutputBytes int
	// MaxSessionLogBytes bounds the memory all session commands' logs
	// hold together. When a command's output would pass it, the logs of
	// that session's oldest finished commands are discarded first (their
	// logs then say so); what still does not fit is dropped as above.
	MaxSessionLogBytes int64
	// OutputGrace is how long a command's output is still collected after
	// its shell exits, for background children that keep the pipe open
	// (`nohup server &`). They keep running; their later output is dropped.
	OutputGrace time.Duration
	// ShutdownGrace is how long Serve lets requests finish after ctx ends
	// before cutting them off (which kills their commands).
	ShutdownGrace time.Duration

	// env is what processes the toolbox starts inherit (POST /env); set
	// by newServer and shared by every copy of these options.
	env *procEnv
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
	if o.HomeAlias != "" {
		if !filepath.IsAbs(o.HomeAlias) {
			return o, fmt.Errorf("toolbox: home alias %q is not an absolute path", o.HomeAlias)
		}
		o.HomeAlias = filepath.Clean(o.HomeAlias)
	}
	if o.Root != "" {
		r, err := filepath.Abs(o.Root)
		if err != nil {
			return o, fmt.Errorf("toolbox: root: %w", err)
		}
		o.Root = r
	}
	if o.Shell == "" {
		o.Shell = detectShell(shellsFile)
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
	if o.MaxSessionLogBytes <= 0 {
		o.MaxSessionLogBytes = DefaultMaxSessionLogBytes
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
	access   map[string]access // by mux pattern
	sessions *sessions
	lsp      *lspServers

	initMu    sync.Mutex
	initToken string // from POST /init; never logged or echoed
	interp    *interpreters
	ptys      *ptyManager
	cpu       cpuMeter
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
	opts.env = newProcEnv()
	fsys, err := newFsys(opts.Root, opts.WorkDir, opts.Hidden)
	if err != nil {
		return nil, err
	}
	fsys.homeAlias, fsys.home = opts.HomeAlias, opts.HomeDir
	s := &server{opts: opts, fs: fsys, mux: http.NewServeMux()}
	s.cpu.usedPct(readSample(s.opts.Clock.Now())) // the first request measures from here
	s.sessions = newSessions(s)
	s.lsp = newLSPServers(s)
	s.interp = newInterpreters(s)
	s.ptys = newPtyManager(s)
	s.routes()
	if opts.Entrypoint != "" {
		if err := s.sessions.startEntrypoint(opts.Entrypoint); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

func (s *server) routes() {
	open := access{open: true}
	none, json, multipart := access{body: noBody}, access{body: jsonBody}, access{body: formBody}
	// /init is sent as */* by the generated clients.
	anyType := access{body: anyBody}
	file := access{body: fileBody}
	routes := []struct {
		pattern string
		access  access
		handler http.HandlerFunc
	}{
		{"GET /api/info", open, s.handleInfo},
		{"GET /version", open, s.handleVersion},
		{"GET /work-dir", none, s.handleDir(func() string { return s.opts.WorkDir })},
		{"GET /user-home-dir", none, s.handleDir(func() string { return s.opts.HomeDir })},

		{"POST /process/execute", json, s.handleExecute},
		{"GET /process/interpreter/context", none, s.handleListContexts},
		{"POST /process/interpreter/context", json, s.handleCreateContext},
		{"DELETE /process/interpreter/context/{id}", none, s.handleDeleteContext},
		{"GET /process/interpreter/execute", none, s.handleInterpreterExecute},
		{"POST /process/code-run", json, s.handleCodeRun},
		{"POST /process/pty", json, s.handleCreatePty},
		{"GET /process/pty", none, s.handleListPty},
		{"GET /process/pty/create-connect", none, s.handleCreateConnectPty},
		{"GET /process/pty/{sessionId}", none, s.handleGetPty},
		{"DELETE /process/pty/{sessionId}", none, s.handleDeletePty},
		{"GET /process/pty/{sessionId}/connect", none, s.handleConnectPty},
		{"POST /process/pty/{sessionId}/resize", json, s.handleResizePty},

		{"POST /process/session", json, s.handleCreateSession},
		{"GET /process/session", none, s.handleListSessions},
		{"GET /process/session/{sessionId}", none, s.handleGetSession},
		{"DELETE /process/session/{sessionId}", none, s.handleDeleteSession},
		{"POST /process/session/{sessionId}/exec", json, s.handleSessionExec},
		{"GET /process/session/{sessionId}/command/{commandId}", none, s.handleGetCommand},
		{"GET /process/session/{sessionId}/command/{commandId}/logs", none, s.handleCommandLogs},
		{"POST /process/session/{sessionId}/command/{commandId}/input", json, s.handleSendInput},
		{"GET /process/session/entrypoint", none, s.handleEntrypointSession},
		{"GET /process/session/entrypoint/logs", none, s.handleEntrypointLogs},

		{"GET /files", none, s.handleListFiles},
		{"DELETE /files", none, s.handleDeleteFile},
		{"GET /files/info", none, s.handleFileInfo},
		{"POST /files/folder", none, s.handleCreateFolder},
		{"GET /files/download", none, s.handleDownload},
		{"POST /files/upload", multipart, s.handleUpload},
		{"POST /files/upload-v2", file, s.errs(s.handleUploadV2)},
		{"POST /files/bulk-download", json, s.handleBulkDownload},
		{"POST /files/bulk-upload", multipart, s.errs(s.handleBulkUpload)},
		{"POST /files/move", none, s.handleMove},
		{"POST /files/permissions", none, s.handleSetPermissions},
		{"GET /files/find", none, s.handleFind},
		{"GET /files/search", none, s.handleSearch},
		{"POST /files/replace", json, s.handleReplace},

		{"POST /git/clone", json, s.errs(s.handleGitClone)},
		{"POST /git/credentials", json, s.errs(s.handleGitCredentials)},
		{"GET /git/status", none, s.errs(s.handleGitStatus)},
		{"GET /git/branches", none, s.errs(s.handleGitBranches)},
		{"POST /git/branches", json, s.errs(s.handleGitCreateBranch)},
		{"DELETE /git/branches", json, s.errs(s.handleGitDeleteBranch)},
		{"POST /git/checkout", json, s.errs(s.handleGitCheckout)},
		{"POST /git/add", json, s.errs(s.handleGitAdd)},
		{"POST /git/commit", json, s.errs(s.handleGitCommit)},
		{"GET /git/history", none, s.errs(s.handleGitHistory)},
		{"POST /git/push", json, s.errs(s.handleGitPush)},
		{"POST /git/pull", json, s.errs(s.handleGitPull)},
		// What later toolbox releases added.
		{"POST /git/init", json, s.errs(s.handleGitInit)},
		{"GET /git/remotes", none, s.errs(s.handleGitListRemotes)},
		{"POST /git/remotes", json, s.errs(s.handleGitAddRemote)},
		{"GET /git/config", none, s.errs(s.handleGitGetConfig)},
		{"POST /git/config", json, s.errs(s.handleGitSetConfig)},
		{"POST /git/config/user", json, s.errs(s.handleGitConfigureUser)},
		{"POST /git/reset", json, s.errs(s.handleGitReset)},
		{"POST /git/restore", json, s.errs(s.handleGitRestore)},

		{"GET /port", none, s.handleGetPorts},
		{"GET /port/{port}/in-use", none, s.handlePortInUse},
		{"POST /init", anyType, s.handleInit},
		{"POST /env", json, s.handleUpdateEnv},
		{"GET /system/metrics", none, s.handleSystemMetrics},
		{"/computeruse/", none, s.handleComputerUse},

		{"POST /lsp/start", json, s.handleLSPStart},
		{"POST /lsp/stop", json, s.handleLSPStop},
		{"POST /lsp/did-open", json, s.handleLSPDidOpen},
		{"POST /lsp/did-close", json, s.handleLSPDidClose},
		{"POST /lsp/completions", json, s.handleLSPCompletions},
		{"GET /lsp/document-symbols", none, s.handleLSPDocumentSymbols},
		{"GET /lsp/workspacesymbols", none, s.handleLSPWorkspaceSymbols},

		// gin answers unknown routes and wrong methods alike with a 404.
		{"/", none, func(w http.ResponseWriter, r *http.Request) {
			s.fail(w, r, errorf(http.StatusNotFound, "route %s %s not found", r.Method, r.URL.Path))
		}},
	}
	s.access = make(map[string]access, len(routes))
	for _, rt := range routes {
		s.mux.HandleFunc(rt.pattern, rt.handler)
		s.access[rt.pattern] = rt.access
	}
}

// ServeHTTP guards every request, whatever route it takes: a pattern the
// table does not know (a redirect to a clean path, say) gets the strictest
// access, token required and no body.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, pattern := s.mux.Handler(r)
	if !s.guard(w, r, s.access[pattern]) {
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Close kills every session shell. Idempotent.
func (s *server) Close() error {
	s.sessions.closeAll()
	s.lsp.closeAll()
	s.interp.closeAll()
	s.ptys.closeAll()
	return nil
}

// info is the probe answer. PID and WorkDir go only to callers that
// present the token: the open answer tells a toolbox from a squatter and
// which sandbox it serves, nothing more.
type info struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	SandboxID string `json:"sandboxId"`
	PID       int    `json:"pid,omitempty"`
	WorkDir   string `json:"workDir,omitempty"`
}

func (s *server) handleInfo(w http.ResponseWriter, r *http.Request) {
	v := info{Name: Name, Version: s.opts.Version, SandboxID: s.opts.SandboxID}
	if s.authorized(r.Header) {
		v.PID, v.WorkDir = os.Getpid(), s.opts.WorkDir
	}
	writeJSON(w, http.StatusOK, v)
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

// serve serves until ctx ends; at shutdown, requests in flight get
// ShutdownGrace, and once it is over their contexts end, which kills their
// process groups.
func (s *server) serve(ctx context.Context, ln net.Listener) error {
	if err := serve.Serve(ctx, ln, s, serve.WithGrace(s.opts.ShutdownGrace), serve.WithClock(s.opts.Clock)); err != nil {
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
