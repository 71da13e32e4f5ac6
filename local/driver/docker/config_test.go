package docker

import (
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/go-connections/nat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver"
)

func TestRewriteLoopback(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"bare localhost", "localhost", "host.docker.internal"},
		{"bare ipv4", "127.0.0.1", "host.docker.internal"},
		{"host and port", "127.0.0.1:5432", "host.docker.internal:5432"},
		{"url", "http://localhost:8080/x", "http://host.docker.internal:8080/x"},
		{"url with credentials", "postgres://u:p@localhost:5432/db?sslmode=disable", "postgres://u:p@host.docker.internal:5432/db?sslmode=disable"},
		{"ipv6 loopback in brackets", "http://[::1]:9000/", "http://host.docker.internal:9000/"},
		{"upper case", "http://LOCALHOST:1/", "http://host.docker.internal:1/"},
		{"several", "localhost:1,127.0.0.1:2", "host.docker.internal:1,host.docker.internal:2"},
		{"space separated", "a localhost b", "a host.docker.internal b"},
		{"longer name", "http://localhost.example.com/", "http://localhost.example.com/"},
		{"suffix of a name", "http://mylocalhost/", "http://mylocalhost/"},
		{"name with dash", "localhost-db:5432", "localhost-db:5432"},
		{"other ipv4 loopback", "127.0.0.10:80", "127.0.0.10:80"},
		{"ipv4 inside a longer address", "10.127.0.0.1", "10.127.0.0.1"},
		{"unrelated", "https://example.com/path?q=1", "https://example.com/path?q=1"},
		{"empty", "", ""},
		{"non ascii kept", "héllo localhost ✓", "héllo host.docker.internal ✓"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, RewriteLoopback(tt.in))
		})
	}
}

func TestContainerEnvKeepsNoProxy(t *testing.T) {
	assert.Equal(t, "localhost,127.0.0.1", containerEnvValue("NO_PROXY", "localhost,127.0.0.1"))
	assert.Equal(t, "localhost", containerEnvValue("no_proxy", "localhost"))
	assert.Equal(t, "http://host.docker.internal:3128", containerEnvValue("HTTP_PROXY", "http://localhost:3128"))
}

func TestContainerSpec(t *testing.T) {
	r, err := New(WithHost("tcp://127.0.0.1:1"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })

	spec := driver.Spec{
		SandboxID: "sb1",
		Root:      "/state",
		Image:     "img:1",
		Command:   []string{"/server", "-body", "x"},
		User:      "1000:1000",
		WorkDir:   "/work",
		Env:       map[string]string{"PORT": "4100", "API": "http://localhost:4025", EnvSandboxID: "forged"},
		Port:      4100,
		Labels:    map[string]string{"team": "a"},
	}
	cs := r.containerSpec(spec)

	assert.Equal(t, "img:1", cs.config.Image)
	assert.Equal(t, []string{"/server", "-body", "x"}, []string(cs.config.Entrypoint))
	assert.Empty(t, cs.config.Cmd)
	assert.Equal(t, "1000:1000", cs.config.User)
	assert.Equal(t, "/work", cs.config.WorkingDir)
	assert.Equal(t, []string{"API=http://host.docker.internal:4025", "PORT=4100", "SANDPLANE_SANDBOX_ID=sb1"}, cs.config.Env)
	assert.Equal(t, "/state", cs.config.Labels[LabelRoot])
	assert.Equal(t, "sb1", cs.config.Labels[LabelSandbox])
	assert.Equal(t, "a", cs.config.Labels[LabelPrefix+"team"])
	assert.NotEmpty(t, cs.config.Labels[labelSpec])
	assert.Contains(t, cs.config.ExposedPorts, nat.Port("4100/tcp"))
	assert.Equal(t, []nat.PortBinding{{HostIP: "127.0.0.1", HostPort: "4100"}}, cs.host.PortBindings[nat.Port("4100/tcp")])
	assert.Equal(t, []string{"host.docker.internal:host-gateway"}, cs.host.ExtraHosts)
	require.NotNil(t, cs.host.Init)
	assert.True(t, *cs.host.Init)

	t.Run("ports map to the container's", func(t *testing.T) {
		s := spec
		s.SandboxPort = 4000
		s.ExtraPorts = []driver.PortMapping{{Sandbox: 3000, Host: 4102}}
		cs := r.containerSpec(s)
		assert.Equal(t, nat.PortSet{"4000/tcp": {}, "3000/tcp": {}}, cs.config.ExposedPorts)
		assert.Equal(t, nat.PortMap{
			"4000/tcp": {{HostIP: "127.0.0.1", HostPort: "4100"}},
			"3000/tcp": {{HostIP: "127.0.0.1", HostPort: "4102"}},
		}, cs.host.PortBindings)
	})

	t.Run("no command keeps the image's", func(t *testing.T) {
		s := spec
		s.Command = nil
		assert.Nil(t, r.containerSpec(s).config.Entrypoint)
	})

	assert.Zero(t, cs.host.NanoCPUs, "no limit asked, none set")
	limited := spec
	limited.CPU, limited.MemoryGiB = 2, 3
	lh := r.containerSpec(limited).host
	assert.Equal(t, []int64{2e9, 3 << 30}, []int64{lh.NanoCPUs, lh.Memory}, "docker --cpus 2 --memory 3g")

	digest := cs.config.Labels[labelSpec]
	assert.Equal(t, digest, r.containerSpec(spec).config.Labels[labelSpec], "same spec, same digest")
	changes := map[string]func(s *driver.Spec){
		"env":          func(s *driver.Spec) { s.Env = map[string]string{"PORT": "4100", "API": "x"} },
		"port":         func(s *driver.Spec) { s.Port = 4101 },
		"sandbox port": func(s *driver.Spec) { s.SandboxPort = 4000 },
		"extra port":   func(s *driver.Spec) { s.ExtraPorts = []driver.PortMapping{{Sandbox: 3000, Host: 4102}} },
		"image":        func(s *driver.Spec) { s.Image = "img:2" },
		"command":      func(s *driver.Spec) { s.Command = []string{"/server"} },
		"user":         func(s *driver.Spec) { s.User = "" },
		"workdir":      func(s *driver.Spec) { s.WorkDir = "/" },
		"labels":       func(s *driver.Spec) { s.Labels = nil },
		"cpu":          func(s *driver.Spec) { s.CPU = 2 },
		"memory":       func(s *driver.Spec) { s.MemoryGiB = 1 },
	}
	for name, change := range changes {
		t.Run("digest changes with "+name, func(t *testing.T) {
			s := spec
			change(&s)
			assert.NotEqual(t, digest, r.containerSpec(s).config.Labels[labelSpec])
		})
	}
}

func TestExitOfCode(t *testing.T) {
	code := func(n int) *int { return &n }
	tests := []struct {
		code int
		want driver.Exit
	}{
		{0, driver.Exit{Reason: "exited: code 0", Code: code(0)}},
		{3, driver.Exit{Reason: "exited: code 3", Code: code(3)}},
		{128, driver.Exit{Reason: "exited: code 128", Code: code(128)}},
		{137, driver.Exit{Reason: "killed: signal SIGKILL"}},
		{143, driver.Exit{Reason: "killed: signal SIGTERM"}},
		{128 + 64, driver.Exit{Reason: "killed: signal 64"}},
		{255, driver.Exit{Reason: "exited: code 255", Code: code(255)}},
	}
	for _, tt := range tests {
		t.Run(tt.want.Reason, func(t *testing.T) {
			assert.Equal(t, tt.want, exitOfCode(tt.code))
		})
	}
}

func TestTailBufferKeepsNewest(t *testing.T) {
	tb := &tailBuffer{max: 10}
	assert.Equal(t, []byte{}, tb.Bytes())
	for i := range 100 {
		_, err := tb.Write([]byte{byte('a' + i%26), byte('A' + i%26)})
		require.NoError(t, err)
	}
	// The last five writes: i = 95..99.
	assert.Equal(t, "rRsStTuUvV", string(tb.Bytes()))
	assert.LessOrEqual(t, len(tb.buf), 2*tb.max+2)
}

func TestExitOfState(t *testing.T) {
	tests := []struct {
		name  string
		state container.State
		want  string
	}{
		{"exited", container.State{Status: container.StateExited, ExitCode: 2}, "exited: code 2"},
		{"out of memory", container.State{Status: container.StateExited, OOMKilled: true, ExitCode: 137}, "killed: signal SIGKILL"},
		{"never started", container.State{Status: container.StateCreated}, ReasonNotStarted},
		{"dead", container.State{Status: container.StateDead, ExitCode: 143}, "killed: signal SIGTERM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, exitOf(&tt.state).Reason)
		})
	}
}
