package pool

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sandplane/sandplane/provider"
)

// Labels the pool puts on every sandbox it creates, so that its sandboxes
// can be told from others and found by key without knowing the key.
const (
	LabelPool = "sandplane.pool"
	LabelKey  = "sandplane.pool.key"
)

// fingerprint is a keyed hash of everything in spec that decides whether a
// sandbox can serve it. Keyed with the store's secret: env values are
// secrets, and a plain hash of a short one is a lookup away from it.
func (p *Pool) fingerprint(spec Spec) string {
	mac := hmac.New(sha256.New, p.secret)
	put(mac, "spec/v1", spec.Snapshot, string(spec.Runtime))
	for _, k := range sortedKeys(spec.Env) {
		put(mac, "env", k, spec.Env[k])
	}
	for _, k := range sortedKeys(spec.Labels) {
		put(mac, "label", k, spec.Labels[k])
	}
	r := spec.Resources
	put(mac, "resources", strconv.Itoa(r.CPU), strconv.Itoa(r.Memory), strconv.Itoa(r.Disk))
	return hex.EncodeToString(mac.Sum(nil))[:32]
}

// keyHash names a key in labels and sandbox names without revealing it.
func (p *Pool) keyHash(key string) string {
	mac := hmac.New(sha256.New, p.secret)
	put(mac, "key/v1", key)
	return hex.EncodeToString(mac.Sum(nil))[:16]
}

// put writes each part with its length first, so that no two different
// lists of parts hash the same.
func put(h hash.Hash, parts ...string) {
	var n [8]byte
	for _, s := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// newName is a sandbox name that tells which key it serves to whoever
// knows the secret: pool-<key hash>-<random>.
func (p *Pool) newName(key string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "pool-" + p.keyHash(key)[:12] + "-" + hex.EncodeToString(b[:])
}

func (p *Pool) labels(key string, spec Spec) map[string]string {
	out := make(map[string]string, len(spec.Labels)+2)
	for k, v := range spec.Labels {
		out[k] = v
	}
	out[LabelPool] = p.cfg.name
	out[LabelKey] = p.keyHash(key)
	return out
}

const maxKeyLen = 256

func validKey(key string) error {
	switch {
	case key == "" || len(key) > maxKeyLen:
		return provider.Errorf(provider.InvalidArgument, "pool key: 1 to %d bytes (got %d)", maxKeyLen, len(key))
	case !utf8.ValidString(key) || strings.IndexFunc(key, unicode.IsControl) >= 0:
		return provider.Errorf(provider.InvalidArgument, "pool key: valid UTF-8 without control characters")
	}
	return nil
}

func validSpec(spec Spec) error {
	for _, k := range []string{LabelPool, LabelKey} {
		if _, ok := spec.Labels[k]; ok {
			return provider.Errorf(provider.InvalidArgument, "label %s is the pool's own: leave it out of the spec", k)
		}
	}
	r := spec.Resources
	if r.CPU < 0 || r.Memory < 0 || r.Disk < 0 {
		return provider.Errorf(provider.InvalidArgument, "resources must not be negative")
	}
	return nil
}
