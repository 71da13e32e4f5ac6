package simulator

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	pathpkg "path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider/clock/clocktest"
	"github.com/sandplane/sandplane/simulator/internal/backend"
	"github.com/sandplane/sandplane/toolbox/wire"
)

// The signature scheme, against values the SDK's own signing code
// (@daytonaio/sdk 0.218.0, computeFileUrlSignature) gives for them.
func TestFileURLSignatureMatchesTheSDK(t *testing.T) {
	assert.Equal(t, "v1_k5W3OZkj31V-y5oia6M1I-KPUXVGgNviBKve8gCT6Kw",
		fileURLSignature("sandplane-test-key", "GET", "/home/daytona/report.txt", 1767225600))
	assert.Equal(t, "v1_4wafb7LaLTOnqG9avRGcjaqzRW4tTHrNy6LatTbw9eA",
		fileURLSignature("sandplane-test-key", "POST", "/home/daytona/in box/data.bin", 0))
	assert.False(t, validFileSignature("", "GET", "/f", 0, fileURLSignature("", "GET", "/f", 0)), "no key, no signature")
}

// toolboxRequest is one request that reached the recording toolbox.
type toolboxRequest struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   string
}

// recBackend is a backend whose every sandbox's toolbox is one recording
// server: downloads answer "content of <path>", uploads (upload-v2) keep
// the part "file" or the raw body and answer as the toolbox does. It shows what the proxy forwarded, and that it forwarded nothing
// else.
type recBackend struct {
	backend.None
	srv *httptest.Server
	mu  sync.Mutex
	got []toolboxRequest
}

func newRecBackend(t *testing.T) *recBackend {
	b := &recBackend{}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := toolboxRequest{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone()}
		switch {
		case r.URL.Path == "/files/download" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			_, _ = io.WriteString(w, "content of "+r.URL.Query().Get("path"))
		case r.URL.Path == "/files/upload-v2" && r.Method == http.MethodPost:
			// As the toolbox: the part "file" of a form, or the raw body.
			if mr, err := r.MultipartReader(); err == nil {
				for {
					part, err := mr.NextPart()
					if err != nil {
						break
					}
					if part.FormName() == "file" {
						b, _ := io.ReadAll(part)
						rec.Body = string(b)
						break
					}
				}
			} else {
				b, _ := io.ReadAll(r.Body)
				rec.Body = string(b)
			}
			p := r.URL.Query().Get("path")
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			_ = json.NewEncoder(w).Encode(map[string]string{"name": pathpkg.Base(p), "path": p, "type": "file"})
		default:
			http.Error(w, "route not found", http.StatusNotFound)
		}
		b.mu.Lock()
		b.got = append(b.got, rec)
		b.mu.Unlock()
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *recBackend) Start(context.Context, Workload) (string, error) { return b.srv.URL, nil }

func (b *recBackend) Toolbox(context.Context, string) (Route, error) {
	u, _ := url.Parse(b.srv.URL)
	return Route{URL: u, Host: u.Host, Token: "sandbox-secret", Transport: b.srv.Client().Transport}, nil
}

// take returns what reached the toolbox since the last take.
func (b *recBackend) take() []toolboxRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.got
	b.got = nil
	return out
}

// fileURLNow is the fake clock's start in the signed-URL tests: expiries
// are Unix seconds, so the clock must be past 1970.
var fileURLNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func fileURLHarness(t *testing.T) (*harness, *recBackend) {
	be := newRecBackend(t)
	clk := clocktest.NewFake(fileURLNow)
	h := newHarness(t, func(c *Config) { c.Backend = be; c.Clock = clk })
	h.clk = clk
	return h, be
}

// fileURL is the pre-signed URL the SDK makes: op is "files/download" or
// "files/upload-v2".
func (h *harness) fileURL(id, op, key, method, path string, expires int64) string {
	q := url.Values{"path": {path}, "expires": {strconv.FormatInt(expires, 10)},
		"signature": {fileURLSignature(key, method, path, expires)}}
	return "/toolbox/" + id + "/" + op + "?" + q.Encode()
}

// sendAnon sends a request without credentials.
func (h *harness) sendAnon(method, path, contentType string, body io.Reader) (int, []byte, http.Header) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, body)
	require.NoError(h.t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := h.srv.Client().Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	return resp.StatusCode, b, resp.Header
}

// multipartFile is a form with the part "file".
func multipartFile(t *testing.T, content string) (string, *bytes.Buffer) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", "upload.bin")
	require.NoError(t, err)
	_, _ = io.WriteString(fw, content)
	require.NoError(t, mw.Close())
	return mw.FormDataContentType(), &buf
}

// A signed URL opens its one operation on its one path without an API key,
// and forwards nothing of the caller's query or credentials.
func TestSignedFileURLsOpenTheirOperation(t *testing.T) {
	h, be := fileURLHarness(t)
	// No auto-stop: the clock moves a day.
	sb := h.create(apiclient.CreateSandbox{AutoStopInterval: ptr[int32](0)})
	_, key, _ := h.signingKey(testKey, http.MethodGet, sb.Id)
	exp := fileURLNow.Add(time.Hour).Unix()

	t.Run("download", func(t *testing.T) {
		u := h.fileURL(sb.Id, "files/download", key, "GET", "/home/daytona/a b.txt", exp)
		req, err := http.NewRequest(http.MethodGet, h.srv.URL+u+"&recursive=true&DAYTONA_SANDBOX_AUTH_KEY=x", nil)
		require.NoError(t, err)
		req.Header.Set("Origin", "https://elsewhere.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Cookie", "session=someone-elses")
		resp, err := h.srv.Client().Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		assert.Equal(t, "content of /home/daytona/a b.txt", string(b))
		got := be.take()
		require.Len(t, got, 1)
		assert.Equal(t, "/files/download", got[0].Path)
		assert.Equal(t, url.Values{"path": {"/home/daytona/a b.txt"}}.Encode(), got[0].RawQuery, "only the signed path goes on")
		assert.Equal(t, "sandbox-secret", got[0].Header.Get(previewTokenHeader))
		for _, hd := range []string{"Authorization", "Origin", "Sec-Fetch-Site", "Cookie"} {
			assert.Empty(t, got[0].Header.Get(hd), hd)
		}
	})
	t.Run("head", func(t *testing.T) {
		code, _, _ := h.sendAnon(http.MethodHead, h.fileURL(sb.Id, "files/download", key, "GET", "report.txt", exp), "", nil)
		assert.Equal(t, http.StatusOK, code)
		got := be.take()
		require.Len(t, got, 1)
		assert.Equal(t, http.MethodHead, got[0].Method)
	})
	t.Run("a second path value is not forwarded", func(t *testing.T) {
		u := h.fileURL(sb.Id, "files/download", key, "GET", "/home/daytona/mine.txt", exp) + "&path=%2Fetc%2Fshadow"
		code, b, _ := h.sendAnon(http.MethodGet, u, "", nil)
		require.Equal(t, http.StatusOK, code, string(b))
		assert.Equal(t, "content of /home/daytona/mine.txt", string(b))
		got := be.take()
		require.Len(t, got, 1)
		assert.Equal(t, "path=%2Fhome%2Fdaytona%2Fmine.txt", got[0].RawQuery)
	})
	t.Run("multipart upload", func(t *testing.T) {
		ct, body := multipartFile(t, "uploaded bytes")
		code, b, hdr := h.sendAnon(http.MethodPost, h.fileURL(sb.Id, "files/upload-v2", key, "POST", "/home/daytona/in/data.bin", exp), ct, body)
		require.Equal(t, http.StatusOK, code, string(b))
		assert.True(t, strings.HasPrefix(hdr.Get("Content-Type"), "application/json"))
		assert.JSONEq(t, `{"name":"data.bin","path":"/home/daytona/in/data.bin","type":"file"}`, string(b))
		got := be.take()
		require.Len(t, got, 1)
		assert.Equal(t, "/files/upload-v2", got[0].Path)
		assert.Equal(t, "path=%2Fhome%2Fdaytona%2Fin%2Fdata.bin", got[0].RawQuery)
		assert.Equal(t, "uploaded bytes", got[0].Body)
	})
	t.Run("raw upload", func(t *testing.T) {
		code, b, _ := h.sendAnon(http.MethodPost, h.fileURL(sb.Id, "files/upload-v2", key, "POST", "raw.bin", exp),
			"application/octet-stream", strings.NewReader("raw body bytes"))
		require.Equal(t, http.StatusOK, code, string(b))
		assert.JSONEq(t, `{"name":"raw.bin","path":"raw.bin","type":"file"}`, string(b))
		got := be.take()
		require.Len(t, got, 1)
		assert.Equal(t, "raw body bytes", got[0].Body, "a raw body reaches the toolbox as it came")
	})
	t.Run("until the second it expires", func(t *testing.T) {
		u := h.fileURL(sb.Id, "files/download", key, "GET", "soon.txt", fileURLNow.Add(time.Minute).Unix())
		h.clk.Advance(time.Minute)
		code, b, _ := h.sendAnon(http.MethodGet, u, "", nil)
		assert.Equal(t, http.StatusOK, code, string(b))
		h.clk.Advance(time.Second)
		code, b, _ = h.sendAnon(http.MethodGet, u, "", nil)
		assert.Equal(t, http.StatusUnauthorized, code, string(b))
		assert.Equal(t, "signature is expired", ginMessage(t, b))
		assert.Len(t, be.take(), 1, "the expired request went nowhere")
	})
	t.Run("expires 0 never expires", func(t *testing.T) {
		u := h.fileURL(sb.Id, "files/download", key, "GET", "forever.txt", 0)
		h.clk.Advance(24 * time.Hour)
		code, b, _ := h.sendAnon(http.MethodGet, u, "", nil)
		assert.Equal(t, http.StatusOK, code, string(b))
		assert.Len(t, be.take(), 1)
	})
	t.Run("the API key still opens upload-v2", func(t *testing.T) {
		ct, body := multipartFile(t, "with the key")
		req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/toolbox/"+sb.Id+"/files/upload-v2?path=keyed.txt", body)
		require.NoError(t, err)
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := h.srv.Client().Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		assert.JSONEq(t, `{"name":"keyed.txt","path":"keyed.txt","type":"file"}`, string(b))
		got := be.take()
		require.Len(t, got, 1)
		assert.Equal(t, "/files/upload-v2", got[0].Path)
	})
	var calls []Call
	for _, c := range h.sim.Calls() {
		if c.Operation == "toolbox" {
			calls = append(calls, c)
		}
	}
	require.NotEmpty(t, calls)
	for _, c := range calls {
		assert.Equal(t, h.sim.orgNames.of(testKey), c.Org, "a signed call is logged for the sandbox's organization")
		assert.NotContains(t, c.Path, "signature", "the call log keeps no signature")
	}
}

// ginMessage is the message of the proxy's gin error body, whose shape it
// checks.
func ginMessage(t *testing.T, b []byte) string {
	t.Helper()
	var g wire.ErrorResponse
	require.NoError(t, json.Unmarshal(b, &g), string(b))
	assert.NotZero(t, g.StatusCode)
	assert.Equal(t, wire.ErrorCode(g.StatusCode), g.Code)
	assert.NotEmpty(t, g.Timestamp)
	assert.NotEmpty(t, g.Path)
	assert.NotEmpty(t, g.Method)
	return g.Message
}

// Everything a signature does not sign is refused, in the proxy's gin
// shape, and never reaches the toolbox.
func TestSignedFileURLRefusals(t *testing.T) {
	h, be := fileURLHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	other := h.create(apiclient.CreateSandbox{})
	stopped := h.create(apiclient.CreateSandbox{})
	unkeyed := h.create(apiclient.CreateSandbox{})
	_, key, _ := h.signingKey(testKey, http.MethodGet, sb.Id)
	_, _, _ = h.signingKey(testKey, http.MethodGet, other.Id)
	_, stoppedKey, _ := h.signingKey(testKey, http.MethodGet, stopped.Id)
	_, _, err := h.api.SandboxAPI.StopSandbox(h.ctx, stopped.Id).Execute()
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.get(stopped.Id).GetState() == apiclient.SANDBOXSTATE_STOPPED }, 10*time.Second, time.Millisecond)

	// A sandbox of another organization, keyed by its owner.
	otherOrg := h.as("other-org-key")
	foreign, _, err := h.api.SandboxAPI.CreateSandbox(otherOrg).CreateSandbox(apiclient.CreateSandbox{}).Execute()
	require.NoError(t, err)
	_, foreignKey, _ := h.signingKey("other-org-key", http.MethodGet, foreign.Id)

	// A key that worked once, then was rotated.
	rotatedSB := h.create(apiclient.CreateSandbox{})
	_, oldKey, _ := h.signingKey(testKey, http.MethodGet, rotatedSB.Id)
	_, _, _ = h.signingKey(testKey, http.MethodPost, rotatedSB.Id)

	exp := fileURLNow.Add(time.Hour).Unix()
	past := fileURLNow.Add(-time.Second).Unix()
	down := func(id, k, path string, e int64) string { return h.fileURL(id, "files/download", k, "GET", path, e) }
	up := func(id, k, method, path string, e int64) string {
		return h.fileURL(id, "files/upload-v2", k, method, path, e)
	}
	good := down(sb.Id, key, "/home/daytona/f.txt", exp)
	tampered := func(u string) string {
		i := strings.Index(u, "signature=v1_") + len("signature=v1_")
		c := "A"
		if u[i] == 'A' {
			c = "B"
		}
		return u[:i] + c + u[i+1:]
	}
	q := func(id, op string, v url.Values) string { return "/toolbox/" + id + "/" + op + "?" + v.Encode() }
	sig := fileURLSignature(key, "GET", "/f", exp)
	expStr := strconv.FormatInt(exp, 10)

	for _, tt := range []struct {
		name, method, path string
		status             int
		message            string
	}{
		{"a tampered signature", "GET", tampered(good), 401, "invalid signature"},
		{"another path than signed", "GET", strings.Replace(good, "f.txt", "g.txt", 1), 401, "invalid signature"},
		{"another expiry than signed", "GET", strings.Replace(good, "expires="+strconv.FormatInt(exp, 10), "expires="+strconv.FormatInt(exp+60, 10), 1), 401, "invalid signature"},
		{"a download's signature on upload-v2", "POST", up(sb.Id, key, "GET", "/home/daytona/f.txt", exp), 401, "invalid signature"},
		{"an upload's signature on download", "GET", strings.Replace(up(sb.Id, key, "POST", "/home/daytona/f.txt", exp), "upload-v2", "download", 1), 401, "invalid signature"},
		{"POST to download", "POST", good, 401, msgInvalidCredentials},
		{"PUT to upload-v2", "PUT", up(sb.Id, key, "POST", "/f", exp), 401, msgInvalidCredentials},
		{"DELETE of the signed path", "DELETE", strings.Replace(good, "files/download", "files", 1), 401, msgInvalidCredentials},
		{"another toolbox route", "GET", strings.Replace(good, "files/download", "files/info", 1), 401, msgInvalidCredentials},
		{"the legacy upload", "POST", strings.Replace(up(sb.Id, key, "POST", "/f", exp), "upload-v2", "upload", 1), 401, msgInvalidCredentials},
		{"a command", "POST", strings.Replace(good, "files/download", "process/execute", 1), 401, msgInvalidCredentials},
		{"a trailing slash", "GET", strings.Replace(good, "files/download", "files/download/", 1), 401, msgInvalidCredentials},
		{"the API's deprecated toolbox route", "GET", strings.Replace(good, "/toolbox/"+sb.Id+"/", "/api/toolbox/"+sb.Id+"/toolbox/", 1), 401, msgInvalidCredentials},
		{"expired", "GET", down(sb.Id, key, "/f", past), 401, "signature is expired"},
		{"another sandbox's id", "GET", strings.Replace(good, sb.Id, other.Id, 1), 401, "invalid signature"},
		{"a sandbox that does not exist", "GET", strings.Replace(good, sb.Id, "00000000-0000-4000-8000-000000000000", 1), 401, "invalid signature"},
		{"a sandbox whose key was never made", "GET", down(unkeyed.Id, "guess", "/f", exp), 401, "invalid signature"},
		{"another organization's key on this sandbox", "GET", down(sb.Id, foreignKey, "/f", exp), 401, "invalid signature"},
		{"a rotated key", "GET", down(rotatedSB.Id, oldKey, "/f", exp), 401, "invalid signature"},
		{"no signature", "GET", q(sb.Id, "files/download", url.Values{"path": {"/f"}, "expires": {expStr}}), 401, msgInvalidCredentials},
		{"an empty signature", "GET", q(sb.Id, "files/download", url.Values{"path": {"/f"}, "expires": {expStr}, "signature": {""}}), 401, msgInvalidCredentials},
		{"another scheme", "GET", q(sb.Id, "files/download", url.Values{"path": {"/f"}, "expires": {expStr}, "signature": {strings.TrimPrefix(sig, "v1_")}}), 401, "unsupported signature scheme"},
		{"no expiry", "GET", q(sb.Id, "files/download", url.Values{"path": {"/f"}, "signature": {sig}}), 401, "expires query parameter is required"},
		{"a negative expiry", "GET", q(sb.Id, "files/download", url.Values{"path": {"/f"}, "expires": {"-1"}, "signature": {sig}}), 401, "invalid expires query parameter"},
		{"an expiry that is no number", "GET", q(sb.Id, "files/download", url.Values{"path": {"/f"}, "expires": {"soon"}, "signature": {sig}}), 401, "invalid expires query parameter"},
		{"no path", "GET", q(sb.Id, "files/download", url.Values{"expires": {expStr}, "signature": {sig}}), 400, "path query parameter is required"},
		{"a stopped sandbox, signed", "GET", down(stopped.Id, stoppedKey, "/f", exp), 400, msgNotStarted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, b, _ := h.sendAnon(tt.method, tt.path, "", nil)
			assert.Equal(t, tt.status, code, string(b))
			assert.Equal(t, tt.message, ginMessage(t, b))
			assert.Empty(t, be.take(), "nothing reached the toolbox")
		})
	}

	// And the same URLs work as signed: the table refused what they are not.
	code, b, _ := h.sendAnon("GET", good, "", nil)
	assert.Equal(t, http.StatusOK, code, string(b))
	code, b, _ = h.sendAnon("GET", down(foreign.Id, foreignKey, "/f", exp), "", nil)
	assert.Equal(t, http.StatusOK, code, "another organization's own URL opens its own sandbox: %s", b)
	assert.Len(t, be.take(), 2)
}
