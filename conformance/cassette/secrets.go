package cassette

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// ReplayHome replaces the recording machine's home directory in every
// absolute path under it.
const ReplayHome = "${REPLAY_HOME}"

// Kinds of credential a recording replaces by a numbered placeholder,
// "scrubbed-<kind>-<n>". The same value gets the same placeholder
// throughout a recording, so a replay that sends a recorded token back (a
// preview URL, an SSH user) sends what the cassette holds. The placeholder
// is made of letters, digits and hyphens only, so that it stays what it is
// in a URL's path, query or host.
const (
	KindToken     = "token"     // preview, toolbox, auth and SSH tokens a backend hands out
	KindSignature = "signature" // a signed URL's signature and credential parameters
	KindHeader    = "header"    // a credential header's value, such as the preview token's
)

// credentialKeys are the JSON keys whose string values are credentials,
// compared case-insensitively.
var credentialKeys = map[string]bool{
	"token": true, "authtoken": true, "previewtoken": true, "toolboxtoken": true, "sshtoken": true,
	"accesstoken": true, "refreshtoken": true, "apikey": true, "api_key": true, "secret": true,
	"clientsecret": true, "password": true,
}

// credentialHeaders are request and response headers whose values are
// credentials; Authorization is handled apart, keeping its scheme.
var credentialHeaders = []string{"X-Daytona-Preview-Token", "X-Api-Key", "Cookie", "Set-Cookie"}

var (
	// jsonCredRE finds "key":"value" for any key; credentialKeys decides.
	jsonCredRE = regexp.MustCompile(`"([A-Za-z_]+)"\s*:\s*"((?:[^"\\]|\\.)*)"`)
	// urlCredRE finds a signed URL's credential parameters, also where JSON
	// wrote & as \u0026.
	urlCredRE = regexp.MustCompile(`(?i)(?:[?&]|\\u0026)(signature|sig|x-amz-signature|x-amz-security-token|x-amz-credential|x-goog-signature|x-goog-credential|token|access_token|api_key|apikey)=([^&"\s#\\]+)`)
	// bearerRE finds a bearer credential written out in text.
	bearerRE = regexp.MustCompile(`(?i)\bbearer\s+([A-Za-z0-9._~+/\-]{12,}=*)`)
	// previewRE finds a preview link's label: Daytona's proxy host
	// <port>-<token>.<domain> or the simulator's /_preview/<port>-<token>.
	previewRE = regexp.MustCompile(`(?:/_preview/|https?://)(\d{2,5})-([A-Za-z0-9]+(?:-[A-Za-z0-9]+)*)`)
	// envCredRE finds a credential variable's assignment, as a workload's
	// environment prints it: SANDPLANE_SANDBOX_TOKEN=..., AWS_SECRET=...
	envCredRE = regexp.MustCompile(`\b[A-Z][A-Z0-9_]*(?:TOKEN|SECRET|API_KEY|APIKEY|PASSWORD)=([^\s"'\\&;]+)`)
	// sshRE finds an SSH token used as the user of an ssh command.
	sshRE = regexp.MustCompile(`\bssh\s+(?:-p\s*\d+\s+)?([A-Za-z0-9_\-]{8,})@`)

	placeholderRE  = regexp.MustCompile(`^scrubbed-[a-z]+-\d+$`)
	placeholderIDs = regexp.MustCompile(`^00000000-0000-4000-8000-[0-9a-f]{12}$`)
)

// IsPlaceholder reports whether v is one of the values a recording writes
// instead of a credential or an id.
func IsPlaceholder(v string) bool {
	return v == Scrubbed || placeholderRE.MatchString(v) || placeholderIDs.MatchString(v)
}

// Leak is a credential found in a frame.
type Leak struct {
	Seq   int    // the frame's sequence number
	Field string // "request.url", "request.header.Authorization", "response.body", "error.message", ...
	What  string // which shape or literal it matched, never the value
}

func (l Leak) Error() string {
	return fmt.Sprintf("frame %d %s holds a credential (%s)", l.Seq, l.Field, l.What)
}

// Leaks lists every credential f still holds: any text of the shapes a
// normalizer knows (a bearer credential, a credential JSON key, a signed
// URL's parameters, a preview link's token, an SSH user) whose value is no
// placeholder, and every one of literals that appears anywhere.
func Leaks(f Frame, literals ...string) []Leak {
	var out []Leak
	for _, fld := range fields(f) {
		what := leakIn(fld.text, literals)
		if what == "" && strings.HasSuffix(fld.name, ".header.Authorization") {
			what = authorizationLeak(fld.text)
		}
		if what != "" {
			out = append(out, Leak{Seq: f.Seq, Field: fld.name, What: what})
		}
	}
	return out
}

type field struct{ name, text string }

// fields names every text of f a credential could hide in.
func fields(f Frame) []field {
	out := []field{{"request.url", f.Request.URL}, {"request.body", f.Request.Body}}
	out = append(out, headerFields("request.header.", f.Request.Header)...)
	if f.Response != nil {
		out = append(out, field{"response.body", f.Response.Body})
		out = append(out, headerFields("response.header.", f.Response.Header)...)
	}
	if f.Error != nil {
		out = append(out, field{"error.message", f.Error.Message})
	}
	return out
}

func headerFields(prefix string, h map[string]string) []field {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]field, 0, len(keys))
	for _, k := range keys {
		out = append(out, field{prefix + k, h[k]})
	}
	return out
}

// authorizationLeak is what is wrong with an Authorization header's
// value, or "": only its scheme may stay, before a placeholder.
func authorizationLeak(v string) string {
	cred := v
	if _, c, ok := strings.Cut(v, " "); ok {
		cred = c
	}
	if IsPlaceholder(strings.TrimSpace(cred)) {
		return ""
	}
	return "an Authorization credential"
}

// leakIn names the first credential shape or literal in s, or "".
func leakIn(s string, literals []string) string {
	for _, lit := range literals {
		if len(lit) >= minSecretLen && strings.Contains(s, lit) {
			return "a literal secret of the recording"
		}
	}
	for _, m := range jsonCredRE.FindAllStringSubmatch(s, -1) {
		if credentialKeys[strings.ToLower(m[1])] && m[2] != "" && !IsPlaceholder(m[2]) {
			return fmt.Sprintf("the JSON key %q", m[1])
		}
	}
	checks := []struct {
		re       *regexp.Regexp
		what     string
		credible func(string) bool // nil: any value that is no placeholder
	}{
		{urlCredRE, "a signed URL's parameter", nil},
		// Prose says "bearer authentication"; a credential has a digit.
		{bearerRE, "a bearer credential", hasDigit},
		{previewRE, "a preview link's token", nil},
		{sshRE, "an SSH token", nil},
		{envCredRE, "a credential variable", nil},
	}
	for _, c := range checks {
		for _, m := range c.re.FindAllStringSubmatch(s, -1) {
			v := m[len(m)-1]
			if !IsPlaceholder(v) && (c.credible == nil || c.credible(v)) {
				return c.what
			}
		}
	}
	return ""
}

func hasDigit(s string) bool { return strings.ContainsAny(s, "0123456789") }

// learnTokensLocked finds the credentials in text (the values of
// credential JSON keys, signed URL parameters, SSH users, credential
// variables' assignments) and gives each its placeholder.
func (n *Normalizer) learnTokensLocked(text string) {
	for _, m := range jsonCredRE.FindAllStringSubmatch(text, -1) {
		if !credentialKeys[strings.ToLower(m[1])] {
			continue
		}
		var v string
		if json.Unmarshal([]byte(`"`+m[2]+`"`), &v) == nil {
			n.tokenLocked(KindToken, v)
		}
	}
	for _, m := range urlCredRE.FindAllStringSubmatch(text, -1) {
		n.tokenLocked(KindSignature, m[2])
	}
	for _, re := range []*regexp.Regexp{sshRE, envCredRE} {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			n.tokenLocked(KindToken, m[1])
		}
	}
}

// learnHeadersLocked takes the credential headers' values, and the
// Authorization credential, as secrets.
func (n *Normalizer) learnHeadersLocked(h map[string][]string, record bool) {
	get := func(k string) string {
		for hk, vs := range h {
			if strings.EqualFold(hk, k) && len(vs) > 0 {
				return vs[0]
			}
		}
		return ""
	}
	if v := get("Authorization"); v != "" {
		_, cred, ok := strings.Cut(v, " ")
		if !ok {
			cred = v
		}
		n.addSecretLocked(strings.TrimSpace(cred))
	}
	if !record {
		return
	}
	for _, k := range credentialHeaders {
		if v := get(k); v != "" {
			n.tokenLocked(KindHeader, v)
		}
	}
}

// tokenLocked gives v its placeholder of kind, the one it already has if
// it was seen before. Placeholders, and values too short to replace
// safely, are left alone (Leaks reports the short ones).
func (n *Normalizer) tokenLocked(kind, v string) {
	if len(v) < minSecretLen || IsPlaceholder(v) || n.tokens[v] != "" {
		return
	}
	for _, sec := range n.secrets {
		if sec == v {
			return
		}
	}
	n.kinds[kind]++
	n.tokens[v] = fmt.Sprintf("scrubbed-%s-%d", kind, n.kinds[kind])
	n.tokenOrder = append(n.tokenOrder, v)
	sort.SliceStable(n.tokenOrder, func(i, j int) bool { return len(n.tokenOrder[i]) > len(n.tokenOrder[j]) })
}

// replaceTokensLocked writes every learned token's placeholder, longest
// token first, in s and in its JSON-escaped form.
func (n *Normalizer) replaceTokensLocked(s string) string {
	for _, tok := range n.tokenOrder {
		s = replaceBoth(s, tok, n.tokens[tok])
	}
	return s
}

// replaceBoth replaces old by new in s, and old's JSON-escaped form too.
func replaceBoth(s, old, new string) string {
	s = strings.ReplaceAll(s, old, new)
	if q, _ := json.Marshal(old); len(q) > 2 && string(q[1:len(q)-1]) != old {
		s = strings.ReplaceAll(s, string(q[1:len(q)-1]), new)
	}
	return s
}

// Literals is every secret and token n has scrubbed, for Leaks.
func (n *Normalizer) Literals() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := append([]string(nil), n.secrets...)
	return append(out, n.tokenOrder...)
}

// homeRE matches home as a whole path element: at the end of text or
// before a separator, never as the prefix of a longer name.
func homeRE(home string) *regexp.Regexp {
	return regexp.MustCompile(regexp.QuoteMeta(home) + `(/|$|[^A-Za-z0-9._\-])`)
}
