package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sandplane/sandplane/local"
	"github.com/sandplane/sandplane/provider"
)

// Environment variables the daemon reads. Flags override them.
const (
	EnvListen       = "SANDPLANE_LISTEN"
	EnvRoot         = "SANDPLANE_ROOT"
	EnvMinute       = "SANDPLANE_MINUTE"
	EnvConfig       = "SANDPLANE_CONFIG"
	EnvToken        = local.EnvToken
	EnvTokenFile    = "SANDPLANE_TOKEN_FILE"
	EnvReapInterval = "AGENT_CONTROL_PLANE_REAP_INTERVAL_MS"
	EnvAutoStop     = "AGENT_CONTROL_PLANE_AUTOSTOP_MINUTES"
	EnvReapOnExit   = "AGENT_CONTROL_PLANE_REAP_ON_EXIT"
	EnvActivity     = "SANDPLANE_ACTIVITY"
	// EnvURL is where clients find the daemon.
	EnvURL = local.EnvURL
)

// DefaultListen is the daemon's loopback address.
const DefaultListen = "127.0.0.1:4025"

// DefaultURL is the client's default daemon address: DefaultListen.
const DefaultURL = local.DefaultURL

// DefaultSnapshot names the built-in snapshot, the one a create without a
// snapshot uses: this binary's toolbox.
const DefaultSnapshot = "default"

// DefaultPort is the workload port of a snapshot that declares none, inside
// the sandbox: where the default snapshot's toolbox serves, and the port
// host servers written for Daytona ask a preview of.
const DefaultPort = 4000

// Snapshot is a named launch profile as the config file writes it: a
// command for the native runtime, an image (and optionally a command) for
// docker. One snapshot may serve both.
type Snapshot struct {
	// Command is the argv on the native runtime.
	Command []string `yaml:"command,omitempty"`
	// Image is the Docker image; ImageCommand overrides its command.
	Image        string            `yaml:"image,omitempty"`
	ImageCommand []string          `yaml:"imageCommand,omitempty"`
	Env          map[string]string `yaml:"env,omitempty"`
	WorkDir      string            `yaml:"workDir,omitempty"`
	User         string            `yaml:"user,omitempty"`
	// Ready is how the daemon knows the workload is up: "http" (the
	// default) waits until the sandbox port gives an HTTP response to GET /,
	// any status; "port", for a workload that speaks something else, until
	// the port accepts a connection and holds it; "none" counts a spawned
	// workload as started.
	Ready string `yaml:"ready,omitempty"`
	// Isolation is how the native runtime isolates the workload beyond its
	// containment: "bwrap" or "none"; empty takes the daemon's default.
	Isolation string `yaml:"isolation,omitempty"`
	// Network is the docker runtime's network: "" for the isolated bridge
	// with the port published on loopback, "host" for the host's network,
	// without the engine's port proxy but without the bridge's isolation
	// either (docs/security.md). The native runtime ignores it.
	Network string `yaml:"network,omitempty"`
	// Port is the port the workload serves inside the sandbox, its $PORT
	// (4000 when unset): what preview-url?port= names, as on Daytona.
	Port int `yaml:"port,omitempty"`
	// Ports are more ports the workload may serve inside the sandbox; each
	// gets a preview URL, and the workload learns the port to bind for
	// each in $PORT_<port>.
	Ports []int `yaml:"ports,omitempty"`
}

// Config is the daemon's resolved configuration.
type Config struct {
	Listen string `yaml:"listen"`
	Root   string `yaml:"root"`
	// Minute is the length of one interval minute.
	Minute time.Duration `yaml:"minute"`
	// Token, when set, is required as a bearer token on every request.
	Token string `yaml:"token"`
	// TokenFile names a file (mode 0600 or stricter) holding the token; it
	// wins over Token. See ResolveToken.
	TokenFile string `yaml:"tokenFile"`
	Ports     struct {
		Min int `yaml:"min"`
		Max int `yaml:"max"`
	} `yaml:"ports"`
	AutoStopMinutes int `yaml:"autoStopMinutes"`
	// ReapInterval is how often idle sandboxes are looked for; 0 means one
	// interval minute.
	ReapInterval time.Duration `yaml:"reapInterval"`
	StopGrace    time.Duration `yaml:"stopGrace"`
	// PassEnv names daemon environment variables handed to sandboxes whose
	// create request lacks them (model API keys, typically).
	PassEnv []string `yaml:"passEnv"`
	// ReapOnExit stops every sandbox when the daemon exits on a signal.
	ReapOnExit bool `yaml:"reapOnExit"`
	// Snapshots are launch profiles by name. "default" is always present.
	Snapshots map[string]Snapshot `yaml:"snapshots"`
	// DockerImage is the image of the default snapshot on the docker runtime.
	DockerImage string `yaml:"dockerImage"`
	// Isolation is the native runtime's isolation for snapshots that name
	// none: "bwrap" or "none". Empty (the default): bwrap where a probe at
	// start shows bubblewrap works, else none, which the daemon logs once;
	// an explicit "none" opts out without a word, and an explicit "bwrap"
	// that cannot work stops the daemon at start.
	Isolation string `yaml:"isolation"`
	// PreviewIdleKeepAlive, when positive, is how long an open preview
	// connection (a WebSocket, a stream) that moves no bytes keeps its
	// sandbox alive: past it, it no longer counts as activity, so a leaked
	// WebSocket cannot keep a forgotten sandbox running. 0: for as long as
	// it is open, as on Daytona.
	PreviewIdleKeepAlive time.Duration `yaml:"previewIdleKeepAlive"`
	// Activity is what moves a sandbox's idle clock: ActivityDaytona (the
	// default) or ActivityClientPush.
	Activity string `yaml:"activity"`
}

// The activity rules a daemon may follow.
const (
	// ActivityDaytona counts what Daytona counts: refresh-activity,
	// mutating calls, and preview traffic through the daemon (source
	// proxy), as Daytona's proxy counts toolbox and preview traffic.
	ActivityDaytona = "daytona"
	// ActivityClientPush counts only what a client says: refresh-activity
	// and mutating calls, never preview traffic, so that a host proves its
	// own keep-alive wiring without the previews' help.
	ActivityClientPush = "client-push"
)

// Default returns the built-in configuration. self is the argv that starts
// this binary's toolbox ("sandplane toolbox"), the default workload.
func Default(self []string) Config {
	c := Config{
		Listen:          DefaultListen,
		Root:            DefaultRoot(),
		Minute:          time.Minute,
		AutoStopMinutes: 15,
		StopGrace:       10 * time.Second,
		PassEnv:         []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"},
		DockerImage:     "sandplane/toolbox:local",
		Activity:        ActivityDaytona,
	}
	c.Ports.Min, c.Ports.Max = 4100, 4999
	c.Snapshots = map[string]Snapshot{
		DefaultSnapshot: {Command: self},
	}
	return c
}

// Load resolves the daemon's settings in order: the built-in ones (Default
// with self), the config file at path (or $SANDPLANE_CONFIG; none when both
// are empty), the environment, override (the command line's flags, which
// win), then the token file. invalid_argument: a token file or a setting that
// cannot work.
func Load(self []string, path string, getenv func(string) string, override func(*Config)) (Config, error) {
	c := Default(self)
	if path == "" {
		path = getenv(EnvConfig)
	}
	if path != "" {
		if err := c.LoadFile(path); err != nil {
			return Config{}, provider.Errorf(provider.InvalidArgument, "%w", err)
		}
	}
	if err := c.LoadEnv(getenv); err != nil {
		return Config{}, provider.Errorf(provider.InvalidArgument, "%w", err)
	}
	if override != nil {
		override(&c)
	}
	if err := c.ResolveToken(); err != nil {
		return Config{}, provider.Errorf(provider.InvalidArgument, "%v", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, provider.Errorf(provider.InvalidArgument, "%v", err)
	}
	return c, nil
}

// DefaultRoot is the per-user state directory.
func DefaultRoot() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "sandplane")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "sandplane")
	}
	return filepath.Join(os.TempDir(), "sandplane-"+strconv.Itoa(os.Getuid()))
}

// LoadFile merges a YAML file into c. Snapshots in the file add to or replace
// the built-in ones by name; one that names a built-in snapshot but neither a
// command nor an image keeps the built-in's, so that a file can declare
// ports or env for the default snapshot without restating how it runs.
func (c *Config) LoadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	builtin := c.Snapshots
	c.Snapshots = nil
	if err := decodeStrict(data, c); err != nil {
		return fmt.Errorf("parse config %s: %w", path, err)
	}
	merged := builtin
	for name, s := range c.Snapshots {
		if b, ok := builtin[name]; ok && len(s.Command) == 0 && s.Image == "" {
			s.Command, s.Image, s.ImageCommand = b.Command, b.Image, b.ImageCommand
		}
		merged[name] = s
	}
	c.Snapshots = merged
	return nil
}

// decodeStrict decodes YAML into c, refusing keys c does not have: a key
// misspelt (isolaton: bwrap) must not quietly leave a sandbox without the
// isolation its author asked for.
func decodeStrict(data []byte, c *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(c)
	var te *yaml.TypeError
	switch {
	case errors.Is(err, io.EOF):
		return nil // an empty file
	case errors.As(err, &te):
		for i, e := range te.Errors {
			te.Errors[i] = unknownKey(e)
		}
	}
	return err
}

// unknownFieldRE matches yaml's "line N: field K not found in type T".
var unknownFieldRE = regexp.MustCompile(`^(line \d+): field (\S+) not found in type (.+)$`)

// unknownKey says a yaml error about an unknown field in the words of
// whoever wrote the file: the key, and the keys that would do.
func unknownKey(msg string) string {
	m := unknownFieldRE.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	var t reflect.Type
	where := "at the top level"
	switch m[3] {
	case "config.Config":
		t = reflect.TypeFor[Config]()
	case "config.Snapshot":
		t, where = reflect.TypeFor[Snapshot](), "in a snapshot"
	default:
		return fmt.Sprintf("%s: unknown key %q", m[1], m[2])
	}
	var keys []string
	for f := range t.Fields() {
		if k, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); k != "" {
			keys = append(keys, k)
		}
	}
	return fmt.Sprintf("%s: unknown key %q %s (a typo? the keys there are %s)", m[1], m[2], where, strings.Join(keys, ", "))
}

// LoadEnv applies the environment variables that are set.
func (c *Config) LoadEnv(getenv func(string) string) error {
	if v := getenv(EnvListen); v != "" {
		c.Listen = v
	}
	if v := getenv(EnvRoot); v != "" {
		c.Root = v
	}
	if v := getenv(EnvActivity); v != "" {
		c.Activity = v
	}
	if v := getenv(EnvToken); v != "" {
		c.Token = v
	}
	if v := getenv(EnvTokenFile); v != "" {
		c.TokenFile = v
	}
	if v := getenv(EnvMinute); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s=%q: %w", EnvMinute, v, err)
		}
		c.Minute = d
	}
	if v := getenv(EnvReapInterval); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s=%q: want milliseconds: %w", EnvReapInterval, v, err)
		}
		c.ReapInterval = time.Duration(ms) * time.Millisecond
	}
	if v := getenv(EnvAutoStop); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s=%q: want minutes: %w", EnvAutoStop, v, err)
		}
		c.AutoStopMinutes = n
	}
	if v := getenv(EnvReapOnExit); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s=%q: want 1 or 0: %w", EnvReapOnExit, v, err)
		}
		c.ReapOnExit = b
	}
	return nil
}

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.Minute <= 0:
		return fmt.Errorf("minute must be positive, got %s", c.Minute)
	case c.AutoStopMinutes < 0:
		return fmt.Errorf("autoStopMinutes must be 0 (never) or positive, got %d", c.AutoStopMinutes)
	case c.ReapInterval < 0:
		return fmt.Errorf("reap interval must not be negative")
	case c.PreviewIdleKeepAlive < 0:
		return fmt.Errorf("previewIdleKeepAlive must be 0 (open connections count while open) or positive, got %s", c.PreviewIdleKeepAlive)
	case c.Ports.Min < 1 || c.Ports.Max > 65535 || c.Ports.Min > c.Ports.Max:
		return fmt.Errorf("port range %d-%d is invalid", c.Ports.Min, c.Ports.Max)
	case c.Root == "":
		return fmt.Errorf("root directory is empty")
	case !validIsolation(c.Isolation):
		return fmt.Errorf("isolation must be \"none\" or \"bwrap\", got %q", c.Isolation)
	case c.Activity != ActivityDaytona && c.Activity != ActivityClientPush:
		return fmt.Errorf("activity must be %q (refresh, mutations and preview traffic count, as on Daytona) or %q (only refresh and mutations), got %q", ActivityDaytona, ActivityClientPush, c.Activity)
	}
	for _, k := range c.PassEnv {
		if k == EnvToken {
			return fmt.Errorf("passEnv names %s: the daemon's token is never handed to sandboxes", EnvToken)
		}
	}
	for name, s := range c.Snapshots {
		if len(s.Command) == 0 && s.Image == "" {
			return fmt.Errorf("snapshot %q needs a command (native) or an image (docker)", name)
		}
		if s.Ready != "" && s.Ready != "http" && s.Ready != "port" && s.Ready != "none" {
			return fmt.Errorf("snapshot %q: ready must be \"http\" (the default), \"port\" or \"none\", got %q", name, s.Ready)
		}
		if !validIsolation(s.Isolation) {
			return fmt.Errorf("snapshot %q: isolation must be \"none\" or \"bwrap\", got %q", name, s.Isolation)
		}
		if s.Network != "" && s.Network != "host" {
			return fmt.Errorf("snapshot %q: network must be empty (the isolated bridge) or \"host\", got %q", name, s.Network)
		}
		if err := validPorts(s); err != nil {
			return fmt.Errorf("snapshot %q: %v", name, err)
		}
	}
	return nil
}

// validPorts checks the ports a snapshot declares inside the sandbox.
func validPorts(s Snapshot) error {
	seen := map[int]bool{}
	if s.Port != 0 {
		seen[s.Port] = true
	}
	if s.Port < 0 || s.Port > 65535 {
		return fmt.Errorf("port %d is not a TCP port (1-65535)", s.Port)
	}
	for _, p := range s.Ports {
		switch {
		case p < 1 || p > 65535:
			return fmt.Errorf("ports: %d is not a TCP port (1-65535)", p)
		case seen[p] || (s.Port == 0 && p == DefaultPort):
			return fmt.Errorf("ports: %d is declared twice (the workload's own port goes in port, %d when unset)", p, DefaultPort)
		}
		seen[p] = true
	}
	return nil
}

// ResolveToken reads TokenFile, when set, into Token.
func (c *Config) ResolveToken() error {
	if c.TokenFile == "" {
		return nil
	}
	token, err := ReadTokenFile(c.TokenFile)
	if err != nil {
		return err
	}
	c.Token = token
	return nil
}

// maxTokenFile bounds what ReadTokenFile reads.
const maxTokenFile = 4096

// ReadTokenFile returns the token in the file at path: its content without
// surrounding blanks. The file must be a regular file that neither group
// nor others can read or write (chmod 600), one line, not empty.
func ReadTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat() // of the file opened, so nothing can swap it in between
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	switch {
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("token file %s is not a regular file", path)
	case fi.Mode().Perm()&0o077 != 0:
		return "", fmt.Errorf("token file %s has mode %04o, which lets other users read or change it: chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	switch {
	case len(data) > maxTokenFile:
		return "", fmt.Errorf("token file %s is larger than %d bytes: it must hold only the token", path, maxTokenFile)
	case token == "":
		return "", fmt.Errorf("token file %s is empty: write the token into it", path)
	case strings.ContainsAny(token, "\r\n"):
		return "", fmt.Errorf("token file %s holds more than one line: it must hold only the token", path)
	}
	return token, nil
}

func validIsolation(s string) bool { return s == "" || s == "none" || s == "bwrap" }

// PassEnvValues returns the pass-through variables that are set in the
// daemon's environment.
func (c *Config) PassEnvValues(getenv func(string) string) map[string]string {
	out := map[string]string{}
	for _, k := range c.PassEnv {
		if v := getenv(k); v != "" {
			out[k] = v
		}
	}
	return out
}

// BaseEnvKeys are the variables of the daemon's environment a native
// workload starts from (see BaseEnv), sorted.
var BaseEnvKeys = []string{"HOME", "LANG", "LC_ALL", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "TZ", "USER"}

// BaseEnv is the part of the daemon's environment a native workload needs
// to behave like a normal program: where to find binaries, who it is, the
// locale. Everything else, secrets included, stays out unless asked for
// (PassEnv).
func BaseEnv(getenv func(string) string) map[string]string {
	keys := slices.Clone(BaseEnvKeys)
	sort.Strings(keys)
	out := map[string]string{}
	for _, k := range keys {
		if v := getenv(k); v != "" {
			out[k] = v
		}
	}
	return out
}
