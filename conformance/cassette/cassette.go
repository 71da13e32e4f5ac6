package cassette

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Format and Version identify the file format; a reader refuses others.
// Version 1 manifests, which carry no stream statistics, are still read:
// Decode fills the statistics in, and Save writes version 2.
const (
	Format  = "sandplane-cassette"
	Version = 2
)

// Limits of a cassette. A recording fails before it writes more, and a
// reader refuses a file that holds more.
const (
	// MaxPayload bounds one body, request or response, decoded.
	MaxPayload = 8 << 20
	// MaxTape bounds the frame lines together, as stored.
	MaxTape = 256 << 20
)

// Placeholders that recordings write instead of what varies between runs.
const (
	// Scrubbed replaces the secrets a replay knows too: the Authorization
	// credential, API keys, env values. The credentials a backend hands
	// out get numbered placeholders instead (see KindToken).
	Scrubbed = "[SCRUBBED]"
	// APIBase replaces the recorded backend's scheme and host.
	APIBase = "http://api.invalid"
	// UnreachableBase replaces the address where nothing answered.
	UnreachableBase = "http://unreachable.invalid"
	// RunID replaces the recording's run id.
	RunID = "replayrun"
)

// Manifest is a cassette's first line.
type Manifest struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Provider and Test name what was recorded.
	Provider string `json:"provider"`
	Test     string `json:"test"`
	// Minute is the backend's interval minute during the recording.
	Minute string `json:"minute"`
	// Frames counts the lines after the manifest; Errors those of them that
	// ended in a transport error rather than a response.
	Frames int `json:"frames"`
	Errors int `json:"errors"`
	// PayloadBytes sums the decoded bodies of every request and response;
	// StoredBytes the frame lines as stored, newlines included.
	PayloadBytes int64 `json:"payloadBytes"`
	StoredBytes  int64 `json:"storedBytes"`
	// LargestFrame is the stored size of the longest frame line, newline
	// included, and LargestFrameSeq its seq (0 with no frames).
	LargestFrame    int64 `json:"largestFrame"`
	LargestFrameSeq int   `json:"largestFrameSeq"`
	// BytesByKind splits StoredBytes by frame kind (see FrameKind).
	BytesByKind map[string]int64 `json:"bytesByKind,omitempty"`
	// SHA256 is the hex digest of every line after the manifest, newlines
	// included.
	SHA256 string `json:"sha256"`
}

// Frame is one exchange.
type Frame struct {
	Seq      int       `json:"seq"`
	Request  Request   `json:"request"`
	Response *Response `json:"response,omitempty"`
	Error    *Error    `json:"error,omitempty"`
}

// Request is a normalised request.
type Request struct {
	Method string            `json:"method"`
	URL    string            `json:"url"`
	Header map[string]string `json:"header,omitempty"`
	Body   string            `json:"body,omitempty"`
}

// Response is a normalised response.
type Response struct {
	Status int               `json:"status"`
	Header map[string]string `json:"header,omitempty"`
	Body   string            `json:"body,omitempty"`
}

// Error is a transport failure: Kind "dial" (nothing answered), "reset"
// (the connection broke) or "other".
type Error struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// Encode writes a cassette: the manifest with its counts, statistics and
// hash filled in, then the frames. It refuses frames out of sequence, a
// body above MaxPayload, a tape above MaxTape, and a frame that holds a
// credential (see Leaks), naming the frame.
func Encode(m Manifest, frames []Frame) ([]byte, error) {
	var body bytes.Buffer
	st := newStats()
	for i, f := range frames {
		if f.Seq != i+1 {
			return nil, fmt.Errorf("frame %d has seq %d", i+1, f.Seq)
		}
		line, err := json.Marshal(f)
		if err != nil {
			return nil, err
		}
		line = append(line, '\n')
		if err := st.add(f, len(line)); err != nil {
			return nil, err
		}
		body.Write(line)
	}
	m.Format, m.Version = Format, Version
	st.fill(&m)
	sum := sha256.Sum256(body.Bytes())
	m.SHA256 = hex.EncodeToString(sum[:])
	head, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(append(head, '\n'), body.Bytes()...), nil
}

// Decode reads a cassette and checks it whole: format, version, hash,
// counts, statistics, limits, sequence, and that no frame holds a
// credential. Any mismatch is an error; nothing is half-read. A version 1
// manifest has no statistics to check; the returned manifest has them
// filled in either way.
func Decode(data []byte) (Manifest, []Frame, error) {
	head, body, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return Manifest{}, nil, errors.New("no manifest line")
	}
	var m Manifest
	if err := json.Unmarshal(head, &m); err != nil {
		return Manifest{}, nil, fmt.Errorf("manifest: %w", err)
	}
	if m.Format != Format || (m.Version != Version && m.Version != 1) {
		return m, nil, fmt.Errorf("format %q version %d: want %q version 1 or %d", m.Format, m.Version, Format, Version)
	}
	if len(body) > MaxTape {
		return m, nil, fmt.Errorf("the frames take %d bytes, above the tape limit of %d (MaxTape)", len(body), MaxTape)
	}
	sum := sha256.Sum256(body)
	if got := hex.EncodeToString(sum[:]); got != m.SHA256 {
		return m, nil, fmt.Errorf("the frames were changed after recording: sha256 %s, manifest says %s", got, m.SHA256)
	}
	if len(body) > 0 && body[len(body)-1] != '\n' {
		return m, nil, errors.New("the last frame line ends in no newline: the file was cut short")
	}
	frames, st, err := decodeFrames(body)
	if err != nil {
		return m, nil, err
	}
	want := m
	st.fill(&want)
	if len(frames) != m.Frames || st.errors != m.Errors {
		return m, nil, fmt.Errorf("%d frames (%d errors), manifest says %d (%d)", len(frames), st.errors, m.Frames, m.Errors)
	}
	if m.Version != 1 {
		if diff := statsDiff(m, want); diff != "" {
			return m, nil, fmt.Errorf("the manifest's statistics do not match the frames: %s", diff)
		}
	}
	want.Version = m.Version
	return want, frames, nil
}

// decodeFrames reads the frame lines of body, checking each.
func decodeFrames(body []byte) ([]Frame, *stats, error) {
	var frames []Frame
	st := newStats()
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, MaxTape+1)
	for sc.Scan() {
		var f Frame
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return nil, nil, fmt.Errorf("frame %d: %w", len(frames)+1, err)
		}
		if f.Seq != len(frames)+1 {
			return nil, nil, fmt.Errorf("frame %d has seq %d", len(frames)+1, f.Seq)
		}
		if (f.Response == nil) == (f.Error == nil) {
			return nil, nil, fmt.Errorf("frame %d needs exactly one of response and error", f.Seq)
		}
		if err := st.add(f, len(sc.Bytes())+1); err != nil {
			return nil, nil, err
		}
		frames = append(frames, f)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	return frames, st, nil
}

// Load reads and checks the cassette at path.
func Load(path string) (Manifest, []Frame, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Manifest{}, nil, err
	}
	m, frames, err := Decode(data)
	if err != nil {
		return m, nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, frames, nil
}

// Save writes the cassette at path, creating its directory.
func Save(path string, m Manifest, frames []Frame) error {
	data, err := Encode(m, frames)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// FrameKind classifies a frame for BytesByKind: "error" for a transport
// failure, else by the request's path: "toolbox", "preview" or "api" for
// Daytona's three surfaces, "other" for the rest.
func FrameKind(f Frame) string {
	if f.Error != nil {
		return "error"
	}
	u := f.Request.URL
	switch {
	case strings.Contains(u, "/toolbox/"):
		return "toolbox"
	case strings.Contains(u, "/_preview/") || previewRE.MatchString(u):
		return "preview"
	case strings.Contains(u, "/api/"):
		return "api"
	}
	return "other"
}

// stats accumulates a manifest's counts and statistics frame by frame,
// enforcing the limits as it goes.
type stats struct {
	frames, errors  int
	payload, stored int64
	largest         int64
	largestSeq      int
	byKind          map[string]int64
}

func newStats() *stats { return &stats{byKind: map[string]int64{}} }

// add counts f, stored as a line of size bytes, or says which limit it
// breaks or which credential it holds.
func (s *stats) add(f Frame, size int) error {
	if err := checkPayloads(f); err != nil {
		return err
	}
	if s.stored+int64(size) > MaxTape {
		return fmt.Errorf("frame %d would take the tape to %d bytes, above its limit of %d (MaxTape)", f.Seq, s.stored+int64(size), MaxTape)
	}
	if leaks := Leaks(f); len(leaks) > 0 {
		return leaks[0]
	}
	s.frames++
	if f.Error != nil {
		s.errors++
	}
	s.payload += payloadLen(f.Request.Body)
	if f.Response != nil {
		s.payload += payloadLen(f.Response.Body)
	}
	s.stored += int64(size)
	if int64(size) > s.largest {
		s.largest, s.largestSeq = int64(size), f.Seq
	}
	s.byKind[FrameKind(f)] += int64(size)
	return nil
}

// checkPayloads refuses a frame whose request or response body, decoded,
// is above MaxPayload.
func checkPayloads(f Frame) error {
	if n := payloadLen(f.Request.Body); n > MaxPayload {
		return PayloadError{Seq: f.Seq, Field: "request.body", Size: n}
	}
	if f.Response != nil {
		if n := payloadLen(f.Response.Body); n > MaxPayload {
			return PayloadError{Seq: f.Seq, Field: "response.body", Size: n}
		}
	}
	return nil
}

// PayloadError is a body above MaxPayload.
type PayloadError struct {
	Seq   int    // the frame's seq
	Field string // "request.body" or "response.body"
	Size  int64  // its decoded size
}

func (e PayloadError) Error() string {
	return fmt.Sprintf("frame %d %s is %d bytes decoded, above the payload limit of %d (MaxPayload)", e.Seq, e.Field, e.Size, MaxPayload)
}

// payloadLen is the decoded size of a stored body.
func payloadLen(body string) int64 {
	if rest, ok := strings.CutPrefix(body, "base64:"); ok {
		return int64(base64.StdEncoding.DecodedLen(len(rest)) - strings.Count(rest, "="))
	}
	return int64(len(body))
}

// fill writes s into m.
func (s *stats) fill(m *Manifest) {
	m.Frames, m.Errors = s.frames, s.errors
	m.PayloadBytes, m.StoredBytes = s.payload, s.stored
	m.LargestFrame, m.LargestFrameSeq = s.largest, s.largestSeq
	m.BytesByKind = nil
	if len(s.byKind) > 0 {
		m.BytesByKind = s.byKind
	}
}

// statsDiff describes how got's statistics differ from want's, or "".
func statsDiff(got, want Manifest) string {
	var diffs []string
	pair := func(name string, g, w int64) {
		if g != w {
			diffs = append(diffs, fmt.Sprintf("%s %d, the frames make %d", name, g, w))
		}
	}
	pair("payloadBytes", got.PayloadBytes, want.PayloadBytes)
	pair("storedBytes", got.StoredBytes, want.StoredBytes)
	pair("largestFrame", got.LargestFrame, want.LargestFrame)
	pair("largestFrameSeq", int64(got.LargestFrameSeq), int64(want.LargestFrameSeq))
	kinds := map[string]bool{}
	for k := range got.BytesByKind {
		kinds[k] = true
	}
	for k := range want.BytesByKind {
		kinds[k] = true
	}
	sorted := make([]string, 0, len(kinds))
	for k := range kinds {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		pair("bytesByKind["+k+"]", got.BytesByKind[k], want.BytesByKind[k])
	}
	return strings.Join(diffs, "; ")
}
