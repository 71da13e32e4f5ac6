package simulator

import (
	"crypto/rand"
	"encoding/base64"
)

// The signing key of a sandbox's pre-signed file URLs (fileurls.go), which
// releases of the SDKs after v0.190.0 read with getSandboxSigningKey and
// replace with rotateSigningKey (both in the v0.205.1 document). Both
// answer for the caller's organization only, as every sandbox route does.

// newSigningKey is a sandbox's signing key: 32 bytes from the system's
// random source (never the seeded one that ids come from: the key opens
// files without the API key), as unpadded base64url.
func newSigningKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// getSigningKey answers the sandbox's signing key, made at the first ask
// and kept, across stop and start, until rotateSigningKey or the sandbox's
// delete. The body is the key itself as text, as NestJS sends a string a
// handler returns (every SDK reads it as the string it is).
func (s extraAPI) getSigningKey(c *call) (reply, *apiError) {
	return s.signingKeyReply(c, false)
}

// rotateSigningKey replaces the sandbox's signing key, so that every URL
// signed with the old one is refused, and answers the new key.
func (s extraAPI) rotateSigningKey(c *call) (reply, *apiError) {
	return s.signingKeyReply(c, true)
}

func (s extraAPI) signingKeyReply(c *call, rotate bool) (reply, *apiError) {
	s.mu.Lock()
	sb, err := s.lookup(c.org, c.params["sandboxId"])
	if err != nil {
		s.mu.Unlock()
		return reply{}, err
	}
	c.sandboxID = sb.ID
	key := sb.signingKeyLocked(rotate)
	s.mu.Unlock()
	return textReply(c, key), nil
}

// signingKeyLocked is sb's signing key, made at the first ask, or anew
// when rotate. Called with s.mu held.
func (sb *sandbox) signingKeyLocked(rotate bool) string {
	if rotate || sb.signingKey == "" {
		sb.signingKey = newSigningKey()
	}
	return sb.signingKey
}
