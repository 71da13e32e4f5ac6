package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandplane/sandplane/provider/clock"
)

// SecretPrefix starts every endpoint secret, as Svix's do.
const SecretPrefix = "whsec_"

// AttemptTimeout is how long an attempt waits for its answer, Svix's 15 s.
const AttemptTimeout = 15 * time.Second

// Schedule is Svix's retry schedule: the wait before each attempt after the
// first.
var Schedule = []time.Duration{
	5 * time.Second, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour,
}

// Fault is what a test makes of one attempt.
type Fault struct {
	// Drop loses the attempt before it reaches the receiver: it counts as
	// failed and is retried.
	Drop bool
	// Duplicate delivers the attempt twice, with one svix-id.
	Duplicate bool
	// Delay holds the attempt back this long first.
	Delay time.Duration
}

// Config configures a Dispatcher.
type Config struct {
	// Endpoints are the receivers' URLs (http or https).
	Endpoints []string
	// Secret signs every delivery: SecretPrefix and the base64 of the key.
	// Empty: a new random one (see Secret).
	Secret string
	// Clock times the retries, delays and svix-timestamp; nil is real.
	Clock clock.Clock
	// Scale shrinks the retry schedule (the simulator's Minute over a
	// minute); 0 is 1.
	Scale float64
	// Client sends the attempts; nil is a client with AttemptTimeout that
	// ignores proxies.
	Client *http.Client
	// Fault, when set, is asked about every attempt.
	Fault func(Message) (Fault, bool)
	// LogSize bounds the attempt log; 0 is 1000.
	LogSize int
}

// Attempt is one delivery attempt, as the log keeps it.
type Attempt struct {
	MessageID      string    `json:"messageId"`
	EventID        string    `json:"eventId,omitempty"`
	Organization   string    `json:"organizationId"`
	EventType      string    `json:"eventType"`
	Endpoint       string    `json:"endpoint"`
	Attempt        int       `json:"attempt"`
	At             time.Time `json:"timestamp"`
	ResponseStatus int       `json:"responseStatusCode"`
	// Status is "succeeded", "failed" (to be retried, or the last),
	// "dropped" (by a fault) or "pending" (sent, not yet answered).
	Status  string `json:"status"`
	Error   string `json:"error,omitempty"`
	Fault   string `json:"fault,omitempty"`
	Payload string `json:"payload"`
}

// Message is what Send sends.
type Message struct {
	// Org is the organization the event is of.
	Org string
	// EventType is the event's name, sandbox.created say.
	EventType string
	// EventID, when set, is the sender's idempotency key, Svix's eventId.
	EventID string
	// Subject is what the event is about (a sandbox id), for Fault.
	Subject string
	// Payload is sent as JSON.
	Payload any
}

// message is a Message on its way, with its svix-id.
type message struct {
	Message
	id   string
	body []byte
}

// Dispatcher sends messages to its endpoints. It is safe for concurrent
// use; Close stops it.
type Dispatcher struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	key       []byte
	secret    string
	endpoints []string
	log       []Attempt
	timers    map[*retry]struct{}
	closed    bool
}

// New returns a dispatcher. invalid_argument-style errors name what is
// wrong: a malformed secret or endpoint.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Scale <= 0 {
		cfg.Scale = 1
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: AttemptTimeout, Transport: &http.Transport{Proxy: nil}}
	}
	if cfg.LogSize <= 0 {
		cfg.LogSize = 1000
	}
	d := &Dispatcher{cfg: cfg, timers: map[*retry]struct{}{}}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	if err := d.SetEndpoints(cfg.Endpoints); err != nil {
		return nil, err
	}
	secret := cfg.Secret
	if secret == "" {
		secret = NewSecret()
	}
	if err := d.SetSecret(secret); err != nil {
		return nil, err
	}
	return d, nil
}

// NewSecret is a new random endpoint secret.
func NewSecret() string {
	key := make([]byte, 24)
	_, _ = rand.Read(key) // never fails
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// SetSecret signs what is sent from now on with secret.
func (d *Dispatcher) SetSecret(secret string) error {
	key, err := parseSecret(secret)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.key, d.secret = key, secret
	return nil
}

func parseSecret(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, SecretPrefix)
	key, err := base64.StdEncoding.DecodeString(b64)
	if !ok || err != nil || len(key) < 16 || len(key) > 64 {
		return nil, errors.New("a webhook secret is whsec_ followed by the base64 of 16 to 64 random bytes (omit it to have one generated)")
	}
	return key, nil
}

// Secret is the secret deliveries are signed with.
func (d *Dispatcher) Secret() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.secret
}

// SetEndpoints replaces the receivers of messages sent from now on.
func (d *Dispatcher) SetEndpoints(urls []string) error {
	for _, u := range urls {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("webhook endpoint %q is not an http(s) URL such as http://127.0.0.1:8080/webhooks", u)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.endpoints = append([]string(nil), urls...)
	return nil
}

// Endpoints are the receivers of new messages.
func (d *Dispatcher) Endpoints() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.endpoints...)
}

// Send queues m for every endpoint and returns its svix-id; the attempts
// run in the background.
func (d *Dispatcher) Send(msg Message) (string, error) {
	body, err := json.Marshal(msg.Payload)
	if err != nil {
		return "", fmt.Errorf("encode the %s webhook: %w", msg.EventType, err)
	}
	m := &message{Message: msg, id: newMessageID(), body: body}
	for _, ep := range d.Endpoints() {
		d.schedule(m, ep, 1, 0)
	}
	return m.id, nil
}

// newMessageID is an id in Svix's shape, msg_ and 27 characters.
func newMessageID() string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	return "msg_" + strings.TrimRight(base64.RawURLEncoding.EncodeToString(b), "=")[:27]
}

// retry is a scheduled attempt; its timer is set under the dispatcher's
// lock, before anything but Close reads it.
type retry struct{ t clock.Timer }

// schedule runs attempt n of m to ep after wait.
func (d *Dispatcher) schedule(m *message, ep string, n int, wait time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.wg.Add(1)
	if wait <= 0 {
		go d.attempt(m, ep, n, nil)
		return
	}
	r := &retry{}
	r.t = d.cfg.Clock.AfterFunc(wait, func() { d.attempt(m, ep, n, r) })
	d.timers[r] = struct{}{}
}

// attempt delivers m to ep once (twice for a duplicating fault), logs it,
// and schedules the next attempt if it failed.
func (d *Dispatcher) attempt(m *message, ep string, n int, r *retry) {
	defer d.wg.Done()
	d.forget(r)
	if d.ctx.Err() != nil {
		return
	}
	ft, faulted := Fault{}, false
	if d.cfg.Fault != nil {
		ft, faulted = d.cfg.Fault(m.Message)
	}
	if faulted && ft.Delay > 0 && !d.wait(ft.Delay) {
		return
	}
	a := d.deliver(m, ep, n, ft, faulted)
	if faulted && ft.Duplicate && a.Status == "succeeded" {
		d.deliver(m, ep, n, Fault{}, false)
	}
	if a.Status != "succeeded" && n <= len(Schedule) {
		d.schedule(m, ep, n+1, d.scaled(Schedule[n-1]))
	}
}

// wait waits d on the clock; false when the dispatcher closed first.
func (d *Dispatcher) wait(w time.Duration) bool {
	t := d.cfg.Clock.NewTimer(w)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-d.ctx.Done():
		return false
	}
}

func (d *Dispatcher) scaled(w time.Duration) time.Duration {
	s := time.Duration(float64(w) * d.cfg.Scale)
	return max(s, time.Millisecond)
}

func (d *Dispatcher) forget(r *retry) {
	if r == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.timers, r)
}

// deliver sends one attempt and logs what came of it.
func (d *Dispatcher) deliver(m *message, ep string, n int, ft Fault, faulted bool) Attempt {
	now := d.cfg.Clock.Now()
	a := Attempt{MessageID: m.id, EventID: m.EventID, Organization: m.Org, EventType: m.EventType, Endpoint: ep,
		Attempt: n, At: now, Payload: string(m.body)}
	if faulted {
		a.Fault = ft.describe()
	}
	if faulted && ft.Drop {
		a.Status, a.Error = "dropped", "dropped by a fault before it reached the receiver"
		d.record(a)
		return a
	}
	status, err := d.post(m, ep, now)
	a.ResponseStatus = status
	switch {
	case err != nil:
		a.Status, a.Error = "failed", err.Error()
	case status < 200 || status > 299:
		a.Status, a.Error = "failed", "the receiver answered "+strconv.Itoa(status)
	default:
		a.Status = "succeeded"
	}
	d.record(a)
	return a
}

func (ft Fault) describe() string {
	var parts []string
	if ft.Drop {
		parts = append(parts, "drop")
	}
	if ft.Duplicate {
		parts = append(parts, "duplicate")
	}
	if ft.Delay > 0 {
		parts = append(parts, "delay "+ft.Delay.String())
	}
	return strings.Join(parts, ", ")
}

// post is the HTTP request of one attempt, signed at now.
func (d *Dispatcher) post(m *message, ep string, now time.Time) (int, error) {
	ts := strconv.FormatInt(now.Unix(), 10)
	d.mu.Lock()
	sig := Sign(d.key, m.id, ts, m.body)
	d.mu.Unlock()
	req, err := http.NewRequestWithContext(d.ctx, http.MethodPost, ep, bytes.NewReader(m.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Svix-Webhooks/1.0 (sandplane simulator)")
	req.Header.Set("svix-id", m.id)
	req.Header.Set("svix-timestamp", ts)
	req.Header.Set("svix-signature", sig)
	resp, err := d.cfg.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

// Sign is the svix-signature of a message: "v1," and the base64 of the
// HMAC-SHA256, under key, of "id.timestamp.body".
func Sign(key []byte, id, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func (d *Dispatcher) record(a Attempt) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.log = append(d.log, a)
	if over := len(d.log) - d.cfg.LogSize; over > 0 {
		d.log = append(d.log[:0:0], d.log[over:]...)
	}
}

// Attempts is the attempt log, oldest first.
func (d *Dispatcher) Attempts() []Attempt {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Attempt(nil), d.log...)
}

// Close cancels what is in flight and every retry still to come, and waits
// for the attempts running to end.
func (d *Dispatcher) Close() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	for r := range d.timers {
		if r.t.Stop() {
			d.wg.Done()
		}
	}
	d.timers = nil
	d.mu.Unlock()
	d.cancel()
	d.wg.Wait()
}
