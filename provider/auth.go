package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/provider/wire"
)

// AuthState is what the evidence so far says about a provider's
// credentials: what a host's health page shows, and what tells it whether a
// person must act.
type AuthState = wire.AuthState

const (
	// AuthUnconfigured: the settings the provider needs are missing.
	AuthUnconfigured = wire.AuthUnconfigured
	// AuthConfigured: the settings are present and nothing remote has said
	// more (yet, or for RemoteEvidenceTTL).
	AuthConfigured = wire.AuthConfigured
	// AuthAuthenticated: a request with these settings was answered.
	AuthAuthenticated = wire.AuthAuthenticated
	// AuthRequired: the backend refused these credentials; a person must
	// log in or fix the key.
	AuthRequired = wire.AuthRequired
)

// RemoteEvidenceTTL is how long what the backend said stands: past it, the
// answer falls back to what the local settings say until the next request.
const RemoteEvidenceTTL = 15 * time.Minute

// EvidenceKind is what one piece of evidence is.
type EvidenceKind int

const (
	// EvidenceSettings: the local settings were read (Evidence.Present
	// says whether they are there).
	EvidenceSettings EvidenceKind = iota
	// EvidenceAnswered: the backend answered a request, whatever the
	// answer (not_found included): it took the credentials.
	EvidenceAnswered
	// EvidenceRefused: the backend refused the credentials
	// (unauthenticated, permission_denied).
	EvidenceRefused
	// EvidenceTransient: a timeout, a 5xx, a 429, a dropped connection or
	// a call its caller gave up: it says nothing about the credentials.
	EvidenceTransient
)

// Evidence is one thing learnt about a provider's credentials.
type Evidence struct {
	Kind EvidenceKind
	// Credential names the credential it is about (Fingerprint), never the
	// secret itself. Evidence about another credential resets what was
	// known.
	Credential string
	// Present is, for EvidenceSettings, whether the settings are there.
	Present bool
	At      time.Time
	// Why says, in the words of the person who runs the host, what was
	// learnt.
	Why string
}

// EvidenceOf is the evidence a call's outcome gives: err nil or any answer
// of the backend is EvidenceAnswered, a refusal of the credentials
// EvidenceRefused, and a failure that could pass by itself (unavailable,
// deadline_exceeded, resource_exhausted, internal, canceled)
// EvidenceTransient.
func EvidenceOf(err error) EvidenceKind {
	switch Code(err) {
	case "":
		return EvidenceAnswered
	case Unauthenticated, PermissionDenied:
		return EvidenceRefused
	case Unavailable, DeadlineExceeded, ResourceExhausted, Internal, Canceled:
		return EvidenceTransient
	}
	return EvidenceAnswered
}

// Fingerprint names a credential without revealing it: the first 12 hex
// digits of its SHA-256, "" for none.
func Fingerprint(secret string) string {
	if secret == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:6])
}

// Auth is the settled answer: the state, since when, and why. The daemon's
// GET /v1/info carries one about the caller's own token.
type Auth = wire.Auth

// AuthEvidence is what is known about one credential: the last word of
// the local settings and of the backend. Its methods are pure, so that its
// rules are a table; AuthTracker holds one for a provider.
type AuthEvidence struct {
	credential string
	local      *Evidence // the last EvidenceSettings
	remote     *Evidence // the last EvidenceAnswered or EvidenceRefused
}

// Add returns the evidence with ev taken in. Evidence about another
// credential starts afresh; transient failures change nothing (the last
// settled answer stands); the backend's word outranks the local settings
// until it expires or the credential changes.
func (a AuthEvidence) Add(ev Evidence) AuthEvidence {
	if ev.Credential != a.credential {
		a = AuthEvidence{credential: ev.Credential}
	}
	switch ev.Kind {
	case EvidenceSettings:
		a.local = &ev
	case EvidenceAnswered, EvidenceRefused:
		a.remote = &ev
	}
	return a
}

// At is the answer as of now.
func (a AuthEvidence) At(now time.Time) Auth {
	if r := a.remote; r != nil && now.Sub(r.At) < RemoteEvidenceTTL {
		state := AuthAuthenticated
		if r.Kind == EvidenceRefused {
			state = AuthRequired
		}
		return Auth{State: state, Since: r.At, Why: r.Why}
	}
	if l := a.local; l != nil {
		if l.Present {
			return Auth{State: AuthConfigured, Since: l.At, Why: l.Why}
		}
		return Auth{State: AuthUnconfigured, Since: l.At, Why: l.Why}
	}
	return Auth{State: AuthUnconfigured, Why: "nothing is known yet"}
}

// AuthTracker keeps the evidence about a provider's credentials that every
// call feeds, on a clock. Safe for concurrent use.
type AuthTracker struct {
	clk clock.Clock
	mu  sync.Mutex
	ev  AuthEvidence
}

// NewAuthTracker returns a tracker on clk (the real clock when nil).
func NewAuthTracker(clk clock.Clock) *AuthTracker {
	if clk == nil {
		clk = clock.Real()
	}
	return &AuthTracker{clk: clk}
}

// Settings records what the local settings say about credential.
func (t *AuthTracker) Settings(credential string, present bool, why string) {
	t.add(Evidence{Kind: EvidenceSettings, Credential: credential, Present: present, Why: why})
}

// Result records the outcome of a call made with credential. answered
// says who answered, for a call the backend answered; a refusal or a
// failure is said by err's message.
func (t *AuthTracker) Result(credential string, err error, answered string) {
	kind, why := EvidenceOf(err), answered
	if kind != EvidenceAnswered {
		why = Message(err)
	}
	t.add(Evidence{Kind: kind, Credential: credential, Why: why})
}

func (t *AuthTracker) add(ev Evidence) {
	ev.At = t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ev = t.ev.Add(ev)
}

// Auth is the settled answer now.
func (t *AuthTracker) Auth() Auth {
	now := t.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ev.At(now)
}
