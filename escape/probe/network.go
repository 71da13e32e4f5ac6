//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandplane/sandplane/escape"
)

const dialTimeout = time.Second

// client never follows redirects and gives up quickly: a port that drops
// packets must not stall the suite.
var client = &http.Client{
	Timeout:       3 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport: &http.Transport{
		DialContext:       (&net.Dialer{Timeout: dialTimeout}).DialContext,
		DisableKeepAlives: true,
	},
}

// call is one request: status 0 when nothing answered.
type call struct {
	status int
	body   []byte
	err    error
}

// do makes one request with header and returns what answered.
func do(method, url, body string, header http.Header) call {
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	if err != nil {
		return call{err: err}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return call{err: err}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxFileBytes))
	return call{status: resp.StatusCode, body: b}
}

// String is the call's status, or why nothing answered.
func (c call) String() string {
	if c.status == 0 {
		return "no answer (" + shortErr(c.err) + ")"
	}
	return strconv.Itoa(c.status)
}

// shortErr is err's message, cut to its end.
func shortErr(err error) string {
	if err == nil {
		return "ok"
	}
	s := err.Error()
	if len(s) > 120 {
		s = s[len(s)-120:]
	}
	return s
}

// target is one authenticated endpoint the probe attacks.
type target struct {
	method, path, body string
	// header puts a candidate credential on a request.
	header func(token string) http.Header
	// ok says whether an answer means the endpoint let the probe in.
	ok func(call) bool
}

// bearer carries token as a bearer credential.
func bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

// previewToken carries token as a sandbox's preview token.
func previewToken(token string) http.Header {
	return http.Header{"X-Daytona-Preview-Token": {token}}
}

// is2xx: the endpoint let the caller in.
func is2xx(c call) bool { return c.status >= 200 && c.status < 300 }

// attack calls t at every base, first with no credential, then, where
// something answered, with every token the probe found.
func attack(c *config, bases []string, t target) escape.Result {
	var ev []string
	var read []string
	for _, base := range bases {
		url := base + t.path
		first := do(t.method, url, t.body, nil)
		read = append(read, words(first.body)...)
		ev = append(ev, fmt.Sprintf("%s %s without a credential: %s", t.method, url, first))
		if t.ok(first) {
			return escape.Result{Outcome: escape.Escaped, Evidence: strings.Join(ev, "; "), Read: read}
		}
		if first.status == 0 {
			continue
		}
		tried := 0
		for _, tok := range tokens(c) {
			tried++
			r := do(t.method, url, t.body, t.header(tok))
			if t.ok(r) {
				read = append(read, words(r.body)...)
				ev = append(ev, fmt.Sprintf("with a found token (%d bytes): %s", len(tok), r))
				return escape.Result{Outcome: escape.Escaped, Evidence: strings.Join(ev, "; "), Read: append(read, tok)}
			}
		}
		ev = append(ev, fmt.Sprintf("none of %d found tokens opened it", tried))
	}
	return escape.Result{Outcome: escape.Blocked, Evidence: strings.Join(ev, "; "), Read: read}
}

// hostBases are port on each of the hosts the probe tries.
func hostBases(c *config, port int) []string {
	var out []string
	for _, h := range c.Hosts {
		out = append(out, "http://"+net.JoinHostPort(h, strconv.Itoa(port)))
	}
	return out
}

// tryDaemonAPI lists the daemon's sandboxes, a token-guarded call.
func tryDaemonAPI(c *config) escape.Result {
	return attack(c, hostBases(c, c.DaemonPort), target{method: "GET", path: "/v1/sandboxes", header: bearer, ok: is2xx})
}

// trySimulator calls the simulator's admin API and its Daytona API.
func trySimulator(c *config) escape.Result {
	bases := hostBases(c, c.SimPort)
	admin := attack(c, bases, target{method: "GET", path: "/_sim/calls?org=all", header: bearer, ok: is2xx})
	api := attack(c, bases, target{method: "GET", path: "/api/sandbox", header: bearer, ok: is2xx})
	out := escape.Result{Outcome: escape.Blocked, Evidence: "admin: " + admin.Evidence + " | api: " + api.Evidence, Read: append(admin.Read, api.Read...)}
	if admin.Outcome == escape.Escaped || api.Outcome == escape.Escaped {
		out.Outcome = escape.Escaped
	}
	return out
}

// tryNeighbourToolbox runs a command in the neighbour through its toolbox.
func tryNeighbourToolbox(c *config) escape.Result {
	return attack(c, c.Neighbour.Toolbox, target{
		method: "POST", path: "/process/execute", body: `{"command":"echo reached"}`,
		header: previewToken, ok: is2xx,
	})
}

// tryNeighbourPreview opens the neighbour's preview through the daemon.
func tryNeighbourPreview(c *config) escape.Result {
	return attack(c, hostBases(c, c.DaemonPort), target{
		method: "GET", path: c.Neighbour.PreviewPath + "api/info",
		header: previewToken, ok: is2xx,
	})
}

// tryHostLoopback reaches a service the host keeps on loopback.
func tryHostLoopback(c *config) escape.Result {
	var ev, read []string
	out := escape.Blocked
	for _, base := range hostBases(c, c.HostServicePort) {
		r := do("GET", base+"/", "", nil)
		ev = append(ev, base+": "+r.String())
		read = append(read, words(r.body)...)
		if is2xx(r) {
			out = escape.Escaped
		}
	}
	return escape.Result{Outcome: out, Evidence: strings.Join(ev, "; "), Read: read}
}

// tryDockerSocket lists the engine's containers through its socket.
func tryDockerSocket(c *config) escape.Result {
	var ev, read []string
	out := escape.Blocked
	for _, sock := range c.DockerSockets {
		cl := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{Timeout: dialTimeout}).DialContext(ctx, "unix", sock)
			},
		}}
		resp, err := cl.Get("http://docker/containers/json")
		if err != nil {
			ev = append(ev, sock+": "+shortErr(err))
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxFileBytes))
		resp.Body.Close()
		ev = append(ev, fmt.Sprintf("%s: GET /containers/json %d", sock, resp.StatusCode))
		read = append(read, words(b)...)
		if resp.StatusCode == http.StatusOK {
			out = escape.Escaped
		}
	}
	return escape.Result{Outcome: out, Evidence: strings.Join(ev, "; "), Read: read}
}
