package cassette

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// TB is the part of testing.TB a Replayer reports to.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
}

// Replayer is an http.RoundTripper that answers from a cassette and never
// touches the network. Each request must equal the next recorded one after
// normalisation; the first that does not fails t, and so does every request
// after it, so that a scenario that expects errors cannot swallow the
// mismatch.
type Replayer struct {
	t    TB
	norm *Normalizer

	mu     sync.Mutex
	frames []Frame
	next   int
	broken bool
}

// NewReplayer replays frames, normalising live requests with norm (made by
// NewNormalizer(false), told the same secrets the recording had).
func NewReplayer(t TB, frames []Frame, norm *Normalizer) *Replayer {
	return &Replayer{t: t, norm: norm, frames: frames}
}

func (r *Replayer) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	got := r.norm.Request(req, body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.broken {
		return nil, fmt.Errorf("cassette: replay stopped at an earlier mismatch")
	}
	if r.next >= len(r.frames) {
		r.broken = true
		r.t.Errorf("cassette: extra request %s %s: the recording has only %d", got.Method, got.URL, len(r.frames))
		return nil, fmt.Errorf("cassette: extra request %s %s", got.Method, got.URL)
	}
	want := r.frames[r.next]
	if diff := compare(want.Request, got); diff != "" {
		r.broken = true
		r.t.Errorf("cassette: request %d differs from the recording: %s", want.Seq, diff)
		return nil, fmt.Errorf("cassette: request %d differs from the recording", want.Seq)
	}
	r.next++
	if want.Error != nil {
		return nil, want.Error.asError()
	}
	data, err := decodeBody(want.Response.Body)
	if err != nil {
		return nil, fmt.Errorf("cassette: frame %d: %w", want.Seq, err)
	}
	resp := &http.Response{
		Status:        strconv.Itoa(want.Response.Status) + " " + http.StatusText(want.Response.Status),
		StatusCode:    want.Response.Status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{},
		Body:          io.NopCloser(bytes.NewReader(data)),
		ContentLength: int64(len(data)),
		Request:       req,
	}
	for k, v := range want.Response.Header {
		resp.Header.Set(k, v)
	}
	return resp, nil
}

// Finish fails t when recorded requests were never made, naming them (the
// first few). A replay's harness runs it in the test's Cleanup.
func (r *Replayer) Finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.broken || r.next == len(r.frames) {
		return
	}
	left := r.frames[r.next:]
	r.t.Errorf("cassette: %d recorded requests were never made, the first: %s", len(left), describe(left, 5))
}

// describe names up to n frames as "seq METHOD URL", joined.
func describe(frames []Frame, n int) string {
	var names []string
	for i, f := range frames {
		if i == n {
			names = append(names, fmt.Sprintf("and %d more", len(frames)-n))
			break
		}
		names = append(names, fmt.Sprintf("%d %s %s", f.Seq, f.Request.Method, f.Request.URL))
	}
	return strings.Join(names, ", ")
}

// compare describes how got differs from want, or "".
func compare(want, got Request) string {
	var diffs []string
	if want.Method != got.Method || want.URL != got.URL {
		diffs = append(diffs, fmt.Sprintf("recorded %s %s, got %s %s", want.Method, want.URL, got.Method, got.URL))
	}
	keys := map[string]bool{}
	for k := range want.Header {
		keys[k] = true
	}
	for k := range got.Header {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		if want.Header[k] != got.Header[k] {
			diffs = append(diffs, fmt.Sprintf("header %s: recorded %q, got %q", k, want.Header[k], got.Header[k]))
		}
	}
	if want.Body != got.Body {
		diffs = append(diffs, fmt.Sprintf("body: recorded %.300q, got %.300q", want.Body, got.Body))
	}
	return strings.Join(diffs, "; ")
}
