package provider

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

// Each rule of the evidence, as a sequence of what was learnt and the
// answer after it.
func TestAuthEvidenceRules(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	settings := func(cred string, present bool, min int) Evidence {
		return Evidence{Kind: EvidenceSettings, Credential: cred, Present: present, At: at(min), Why: "settings"}
	}
	remote := func(kind EvidenceKind, cred string, min int) Evidence {
		return Evidence{Kind: kind, Credential: cred, At: at(min), Why: fmt.Sprint("remote ", kind)}
	}
	tests := []struct {
		name      string
		evidence  []Evidence
		now       int // minutes after t0
		want      AuthState
		wantSince int // minutes after t0; -1 for none
	}{
		{"nothing known", nil, 0, AuthUnconfigured, -1},
		{"local settings make it configured", []Evidence{settings("k1", true, 0)}, 1, AuthConfigured, 0},
		{"missing settings are unconfigured", []Evidence{settings("", false, 0)}, 1, AuthUnconfigured, 0},
		{"an answered request makes it authenticated", []Evidence{settings("k1", true, 0), remote(EvidenceAnswered, "k1", 1)}, 2, AuthAuthenticated, 1},
		{"a refusal makes it required", []Evidence{settings("k1", true, 0), remote(EvidenceRefused, "k1", 1)}, 2, AuthRequired, 1},
		{"remote evidence outranks local settings read again", []Evidence{
			settings("k1", true, 0), remote(EvidenceRefused, "k1", 1), settings("k1", true, 2),
		}, 3, AuthRequired, 1},
		{"a transient failure keeps the last settled answer", []Evidence{
			settings("k1", true, 0), remote(EvidenceAnswered, "k1", 1), remote(EvidenceTransient, "k1", 2),
		}, 3, AuthAuthenticated, 1},
		{"a transient failure after a refusal keeps required", []Evidence{
			remote(EvidenceRefused, "k1", 1), remote(EvidenceTransient, "k1", 2),
		}, 3, AuthRequired, 1},
		{"remote evidence stands for 15 minutes", []Evidence{settings("k1", true, 0), remote(EvidenceAnswered, "k1", 1)}, 15, AuthAuthenticated, 1},
		{"then expires to what the settings say", []Evidence{settings("k1", true, 0), remote(EvidenceRefused, "k1", 1)}, 16, AuthConfigured, 0},
		{"a new request after expiry settles again", []Evidence{
			settings("k1", true, 0), remote(EvidenceRefused, "k1", 1), remote(EvidenceAnswered, "k1", 20),
		}, 21, AuthAuthenticated, 20},
		{"a credential change resets the evidence", []Evidence{
			settings("k1", true, 0), remote(EvidenceRefused, "k1", 1), settings("k2", true, 2),
		}, 3, AuthConfigured, 2},
		{"evidence about the new credential decides", []Evidence{
			remote(EvidenceRefused, "k1", 1), settings("k2", true, 2), remote(EvidenceAnswered, "k2", 3),
		}, 4, AuthAuthenticated, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a AuthEvidence
			for _, ev := range tt.evidence {
				a = a.Add(ev)
			}
			got := a.At(at(tt.now))
			assert.Equal(t, tt.want, got.State)
			if tt.wantSince < 0 {
				assert.True(t, got.Since.IsZero())
			} else {
				assert.Equal(t, at(tt.wantSince), got.Since)
			}
			assert.NotEmpty(t, got.Why)
		})
	}
}

func TestEvidenceOf(t *testing.T) {
	tests := []struct {
		err  error
		want EvidenceKind
	}{
		{nil, EvidenceAnswered},
		{Errorf(NotFound, "no such sandbox"), EvidenceAnswered},
		{Errorf(InvalidArgument, "bad name"), EvidenceAnswered},
		{Errorf(Unauthenticated, "bad key"), EvidenceRefused},
		{Errorf(PermissionDenied, "not yours"), EvidenceRefused},
		{Errorf(Unavailable, "connection refused"), EvidenceTransient},
		{Errorf(ResourceExhausted, "429"), EvidenceTransient},
		{Errorf(Internal, "500"), EvidenceTransient},
		{context.DeadlineExceeded, EvidenceTransient},
		{context.Canceled, EvidenceTransient},
		{errors.New("no code"), EvidenceTransient},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, EvidenceOf(tt.err), "%v", tt.err)
	}
}

func TestAuthTrackerOnTheClock(t *testing.T) {
	clk := clocktest.NewFake(time.Time{})
	tr := NewAuthTracker(clk)
	key := Fingerprint("secret-key")
	assert.NotContains(t, key, "secret")
	tr.Settings(key, true, "DAYTONA_API_KEY is set")
	assert.Equal(t, AuthConfigured, tr.Auth().State)
	clk.Advance(time.Second)
	tr.Result(key, Errorf(Unauthenticated, "the API key was refused"), "")
	got := tr.Auth()
	assert.Equal(t, Auth{State: AuthRequired, Since: clk.Now(), Why: "the API key was refused"}, got)
	clk.Advance(RemoteEvidenceTTL)
	assert.Equal(t, AuthConfigured, tr.Auth().State, "remote evidence expires on the tracker's clock")
}
