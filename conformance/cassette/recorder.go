package cassette

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Recorder is an http.RoundTripper that passes every request to its base
// and keeps the normalised exchange. It is safe for concurrent use; frames
// are numbered in the order their requests were sent.
//
// A recording fails rather than keep what a cassette may not hold: a
// request whose body is above MaxPayload is never sent, a response above
// it is not passed on, and a frame that would take the tape above MaxTape
// is not kept; each returns an error to its caller, and Err reports the
// first of them for good.
type Recorder struct {
	base http.RoundTripper
	norm *Normalizer

	mu     sync.Mutex
	frames []*Frame
	stored int64
	err    error
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
	if n := int64(len(body)); n > MaxPayload {
		// Not normalised, not kept, not sent: the frame it would have been
		// is the next one.
		r.mu.Lock()
		seq := len(r.frames) + 1
		r.mu.Unlock()
		return nil, r.fail(PayloadError{Seq: seq, Field: "request.body", Size: n})
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
	data, rerr := io.ReadAll(io.LimitReader(resp.Body, MaxPayload+1))
	resp.Body.Close()
	if int64(len(data)) > MaxPayload {
		return nil, r.fail(PayloadError{Seq: f.Seq, Field: "response.body", Size: int64(len(data))})
	}
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
	if err := r.count(f); err != nil {
		return nil, err
	}
	return resp, nil
}

// count adds f's stored size to the tape's, failing the recording when
// that goes above MaxTape.
func (r *Recorder) count(f *Frame) error {
	r.mu.Lock()
	line, err := json.Marshal(f)
	size := int64(len(line) + 1)
	r.stored += size
	total := r.stored
	r.mu.Unlock()
	if err != nil {
		return r.fail(err)
	}
	if total > MaxTape {
		return r.fail(fmt.Errorf("frame %d takes the tape to %d bytes, above its limit of %d (MaxTape)", f.Seq, total, MaxTape))
	}
	return nil
}

// fail keeps err as the recording's failure, if it is the first, and
// returns it.
func (r *Recorder) fail(err error) error {
	err = fmt.Errorf("cassette: %w", err)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
	return err
}

// Err is the recording's first failure: a limit broken, or a frame that
// still holds a credential, either of the shapes Leaks knows or one of
// the secrets and tokens the normalizer scrubbed. A recording with an Err
// must not be saved.
func (r *Recorder) Err() error {
	r.mu.Lock()
	err := r.err
	r.mu.Unlock()
	if err != nil {
		return err
	}
	literals := r.norm.Literals()
	for _, f := range r.Frames() {
		if leaks := Leaks(f, literals...); len(leaks) > 0 {
			return fmt.Errorf("cassette: %w", leaks[0])
		}
	}
	return nil
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
