package cassette

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider/clock"
)

func sampleFrames() []Frame {
	return []Frame{
		{Seq: 1, Request: Request{Method: "GET", URL: APIBase + "/api/sandbox/x"}, Response: &Response{Status: 404, Body: `{"message":"no"}`}},
		{Seq: 2, Request: Request{Method: "GET", URL: UnreachableBase + "/api/sandbox"}, Error: &Error{Kind: "dial", Message: "refused"}},
	}
}

func TestEncodeDecode(t *testing.T) {
	data, err := Encode(Manifest{Provider: "sim", Test: "t", Minute: "1s"}, sampleFrames())
	require.NoError(t, err)
	m, frames, err := Decode(data)
	require.NoError(t, err)
	assert.Equal(t, sampleFrames(), frames)
	_, body, _ := bytes.Cut(data, []byte("\n"))
	first := int64(bytes.IndexByte(body, '\n') + 1)
	assert.Equal(t, Manifest{
		Format: Format, Version: Version, Provider: "sim", Test: "t", Minute: "1s", Frames: 2, Errors: 1,
		PayloadBytes: int64(len(`{"message":"no"}`)), StoredBytes: int64(len(body)),
		LargestFrame: first, LargestFrameSeq: 1,
		BytesByKind: map[string]int64{"api": first, "error": int64(len(body)) - first},
		SHA256:      m.SHA256,
	}, m, "the statistics of the stream")

	_, err = Encode(Manifest{}, []Frame{{Seq: 2}})
	assert.Error(t, err, "frames are numbered from 1")
}

// TestDecodeFailsClosed: any change to a cassette after it was written is
// refused, whether or not the tamperer fixed the hash.
func TestDecodeFailsClosed(t *testing.T) {
	good, err := Encode(Manifest{Provider: "sim", Test: "t", Minute: "1s"}, sampleFrames())
	require.NoError(t, err)
	head, body, _ := bytes.Cut(good, []byte("\n"))
	rehash := func(edit func(*Manifest), frames []Frame) []byte {
		var buf bytes.Buffer
		m := Manifest{Format: Format, Version: Version, Provider: "sim", Test: "t", Minute: "1s", Frames: len(frames)}
		for _, f := range frames {
			buf.Write(mustJSON(t, f))
			buf.WriteByte('\n')
			if f.Error != nil {
				m.Errors++
			}
		}
		edit(&m)
		sum := sha256.Sum256(buf.Bytes())
		m.SHA256 = hex.EncodeToString(sum[:])
		return append(append(mustJSON(t, m), '\n'), buf.Bytes()...)
	}
	frames := sampleFrames()
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"edited frame", bytes.Replace(good, []byte(`404`), []byte(`200`), 1), "changed after recording"},
		{"dropped frame", append(append(head, '\n'), body[:bytes.IndexByte(body, '\n')+1]...), "changed after recording"},
		{"count off, hash fixed", rehash(func(m *Manifest) { m.Frames = 3 }, frames), "manifest says 3"},
		{"reordered, hash fixed", rehash(func(*Manifest) {}, []Frame{frames[1], frames[0]}), "has seq 2"},
		{"both outcomes, hash fixed", rehash(func(*Manifest) {}, []Frame{{Seq: 1, Response: &Response{Status: 200}, Error: &Error{Kind: "dial"}}, frames[1]}), "exactly one"},
		{"other version", bytes.Replace(good, []byte(`"version":2`), []byte(`"version":3`), 1), "version 3"},
		{"statistics off, hash fixed", rehash(func(m *Manifest) { m.StoredBytes = 1 }, frames), "storedBytes 1"},
		{"no manifest", []byte("garbage"), "no manifest"},
		{"cut short, hash fixed", func() []byte {
			cut := bytes.TrimSuffix(rehash(func(*Manifest) {}, frames), []byte("\n"))
			_, b, _ := bytes.Cut(cut, []byte("\n"))
			var m Manifest
			require.NoError(t, json.Unmarshal(bytes.SplitN(cut, []byte("\n"), 2)[0], &m))
			sum := sha256.Sum256(b)
			m.SHA256 = hex.EncodeToString(sum[:])
			return append(append(mustJSON(t, m), '\n'), b...)
		}(), "no newline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Decode(tt.data)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// A secret's value, short or long, leaves no trace in a recording of the
// secret routes, nor where the value shows again.
func TestNormalizerScrubsSecretValues(t *testing.T) {
	tests := []struct {
		name, method, path, body, want string
	}{
		{"create", "POST", "/api/secret", `{"name":"k","value":"sk-long-value","hosts":["a.test"]}`, `{"hosts":["a.test"],"name":"k","value":"[SCRUBBED]"}`},
		{"a short value", "POST", "/api/secret", `{"name":"k","value":"abc"}`, `{"name":"k","value":"[SCRUBBED]"}`},
		{"update", "PATCH", "/api/secret/0f0e", `{"value":"sk-rotated-value"}`, `{"value":"[SCRUBBED]"}`},
		{"paginated list", "GET", "/api/secret/paginated", ``, ``},
		{"another route keeps its value", "PUT", "/api/sandbox/x/labels", `{"labels":{"value":"kept"}}`, `{"labels":{"value":"kept"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := NewNormalizer(true)
			req := httptest.NewRequest(tt.method, "http://127.0.0.1:4026"+tt.path, strings.NewReader(tt.body))
			got := n.Request(req, []byte(tt.body))
			assert.Equal(t, tt.want, got.Body)
		})
	}
	n := NewNormalizer(true)
	body := `{"name":"k","value":"sk-long-value"}`
	n.Request(httptest.NewRequest("POST", "http://127.0.0.1:4026/api/secret", strings.NewReader(body)), []byte(body))
	out := n.Response(&http.Response{StatusCode: 400}, []byte(`{"message":"echo sk-long-value"}`))
	assert.NotContains(t, out.Body, "sk-long-value", "a value learned from the create goes everywhere")
}

func TestNormalizerForRecording(t *testing.T) {
	n := NewNormalizer(true)
	n.Secret("the-api-key")
	n.ReplaceBase("http://127.0.0.1:4026", APIBase)
	n.Replace("rghjkmnpq", RunID)
	id1, id2 := "3C8D4F0E-1111-4222-8333-444455556666", "9b1e0000-aaaa-4bbb-8ccc-dddddddddddd"

	body := `{"name":"cf-rghjkmnpq-x","env":{"TOKEN":"s3cret-value","N":"1"},"labels":{"a":"b"}}`
	req := httptest.NewRequest("POST", "http://127.0.0.1:4026/api/sandbox", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer the-api-key")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "varies")
	got := n.Request(req, []byte(body))
	assert.Equal(t, Request{
		Method: "POST", URL: APIBase + "/api/sandbox",
		Header: map[string]string{"Authorization": "Bearer " + Scrubbed, "Content-Type": "application/json"},
		Body:   `{"name":"cf-replayrun-x","env":{"TOKEN":"[SCRUBBED]","N":"1"},"labels":{"a":"b"}}`,
	}, got, "env values of 6 characters and more are secrets; short ones are not")

	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}, "Date": {"now"}}}
	out := n.Response(resp, []byte(fmt.Sprintf(
		`{"id":%q,"org":%q,"again":%q,"created":"2026-03-01T10:00:00.000Z","updated":"2026-03-01T10:00:01.500Z","nanos":"2026-03-01T09:59:59.123456789Z","echo":"s3cret-value","toolbox":"http://127.0.0.1:4026/toolbox","name":"DESTROYED_box_1772359202000"}`,
		id1, id2, strings.ToLower(id1))))
	assert.Equal(t, map[string]string{"Content-Type": "application/json"}, out.Header)
	assert.Equal(t, `{"id":"00000000-0000-4000-8000-000000000001","org":"00000000-0000-4000-8000-000000000002",`+
		`"again":"00000000-0000-4000-8000-000000000001","created":"2025-01-01T00:00:00.000Z","updated":"2025-01-01T00:00:01.500Z",`+
		`"nanos":"2024-12-31T23:59:59.123456789Z","echo":"[SCRUBBED]","toolbox":"http://api.invalid/toolbox",`+
		`"name":"DESTROYED_box_1735689602000"}`, out.Body,
		"ids by first appearance, times rebased keeping distance and precision, secrets learned from env scrubbed everywhere")

	e := n.Error(&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect 127.0.0.1:4026: connection refused")})
	assert.Equal(t, "dial", e.Kind)
	assert.Contains(t, e.Message, "connect api.invalid: connection refused", "the bare host:port goes too")
}

func TestNormalizerForReplayKeepsIDs(t *testing.T) {
	n := NewNormalizer(false)
	n.Secret("replay-key")
	req := httptest.NewRequest("GET", APIBase+"/api/sandbox/00000000-0000-4000-8000-000000000007", nil)
	req.Header.Set("Authorization", "Bearer replay-key")
	got := n.Request(req, nil)
	assert.Equal(t, APIBase+"/api/sandbox/00000000-0000-4000-8000-000000000007", got.URL, "ids in a replay came from the cassette")
	assert.Equal(t, "Bearer "+Scrubbed, got.Header["Authorization"])
}

// fakeTB collects what a Replayer reports.
type fakeTB struct{ errs []string }

func (f *fakeTB) Helper() {}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

// record runs calls against a live server through a Recorder and returns
// the decoded cassette.
func record(t *testing.T, calls func(c *http.Client, base string)) []Frame {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%d %s %s %s", n.Add(1), r.Method, r.URL.Path, body)
	}))
	defer srv.Close()
	norm := NewNormalizer(true)
	norm.Secret("k3y-secret")
	norm.ReplaceBase(srv.URL, APIBase)
	rec := NewRecorder(nil, norm)
	calls(&http.Client{Transport: rec}, srv.URL)
	data, err := Encode(Manifest{Provider: "test", Test: t.Name(), Minute: "1m0s"}, rec.Frames())
	require.NoError(t, err)
	_, frames, err := Decode(data)
	require.NoError(t, err)
	return frames
}

func send(t *testing.T, c *http.Client, method, url, body string) (string, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer k3y-secret")
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestRecordThenReplay(t *testing.T) {
	frames := record(t, func(c *http.Client, base string) {
		_, err := send(t, c, "GET", base+"/a", "")
		require.NoError(t, err)
		_, err = send(t, c, "POST", base+"/b", `{"x":1}`)
		require.NoError(t, err)
		_, err = send(t, c, "GET", "http://"+deadAddr(t)+"/c", "")
		require.Error(t, err)
	})
	require.Len(t, frames, 3)
	assert.Equal(t, "Bearer "+Scrubbed, frames[0].Request.Header["Authorization"])
	require.NotNil(t, frames[2].Error)
	assert.Equal(t, "dial", frames[2].Error.Kind)

	replay := func(tb *fakeTB) (*Replayer, *http.Client) {
		norm := NewNormalizer(false)
		norm.Secret("k3y-secret")
		rp := NewReplayer(tb, frames, norm)
		return rp, &http.Client{Transport: rp}
	}

	t.Run("the same requests get the recorded answers", func(t *testing.T) {
		tb := &fakeTB{}
		rp, c := replay(tb)
		got, err := send(t, c, "GET", APIBase+"/a", "")
		require.NoError(t, err)
		assert.Equal(t, "1 GET /a ", got)
		got, err = send(t, c, "POST", APIBase+"/b", `{"x":1}`)
		require.NoError(t, err)
		assert.Equal(t, `2 POST /b {"x":1}`, got)
		_, err = send(t, c, "GET", frames[2].Request.URL, "")
		var oe *net.OpError
		require.ErrorAs(t, err, &oe, "a recorded dial failure replays as one")
		assert.Equal(t, "dial", oe.Op)
		rp.Finish()
		assert.Empty(t, tb.errs)
	})

	tests := []struct {
		name  string
		calls func(t *testing.T, c *http.Client)
		want  string
	}{
		{"a different body", func(t *testing.T, c *http.Client) {
			_, _ = send(t, c, "GET", APIBase+"/a", "")
			_, err := send(t, c, "POST", APIBase+"/b", `{"x":2}`)
			assert.Error(t, err)
		}, "request 2 differs"},
		{"reordered", func(t *testing.T, c *http.Client) {
			_, err := send(t, c, "POST", APIBase+"/b", `{"x":1}`)
			assert.Error(t, err)
			_, err = send(t, c, "GET", APIBase+"/a", "")
			assert.Error(t, err, "nothing answers after a mismatch")
		}, "request 1 differs"},
		{"an extra request", func(t *testing.T, c *http.Client) {
			_, _ = send(t, c, "GET", APIBase+"/a", "")
			_, _ = send(t, c, "POST", APIBase+"/b", `{"x":1}`)
			_, _ = send(t, c, "GET", frames[2].Request.URL, "")
			_, err := send(t, c, "GET", APIBase+"/a", "")
			assert.Error(t, err)
		}, "extra request"},
		{"a missing request", func(t *testing.T, c *http.Client) {
			_, _ = send(t, c, "GET", APIBase+"/a", "")
		}, "2 recorded requests were never made"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := &fakeTB{}
			rp, c := replay(tb)
			tt.calls(t, c)
			rp.Finish()
			require.Len(t, tb.errs, 1, "exactly one failure: %v", tb.errs)
			assert.Contains(t, tb.errs[0], tt.want)
		})
	}
}

func deadAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestVirtualClock(t *testing.T) {
	v := NewVirtual()
	start := v.Now()
	fired := make(chan struct{})
	v.AfterFunc(time.Minute, func() { close(fired) })
	require.NoError(t, clock.Sleep(context.Background(), v, 40*time.Second), "a wait ends at once")
	assert.Equal(t, 40*time.Second, v.Since(start), "and moves time by itself")
	select {
	case <-fired:
		t.Fatal("a deadline fired before the waits added up to it")
	default:
	}
	require.NoError(t, clock.Sleep(context.Background(), v, 30*time.Second))
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("the deadline never fired")
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}
