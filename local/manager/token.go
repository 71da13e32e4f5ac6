package manager

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
)

const (
	// tokenFile holds the sandbox's secret, mode 0600, beside envFile.
	tokenFile = "sandbox-token"
	// TokenEnv is the variable that hands a workload its sandbox's token.
	TokenEnv = "SANDPLANE_SANDBOX_TOKEN"
	// tokenBytes of crypto/rand make one token.
	tokenBytes = 32
)

// newToken returns 32 random bytes, URL-safe base64 without padding.
func newToken() string {
	b := make([]byte, tokenBytes)
	_, _ = rand.Read(b) // never fails: it crashes the program instead
	return base64.RawURLEncoding.EncodeToString(b)
}

// sandboxToken returns the sandbox's token, made on first use: at create,
// or at the next start of a sandbox made before sandboxes had tokens. It
// lives as long as the sandbox directory, across stop and start.
func (m *Manager) sandboxToken(id string) (string, error) {
	tok, err := m.readToken(id)
	if err != nil || tok != "" {
		return tok, err
	}
	return writeTokenIn(m.dir(id))
}

// writeTokenIn makes a token and writes it as dir's token file, durably.
func writeTokenIn(dir string) (string, error) {
	tok := newToken()
	if err := writeFileAtomic(filepath.Join(dir, tokenFile), []byte(tok+"\n"), 0o600, true); err != nil {
		return "", err
	}
	return tok, nil
}

// readToken returns the sandbox's token, or "" when it has none yet.
func (m *Manager) readToken(id string) (string, error) {
	b, err := os.ReadFile(filepath.Join(m.dir(id), tokenFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
