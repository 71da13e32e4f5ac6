package secrets

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
)

// DefaultMaxBody is how much of a request body the proxy reads to
// rewrite it, when Options.MaxBody is 0.
const DefaultMaxBody = 1 << 20

// rewriteHeaders replaces placeholders in every header value, and in
// the password or user of a Basic Authorization, which a client
// base64-encodes and so would hide the placeholder from a plain scan.
func rewriteHeaders(h http.Header, subs []substitution) {
	r := replacer(subs)
	for key, values := range h {
		for i, v := range values {
			values[i] = r.Replace(v)
			if key == "Authorization" {
				values[i] = rewriteBasic(values[i], r)
			}
		}
	}
}

func rewriteBasic(v string, r *strings.Replacer) string {
	scheme, encoded, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return v
	}
	decoded, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return v
	}
	replaced := r.Replace(string(decoded))
	if replaced == string(decoded) {
		return v
	}
	return scheme + " " + base64.StdEncoding.EncodeToString([]byte(replaced))
}

// rewriteBody replaces placeholders in a body of at most max bytes,
// setting the new length. A larger body goes on untouched, streamed and
// not held: a placeholder in it reaches the (allowed) host as the
// placeholder, which fails that request rather than holding unbounded
// memory. A compressed body is not rewritten either, for the same
// reason a scan could not see the placeholder in it.
func rewriteBody(r *http.Request, subs []substitution, max int64) error {
	if r.Body == nil || r.Body == http.NoBody || r.Header.Get("Content-Encoding") != "" {
		return nil
	}
	head, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		return err
	}
	if int64(len(head)) > max {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
		return nil
	}
	out := []byte(replacer(subs).Replace(string(head)))
	r.Body = io.NopCloser(bytes.NewReader(out))
	r.ContentLength = int64(len(out))
	r.TransferEncoding = nil
	return nil
}

func replacer(subs []substitution) *strings.Replacer {
	pairs := make([]string, 0, 2*len(subs))
	for _, s := range subs {
		pairs = append(pairs, s.placeholder, s.value)
	}
	return strings.NewReplacer(pairs...)
}
