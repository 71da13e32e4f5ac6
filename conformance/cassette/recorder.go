package cassette

import (
	"bytes"
	"io"
	"net/http"
	"sync"
)

// Recorder is an http.RoundTripper that passes every request to its base
// and keeps the normalised exchange. It is safe for concurrent use; frames
// are numbered in the order their requests were sent.
type Recorder struct {
	base http.RoundTripper
	norm *Normalizer

	mu     sync.Mutex
	frames []*Frame
}

// NewRecorder records what goes through base (http.DefaultTransport when
// nil), normalised by norm.
func NewRecorder(base http.RoundTripper, norm *Normalizer) *Recorder {
	if base == nil {
		base = http.DefaultTransport
	}
	return &Recorder{base: base, norm: norm}
}

func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	f := &Frame{Request: r.norm.Request(req, body)}
	r.mu.Lock()
	r.frames = append(r.frames, f)
	f.Seq = len(r.frames)
	r.mu.Unlock()

	resp, err := r.base.RoundTrip(req)
	if err != nil {
		e := r.norm.Error(err)
		r.mu.Lock()
		f.Error = &e
		r.mu.Unlock()
		return nil, err
	}
	data, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	if rerr != nil {
		e := r.norm.Error(rerr)
		r.mu.Lock()
		f.Error = &e
		r.mu.Unlock()
		return nil, rerr
	}
	out := r.norm.Response(resp, data)
	r.mu.Lock()
	f.Response = &out
	r.mu.Unlock()
	return resp, nil
}

// Frames returns the exchanges so far.
func (r *Recorder) Frames() []Frame {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Frame, len(r.frames))
	for i, f := range r.frames {
		out[i] = *f
	}
	return out
}

// readBody reads req's body and puts an unread copy back.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	data, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(data))
	return data, nil
}
