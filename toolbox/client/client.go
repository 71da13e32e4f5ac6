package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/toolbox/wire"
)

const (
	// DefaultPollInterval is how often Run asks for new output.
	DefaultPollInterval = 200 * time.Millisecond
	// cleanupTimeout bounds the session delete that Run makes after its
	// context ended.
	cleanupTimeout = 10 * time.Second
	maxErrorBody   = 64 << 10
)

// Client talks to one sandbox's toolbox API. It is safe for concurrent use.
type Client struct {
	base   string
	header http.Header
	hc     *http.Client
	clk    clock.Clock
	poll   time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient replaces http.DefaultClient.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithClock sets the clock that paces polling and bounds cleanup.
func WithClock(clk clock.Clock) Option { return func(c *Client) { c.clk = clk } }

// WithPollInterval sets how often Run polls; non-positive means the default.
func WithPollInterval(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.poll = d
		}
	}
}

// New returns a client of the toolbox at baseURL, sending header (for
// example Daytona's bearer key) with every request. It does no I/O.
func New(baseURL string, header http.Header, opts ...Option) *Client {
	c := &Client{
		base:   strings.TrimSuffix(baseURL, "/"),
		header: header.Clone(),
		hc:     http.DefaultClient,
		clk:    clock.Real(),
		poll:   DefaultPollInterval,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// CreateSession starts a session shell. already_exists: the id is taken.
func (c *Client) CreateSession(ctx context.Context, sessionID string) error {
	return c.do(ctx, http.MethodPost, "/process/session", wire.CreateSessionRequest{SessionID: sessionID}, nil)
}

// DeleteSession ends a session and kills what still runs in it. not_found.
func (c *Client) DeleteSession(ctx context.Context, sessionID string) error {
	return c.do(ctx, http.MethodDelete, "/process/session/"+url.PathEscape(sessionID), nil, nil)
}

// ExecAsync starts command in the session and returns its id at once.
// Its stdin is open for SendInput, which the toolbox echoes into its
// stdout, until it ends. not_found: no such session.
func (c *Client) ExecAsync(ctx context.Context, sessionID, command string) (string, error) {
	return c.execAsync(ctx, sessionID, command, false)
}

// Command returns the command; its ExitCode is nil while it runs.
// not_found.
func (c *Client) Command(ctx context.Context, sessionID, cmdID string) (wire.SessionCommand, error) {
	var out wire.SessionCommand
	err := c.do(ctx, http.MethodGet, commandPath(sessionID, cmdID), nil, &out)
	return out, err
}

// Logs returns everything the command printed so far. not_found.
func (c *Client) Logs(ctx context.Context, sessionID, cmdID string) (wire.SessionCommandLogs, error) {
	var out wire.SessionCommandLogs
	err := c.do(ctx, http.MethodGet, commandPath(sessionID, cmdID)+"/logs", nil, &out)
	return out, err
}

func commandPath(sessionID, cmdID string) string {
	return "/process/session/" + url.PathEscape(sessionID) + "/command/" + url.PathEscape(cmdID)
}

// Run is Exec with an empty stdin: the command reads end of input at once.
func (c *Client) Run(ctx context.Context, command string, stdout, stderr io.Writer) (int, error) {
	return c.Exec(ctx, command, Streams{Stdout: stdout, Stderr: stderr})
}

// ended prefers ctx's error to the request error it caused.
func (c *Client) ended(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// detached is a context that survives ctx's cancellation, bounded by d on
// the client's clock.
func (c *Client) detached(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return clock.WithTimeout(context.WithoutCancel(ctx), c.clk, d)
}

// tail remembers how much of a growing log was already written.
type tail struct{ written int }

func (t *tail) copy(w io.Writer, log string) error {
	if len(log) < t.written {
		// Shorter than before: not the log we were following; say nothing
		// rather than repeat it.
		t.written = len(log)
		return nil
	}
	if len(log) == t.written || w == nil {
		t.written = len(log)
		return nil
	}
	_, err := io.WriteString(w, log[t.written:])
	t.written = len(log)
	return err
}

// replaced reports whether what log adds holds U+FFFD, which the JSON of
// the logs puts for bytes that are not UTF-8 (and for one that is
// written, or for the part of a character the next poll completes).
func (t *tail) replaced(log string) bool {
	return len(log) > t.written && strings.Contains(log[t.written:], "\uFFFD")
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return provider.Errorf(provider.Internal, "encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return provider.Errorf(provider.InvalidArgument, "toolbox request: %v", err)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return provider.Errorf(provider.Unavailable, "toolbox request cancelled: %w", ctx.Err())
		}
		return provider.Errorf(provider.Unavailable, "toolbox at %s does not answer: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return c.fail(method, path, resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return provider.Errorf(provider.Internal, "toolbox at %s answered %s %s with a body that is not the expected JSON: %v", c.base, method, path, err)
	}
	return nil
}

// fail turns a toolbox error body ({"statusCode","message","code",...}, as
// Daytona's daemon answers) into a coded error.
func (c *Client) fail(method, path string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	// Only the message, not the whole wire.ErrorResponse: a proxy in front
	// of the daemon may answer with other fields or types, and its message
	// is still the best thing to show.
	var e struct {
		Message string `json:"message"`
	}
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &e) == nil && e.Message != "" {
		msg = e.Message
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	code := provider.CodeForHTTPStatus(resp.StatusCode)
	if resp.StatusCode == http.StatusConflict && method == http.MethodPost && path == "/process/session" {
		code = provider.AlreadyExists
	}
	if resp.StatusCode == http.StatusGone {
		code = provider.FailedPrecondition
	}
	return &provider.Error{Code: code, Message: fmt.Sprintf("toolbox %s %s: HTTP %d: %.300s", method, path, resp.StatusCode, msg)}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails: it crashes the program instead
	return hex.EncodeToString(b)
}
