package cassette

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Format and Version identify the file format; a reader refuses others.
const (
	Format  = "sandplane-cassette"
	Version = 1
)

// Placeholders that recordings write instead of what varies between runs.
const (
	// Scrubbed replaces secrets: API keys, env values.
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

// Encode writes a cassette: the manifest with its counts and hash filled in,
// then the frames.
func Encode(m Manifest, frames []Frame) ([]byte, error) {
	var body bytes.Buffer
	m.Format, m.Version, m.Frames, m.Errors = Format, Version, len(frames), 0
	for i, f := range frames {
		if f.Seq != i+1 {
			return nil, fmt.Errorf("frame %d has seq %d", i+1, f.Seq)
		}
		if f.Error != nil {
			m.Errors++
		}
		line, err := json.Marshal(f)
		if err != nil {
			return nil, err
		}
		body.Write(line)
		body.WriteByte('\n')
	}
	sum := sha256.Sum256(body.Bytes())
	m.SHA256 = hex.EncodeToString(sum[:])
	head, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(append(head, '\n'), body.Bytes()...), nil
}

// Decode reads a cassette and checks it whole: format, version, hash,
// counts and sequence. Any mismatch is an error; nothing is half-read.
func Decode(data []byte) (Manifest, []Frame, error) {
	head, body, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return Manifest{}, nil, errors.New("no manifest line")
	}
	var m Manifest
	if err := json.Unmarshal(head, &m); err != nil {
		return Manifest{}, nil, fmt.Errorf("manifest: %w", err)
	}
	if m.Format != Format || m.Version != Version {
		return m, nil, fmt.Errorf("format %q version %d: want %q version %d", m.Format, m.Version, Format, Version)
	}
	sum := sha256.Sum256(body)
	if got := hex.EncodeToString(sum[:]); got != m.SHA256 {
		return m, nil, fmt.Errorf("the frames were changed after recording: sha256 %s, manifest says %s", got, m.SHA256)
	}
	var frames []Frame
	errs := 0
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var f Frame
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return m, nil, fmt.Errorf("frame %d: %w", len(frames)+1, err)
		}
		if f.Seq != len(frames)+1 {
			return m, nil, fmt.Errorf("frame %d has seq %d", len(frames)+1, f.Seq)
		}
		if (f.Response == nil) == (f.Error == nil) {
			return m, nil, fmt.Errorf("frame %d needs exactly one of response and error", f.Seq)
		}
		if f.Error != nil {
			errs++
		}
		frames = append(frames, f)
	}
	if err := sc.Err(); err != nil {
		return m, nil, err
	}
	if len(frames) != m.Frames || errs != m.Errors {
		return m, nil, fmt.Errorf("%d frames (%d errors), manifest says %d (%d)", len(frames), errs, m.Frames, m.Errors)
	}
	return m, frames, nil
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
