package cassette

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLeaks: each credential shape the normalizer knows is found where it
// is left in the clear, and its placeholder is not.
func TestLeaks(t *testing.T) {
	resp := func(body string) Frame {
		return Frame{Seq: 4, Request: Request{Method: "GET", URL: APIBase + "/api/x"}, Response: &Response{Status: 200, Body: body}}
	}
	req := func(url string, header map[string]string) Frame {
		return Frame{Seq: 4, Request: Request{Method: "GET", URL: url, Header: header}, Response: &Response{Status: 200}}
	}
	tests := []struct {
		name     string
		frame    Frame
		literals []string
		field    string // "" for no leak
		what     string
	}{
		{"a preview token", resp(`{"token":"uhpajdhtnxulnqku"}`), nil, "response.body", `JSON key "token"`},
		{"its placeholder", resp(`{"token":"scrubbed-token-1"}`), nil, "", ""},
		{"an auth token, any case", resp(`{"AuthToken":"abc123def456ghi789"}`), nil, "response.body", `"AuthToken"`},
		{"an empty token", resp(`{"token":""}`), nil, "", ""},
		{"an ssh command", resp(`{"sshCommand":"ssh -p 22222 abcdefgh12345678@ssh.app.daytona.io"}`), nil, "response.body", "SSH token"},
		{"an ssh command's placeholder", resp(`{"sshCommand":"ssh -p 22222 scrubbed-token-2@ssh.app.daytona.io"}`), nil, "", ""},
		{"a bearer credential in a body", resp(`curl -H "Authorization: Bearer dtn_0123456789abcdef"`), nil, "response.body", "bearer"},
		{"prose about bearer tokens", resp(`{"message":"Bearer authentication is required"}`), nil, "", ""},
		{"a workload's token variable", resp(`{"result":"SANDPLANE_SANDBOX_TOKEN=q0w9e8r7t6y5\nPATH=/bin"}`), nil, "response.body", "credential variable"},
		{"a variable's placeholder", resp(`{"result":"SANDPLANE_SANDBOX_TOKEN=scrubbed-token-4"}`), nil, "", ""},
		{"a signed URL's signature", req(APIBase+"/f?X-Amz-Signature=0a1b2c3d4e5f&x=1", nil), nil, "request.url", "signed URL"},
		{"one JSON-escaped", resp(`{"url":"https://s3/f?a=1\u0026signature=0a1b2c3d4e5f"}`), nil, "response.body", "signed URL"},
		{"a signature placeholder", req(APIBase+"/f?signature=scrubbed-signature-1", nil), nil, "", ""},
		{"a preview path's token", req(APIBase+"/_preview/3000-uhpajdhtnxulnqku/x", nil), nil, "request.url", "preview link"},
		{"a preview host's token", resp(`{"url":"https://3000-uhpajdhtnxulnqku.proxy.daytona.works"}`), nil, "response.body", "preview link"},
		{"a preview by sandbox id", req(APIBase+"/_preview/3000-00000000-0000-4000-8000-000000000001/x", nil), nil, "", ""},
		{"an Authorization credential", req(APIBase+"/api/x", map[string]string{"Authorization": "Bearer k"}), nil, "request.header.Authorization", "Authorization"},
		{"a scrubbed one", req(APIBase+"/api/x", map[string]string{"Authorization": "Bearer " + Scrubbed}), nil, "", ""},
		{"a literal", resp(`{"echo":"s3cret-value"}`), []string{"s3cret-value"}, "response.body", "literal"},
		{"a short literal is not looked for", resp(`{"n":"1"}`), []string{"1"}, "", ""},
		{"an error message", Frame{Seq: 4, Request: Request{URL: APIBase}, Error: &Error{Kind: "other", Message: `get "` + APIBase + `/f?token=abcdef0123": EOF`}}, nil, "error.message", "signed URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaks := Leaks(tt.frame, tt.literals...)
			if tt.field == "" {
				assert.Empty(t, leaks)
				return
			}
			require.NotEmpty(t, leaks)
			assert.Equal(t, 4, leaks[0].Seq)
			assert.Equal(t, tt.field, leaks[0].Field)
			assert.Contains(t, leaks[0].What, tt.what)
			assert.Contains(t, leaks[0].Error(), "frame 4 "+tt.field, "says where")
		})
	}
}

// TestNormalizerPlaceholders: a recording replaces every credential a
// backend hands out by a placeholder of its kind, the same one wherever
// the credential comes back, and this machine's home by ReplayHome.
func TestNormalizerPlaceholders(t *testing.T) {
	n := NewNormalizer(true)
	n.Home("/home/rec")
	n.ReplaceBase("http://127.0.0.1:4026", APIBase)
	ok := &http.Response{StatusCode: 200}

	signed := n.Response(ok, []byte(`{"token":"uhpajdhtnxulnqku","url":"http://127.0.0.1:4026/_preview/3000-uhpajdhtnxulnqku"}`))
	assert.Equal(t, `{"token":"scrubbed-token-1","url":"http://api.invalid/_preview/3000-scrubbed-token-1"}`, signed.Body)
	again := n.Response(ok, []byte(`{"token":"second0token0abc","sshCommand":"ssh sshuser0token1@host","again":"uhpajdhtnxulnqku"}`))
	assert.Equal(t, `{"token":"scrubbed-token-2","sshCommand":"ssh scrubbed-token-3@host","again":"scrubbed-token-1"}`, again.Body,
		"numbered in order of appearance, stable")

	get := httptest.NewRequest("GET", "http://127.0.0.1:4026/_preview/3000-uhpajdhtnxulnqku/f?X-Amz-Signature=0a1b2c3d4e5f", nil)
	get.Header.Set("X-Daytona-Preview-Token", "header0token0value")
	got := n.Request(get, nil)
	assert.Equal(t, APIBase+"/_preview/3000-scrubbed-token-1/f?X-Amz-Signature=scrubbed-signature-1", got.URL)
	echo := n.Response(ok, []byte("header0token0value in /home/rec/src and /home/rec, not /home/recent; SANDPLANE_SANDBOX_TOKEN=q0w9e8r7t6y5"))
	assert.Equal(t, "scrubbed-header-1 in ${REPLAY_HOME}/src and ${REPLAY_HOME}, not /home/recent; SANDPLANE_SANDBOX_TOKEN=scrubbed-token-4", echo.Body)

	rec := httptest.NewRequest("POST", APIBase+"/api/x", strings.NewReader(""))
	rec.Header.Set("Authorization", "Bearer live-api-key-123")
	n.Request(rec, nil)
	assert.Equal(t, `{"echo":"[SCRUBBED]"}`, n.Response(ok, []byte(`{"echo":"live-api-key-123"}`)).Body,
		"the Authorization credential is a secret wherever it comes back")

	for _, f := range []Frame{{Seq: 1, Request: got, Response: &signed}, {Seq: 2, Request: got, Response: &again}} {
		assert.Empty(t, Leaks(f, n.Literals()...))
	}
}

// TestReplayKeepsPlaceholders: a replay's normalizer learns no tokens, so
// a request that sends a recorded placeholder back sends it as recorded.
func TestReplayKeepsPlaceholders(t *testing.T) {
	n := NewNormalizer(false)
	n.Home("/home/play")
	req := httptest.NewRequest("GET", APIBase+"/_preview/3000-scrubbed-token-1/f", nil)
	assert.Equal(t, APIBase+"/_preview/3000-scrubbed-token-1/f", n.Request(req, nil).URL)
	body := []byte(`{"command":"ls /home/play/x"}`)
	run := httptest.NewRequest("POST", APIBase+"/toolbox/x", bytes.NewReader(body))
	assert.Equal(t, `{"command":"ls ${REPLAY_HOME}/x"}`, n.Request(run, body).Body, "a replay's home is written as the recording's was")
}

// TestRecorderLimits: a recording fails before it keeps a body above
// MaxPayload, says which frame and which body, and its Err stays.
func TestRecorderLimits(t *testing.T) {
	big := strings.Repeat("x", MaxPayload+1)
	var sent atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		if r.URL.Path == "/big" {
			_, _ = io.WriteString(w, big)
		}
	}))
	defer srv.Close()
	tests := []struct {
		name, path, body, want string
		sent                   int32
	}{
		{"a request body", "/small", big, "frame 1 request.body is 8388609 bytes decoded, above the payload limit of 8388608", 0},
		{"a response body", "/big", "", "frame 1 response.body is 8388609 bytes decoded", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sent.Store(0)
			rec := NewRecorder(nil, NewNormalizer(true))
			c := &http.Client{Transport: rec}
			resp, err := c.Post(srv.URL+tt.path, "text/plain", strings.NewReader(tt.body))
			if err == nil {
				resp.Body.Close()
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Equal(t, tt.sent, sent.Load(), "a request above the limit is never sent")
			require.Error(t, rec.Err())
			assert.Contains(t, rec.Err().Error(), tt.want)
		})
	}
}

// TestRecorderErrOnLeak: a credential the normalizer could not replace
// (here a token too short to replace safely) fails the recording, naming
// the frame and the field.
func TestRecorderErrOnLeak(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"token":"abc"}`)
	}))
	defer srv.Close()
	rec := NewRecorder(nil, NewNormalizer(true))
	resp, err := (&http.Client{Transport: rec}).Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	require.Error(t, rec.Err())
	assert.Contains(t, rec.Err().Error(), `frame 1 response.body holds a credential (the JSON key "token")`)
	_, err = Encode(Manifest{}, rec.Frames())
	assert.ErrorContains(t, err, "frame 1 response.body", "nor does Encode write it")
}

// TestLimitsOnEncode: Encode refuses a body above MaxPayload, base64 or
// not, and a tape that would go above MaxTape.
func TestLimitsOnEncode(t *testing.T) {
	binary := "base64:" + base64.StdEncoding.EncodeToString(make([]byte, MaxPayload+1))
	_, err := Encode(Manifest{}, []Frame{{Seq: 1, Request: Request{Body: binary}, Response: &Response{Status: 200}}})
	assert.ErrorContains(t, err, "frame 1 request.body is 8388609 bytes decoded")
	for _, n := range []int{0, 1, 2, 3, 4, 1000, MaxPayload} {
		body := "base64:" + base64.StdEncoding.EncodeToString(make([]byte, n))
		assert.Equal(t, int64(n), payloadLen(body), "the decoded size of %d bytes in base64", n)
	}

	st := newStats()
	st.stored = MaxTape - 10
	err = st.add(Frame{Seq: 7, Response: &Response{Status: 200}}, 11)
	assert.ErrorContains(t, err, fmt.Sprintf("frame 7 would take the tape to %d bytes, above its limit of %d", MaxTape+1, MaxTape))
}

// TestDecodeVersion1: a cassette of the first format, with no statistics,
// still reads, and gets them filled in; saved again it is version 2.
func TestDecodeVersion1(t *testing.T) {
	v2, err := Encode(Manifest{Provider: "sim", Test: "t", Minute: "1s"}, sampleFrames())
	require.NoError(t, err)
	want, frames, err := Decode(v2)
	require.NoError(t, err)
	_, body, _ := bytes.Cut(v2, []byte("\n"))
	v1 := fmt.Sprintf(`{"format":%q,"version":1,"provider":"sim","test":"t","minute":"1s","frames":2,"errors":1,"sha256":%q}`, Format, want.SHA256)
	m, got, err := Decode(append([]byte(v1+"\n"), body...))
	require.NoError(t, err)
	assert.Equal(t, frames, got)
	assert.Equal(t, 1, m.Version)
	m.Version = Version
	assert.Equal(t, want, m, "with the statistics filled in")
}

func TestFinishNamesWhatWasLeft(t *testing.T) {
	var frames []Frame
	for i := 1; i <= 7; i++ {
		frames = append(frames, Frame{Seq: i, Request: Request{Method: "GET", URL: fmt.Sprintf("%s/%d", APIBase, i)}, Response: &Response{Status: 200}})
	}
	tb := &fakeTB{}
	NewReplayer(tb, frames, NewNormalizer(false)).Finish()
	require.Len(t, tb.errs, 1)
	assert.Equal(t, "cassette: 7 recorded requests were never made, the first: 1 GET http://api.invalid/1, 2 GET http://api.invalid/2, "+
		"3 GET http://api.invalid/3, 4 GET http://api.invalid/4, 5 GET http://api.invalid/5, and 2 more", tb.errs[0])
}
