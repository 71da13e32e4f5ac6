package cassette

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// minSecretLen keeps scrubbing from shredding bodies over env values such as
// "1" or "true", and from breaking JSON literals.
const minSecretLen = 6

// epoch is where rebased timestamps start.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

var (
	uuidRE = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	timeRE = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)
	// Daytona renames a deleted sandbox DESTROYED_<name>_<epoch ms>.
	destroyedRE = regexp.MustCompile(`(DESTROYED_[^"/?&\s]*_)(\d{13})\b`)
)

// Headers kept in a cassette; the rest vary or do not matter.
var (
	requestHeaders  = []string{"Authorization", "Content-Type"}
	responseHeaders = []string{"Content-Type", "Retry-After"}
)

// Normalizer turns live exchanges into their cassette form. A recording's
// normalizer also maps UUIDs and timestamps; a replay's only scrubs, because
// the ids and times in its requests came from the cassette already. It is
// safe for concurrent use.
type Normalizer struct {
	mu      sync.Mutex
	record  bool
	secrets []string
	subs    [][2]string
	ids     map[string]string
	first   time.Time
	// tokens maps each credential a recording learned to its placeholder;
	// tokenOrder lists them longest first; kinds counts them by kind.
	tokens     map[string]string
	tokenOrder []string
	kinds      map[string]int
	home       *regexp.Regexp
}

// NewNormalizer returns a normalizer for a recording (record) or a replay.
// Either writes ReplayHome for this machine's home directory.
func NewNormalizer(record bool) *Normalizer {
	n := &Normalizer{record: record, ids: map[string]string{}, tokens: map[string]string{}, kinds: map[string]int{}}
	if home, err := os.UserHomeDir(); err == nil {
		n.Home(home)
	}
	return n
}

// Home makes dir the home directory whose paths become ReplayHome: dir
// itself, and every path under it. A relative dir or the root is ignored.
func (n *Normalizer) Home(dir string) {
	dir = strings.TrimRight(dir, "/")
	if !strings.HasPrefix(dir, "/") || dir == "" {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.home = homeRE(dir)
}

// Secret scrubs s wherever it appears from now on.
func (n *Normalizer) Secret(s string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.addSecretLocked(s)
}

func (n *Normalizer) addSecretLocked(s string) {
	if len(s) < minSecretLen {
		return
	}
	for _, have := range n.secrets {
		if have == s {
			return
		}
	}
	n.secrets = append(n.secrets, s)
	// Longest first, so that a secret containing another goes whole.
	sort.Slice(n.secrets, func(i, j int) bool { return len(n.secrets[i]) > len(n.secrets[j]) })
}

// Replace writes new for every old from now on: the backend's address, the
// run id. Longer olds go first, so that one address is never mistaken for
// the prefix of another.
//
// A base URL is better given to ReplaceBase, which also catches its bare
// host:port in error messages.
func (n *Normalizer) Replace(old, new string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.subs = append(n.subs, [2]string{old, new})
	sort.SliceStable(n.subs, func(i, j int) bool { return len(n.subs[i][0]) > len(n.subs[j][0]) })
}

// ReplaceBase replaces the base URL raw ("http://127.0.0.1:4026") by
// placeholder, and its host:port by the placeholder's host.
func (n *Normalizer) ReplaceBase(raw, placeholder string) {
	n.Replace(raw, placeholder)
	from, err1 := url.Parse(raw)
	to, err2 := url.Parse(placeholder)
	if err1 == nil && err2 == nil && from.Host != "" {
		n.Replace(from.Host, to.Host)
	}
}

// Request normalises r, whose body is body, learning the env values it
// sends as secrets first.
func (n *Normalizer) Request(r *http.Request, body []byte) Request {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.learnLocked(body)
	if secretRoute.MatchString(r.URL.Path) {
		body = n.scrubSecretValueLocked(body)
	}
	n.learnHeadersLocked(r.Header, n.record)
	if n.record {
		n.learnTokensLocked(r.URL.String())
		n.learnTokensLocked(string(body))
	}
	out := Request{Method: r.Method, URL: n.textLocked(r.URL.String())}
	out.Header = n.headersLocked(r.Header, requestHeaders)
	out.Body = n.bodyLocked(body)
	return out
}

// Response normalises a response whose body is body.
func (n *Normalizer) Response(resp *http.Response, body []byte) Response {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.record {
		n.learnHeadersLocked(resp.Header, true)
		n.learnTokensLocked(string(body))
	}
	return Response{Status: resp.StatusCode, Header: n.headersLocked(resp.Header, responseHeaders), Body: n.bodyLocked(body)}
}

// Error normalises a transport failure.
func (n *Normalizer) Error(err error) Error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var oe *net.OpError
	kind := "other"
	switch {
	case errors.As(err, &oe) && oe.Op == "dial":
		kind = "dial"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		kind = "reset"
	}
	if n.record {
		n.learnTokensLocked(err.Error())
	}
	return Error{Kind: kind, Message: n.textLocked(err.Error())}
}

// asError rebuilds a recorded transport failure as the kind of error the
// network would give.
func (e Error) asError() error {
	switch e.Kind {
	case "dial":
		return &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("replayed: %s: %w", e.Message, syscall.ECONNREFUSED)}
	case "reset":
		return &net.OpError{Op: "read", Net: "tcp", Err: fmt.Errorf("replayed: %s: %w", e.Message, syscall.ECONNRESET)}
	}
	return errors.New("replayed: " + e.Message)
}

func (n *Normalizer) headersLocked(h http.Header, keep []string) map[string]string {
	out := map[string]string{}
	for _, k := range keep {
		v := h.Get(k)
		switch {
		case v == "":
			continue
		case k == "Authorization":
			// Whatever the credential, it never reaches a file.
			if scheme, _, ok := strings.Cut(v, " "); ok {
				v = scheme + " " + Scrubbed
			} else {
				v = Scrubbed
			}
		default:
			v = n.textLocked(v)
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// bodyLocked is text for a UTF-8 body; anything else is kept as base64,
// unnormalised.
func (n *Normalizer) bodyLocked(b []byte) string {
	if utf8.Valid(b) {
		return n.textLocked(string(b))
	}
	return "base64:" + base64.StdEncoding.EncodeToString(b)
}

// decodeBody reverses bodyLocked's encoding.
func decodeBody(s string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(s, "base64:"); ok {
		return base64.StdEncoding.DecodeString(rest)
	}
	return []byte(s), nil
}

// learnLocked adds the values of every "env" and "envs" map in a JSON body
// to the secrets: Daytona's create and the toolbox's execute send them.
func (n *Normalizer) learnLocked(body []byte) {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, child := range x {
				if env, ok := child.(map[string]any); ok && (k == "env" || k == "envs" || k == "envVars") {
					for _, val := range env {
						if s, ok := val.(string); ok {
							n.addSecretLocked(s)
						}
					}
				}
				walk(child)
			}
		case []any:
			for _, child := range x {
				walk(child)
			}
		}
	}
	walk(v)
}

func (n *Normalizer) textLocked(s string) string {
	for _, sec := range n.secrets {
		// JSON escapes some characters; replaceBoth catches that form too.
		s = replaceBoth(s, sec, Scrubbed)
	}
	s = n.replaceTokensLocked(s)
	for _, sub := range n.subs {
		s = strings.ReplaceAll(s, sub[0], sub[1])
	}
	if n.home != nil {
		s = n.home.ReplaceAllStringFunc(s, func(m string) string {
			// sub[1] is the separator after the home, or "" at the end.
			sub := n.home.FindStringSubmatch(m)
			return ReplayHome + sub[1]
		})
	}
	if !n.record {
		return s
	}
	s = uuidRE.ReplaceAllStringFunc(s, func(id string) string {
		key := strings.ToLower(id)
		if p, ok := n.ids[key]; ok {
			return p
		}
		p := fmt.Sprintf("00000000-0000-4000-8000-%012x", len(n.ids)+1)
		n.ids[key] = p
		return p
	})
	s = timeRE.ReplaceAllStringFunc(s, func(ts string) string {
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return ts
		}
		layout := "2006-01-02T15:04:05"
		if m := timeRE.FindStringSubmatch(ts); m[1] != "" {
			layout += "." + strings.Repeat("0", len(m[1])-1)
		}
		return n.rebaseLocked(t).Format(layout + "Z07:00")
	})
	return destroyedRE.ReplaceAllStringFunc(s, func(m string) string {
		parts := destroyedRE.FindStringSubmatch(m)
		ms, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			return m
		}
		return parts[1] + strconv.FormatInt(n.rebaseLocked(time.UnixMilli(ms)).UnixMilli(), 10)
	})
}

// rebaseLocked moves t onto the epoch, keeping its distance from the first
// time the recording saw.
func (n *Normalizer) rebaseLocked(t time.Time) time.Time {
	if n.first.IsZero() {
		n.first = t
	}
	return epoch.Add(t.Sub(n.first)).UTC()
}

// secretRoute is the API's POST /secret and PATCH /secret/{id}, whose
// body's "value" is an organization secret's plaintext.
var secretRoute = regexp.MustCompile(`/api/secret(/[^/]+)?$`)

// scrubSecretValueLocked replaces a secret route body's "value" by
// Scrubbed, whatever its length (the env rule spares short values, a
// secret's never), and learns it so that it goes wherever else it shows.
func (n *Normalizer) scrubSecretValueLocked(body []byte) []byte {
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	v, ok := m["value"].(string)
	if !ok {
		return body
	}
	n.addSecretLocked(v)
	m["value"] = Scrubbed
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}
