package toolbox

import (
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

func TestPorts(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("port detection reads /proc")
	}
	requireTool(t, "python3")
	ts := newTestServer(t, Options{})

	// A listener of the toolbox's own process is not the sandbox's.
	own, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer own.Close()
	ownPort := own.Addr().(*net.TCPAddr).Port

	require.Equal(t, http.StatusCreated, ts.postJSON(t, "/process/session", map[string]string{"sessionId": "srv"}).status)
	portFile := filepath.Join(ts.workDir, "port")
	server := `python3 -c "import socket,time,os; s=socket.socket(socket.AF_INET6); s.bind(('::',0)); s.listen(); open('port.tmp','w').write(str(s.getsockname()[1])); os.rename('port.tmp','port'); open('pid','w').write(str(os.getpid())); time.sleep(600)" &`
	resp := ts.postJSON(t, "/process/session/srv/exec", map[string]any{"command": server, "runAsync": true})
	require.Equal(t, http.StatusAccepted, resp.status, "body: %s", resp.body)
	port := readPID(t, portFile) // a number in a file
	pid := readPID(t, filepath.Join(ts.workDir, "pid"))

	var list wire.PortList
	ts.get(t, "/port").json(t, &list)
	assert.Contains(t, list.Ports, port, "a sandbox process's listener (IPv6 included)")
	assert.NotContains(t, list.Ports, ownPort)

	inUse := func(p int) bool {
		var r wire.IsPortInUseResponse
		resp := ts.get(t, "/port/"+strconv.Itoa(p)+"/in-use")
		require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
		resp.json(t, &r)
		return r.IsInUse
	}
	assert.True(t, inUse(port))
	assert.False(t, inUse(ownPort))

	killPID(t, pid)
	waitFor(t, "the port to close", func() bool { return !inUse(port) })

	for _, bad := range []string{"0", "70000", "http"} {
		resp := ts.get(t, "/port/"+bad+"/in-use")
		require.Equal(t, http.StatusBadRequest, resp.status, "%s: %s", bad, resp.body)
		resp.apiErr(t)
	}
}

func TestComputerUseIsNotAvailable(t *testing.T) {
	ts := newTestServer(t, Options{})
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/computeruse/status"},
		{http.MethodPost, "/computeruse/start"},
		{http.MethodGet, "/computeruse/screenshot"},
		{http.MethodPost, "/computeruse/mouse/click"},
		{http.MethodDelete, "/computeruse/recordings/abc"},
		{http.MethodGet, "/computeruse/process/xvfb/status"},
	} {
		resp := ts.do(t, c.method, c.path, nil, "")
		require.Equal(t, http.StatusServiceUnavailable, resp.status, "%s %s: %s", c.method, c.path, resp.body)
		e := resp.apiErr(t)
		assert.Equal(t, "Computer-use functionality is not available", e.Message)
		assert.Equal(t, "SERVICE_UNAVAILABLE", e.Code)
		var body map[string]any
		resp.json(t, &body)
		assert.NotEmpty(t, body["details"])
		assert.NotEmpty(t, body["solution"])
	}
}

func TestInit(t *testing.T) {
	ts := newTestServer(t, Options{})
	resp := ts.postJSON(t, "/init", wire.InitializeRequest{Token: "tok-123"})
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	assert.NotContains(t, string(resp.body), "tok-123")
	ts.initMu.Lock()
	assert.Equal(t, "tok-123", ts.initToken)
	ts.initMu.Unlock()
	resp = ts.postJSON(t, "/init", wire.InitializeRequest{})
	require.Equal(t, http.StatusBadRequest, resp.status)
	resp.apiErr(t)
}
