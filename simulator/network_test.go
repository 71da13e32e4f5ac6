package simulator

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/sandplane/sandplane/simulator/internal/backend"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// netRecorder is a backend whose starts wait for the test, and which
// records the network settings applied to running workloads.
type netRecorder struct {
	backend.None
	starting chan NetworkPolicy // what each start applies by itself
	release  chan struct{}
	mu       sync.Mutex
	applied  []NetworkPolicy
}

func (b *netRecorder) Start(ctx context.Context, w Workload) (string, error) {
	b.starting <- w.Network
	<-b.release
	return "http://127.0.0.1:1", nil
}

func (b *netRecorder) ApplyNetwork(_ context.Context, _ string, p NetworkPolicy) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.applied = append(b.applied, p)
	return "", nil
}

func (b *netRecorder) last() (NetworkPolicy, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.applied) == 0 {
		return NetworkPolicy{}, 0
	}
	return b.applied[len(b.applied)-1], len(b.applied)
}

// Settings changed while a sandbox starts reach its workload once it has
// started: the start applied those it was planned with.
func TestNetworkSettingsChangedDuringAStartAreApplied(t *testing.T) {
	be := &netRecorder{starting: make(chan NetworkPolicy, 1), release: make(chan struct{})}
	h := newHarness(t, func(c *Config) { c.Backend = be })
	created := make(chan *apiclient.Sandbox, 1)
	go func() {
		// A create answers once the sandbox has started.
		sb, _, _ := h.api.SandboxAPI.CreateSandbox(h.ctx).CreateSandbox(apiclient.CreateSandbox{Name: apiclient.PtrString("netbox")}).Execute()
		created <- sb
	}()
	select {
	case p := <-be.starting:
		assert.Equal(t, NetworkPolicy{}, p)
	case <-time.After(10 * time.Second):
		t.Fatal("the workload never started")
	}
	code, body, _ := h.raw("POST", "/api/sandbox/netbox/network-settings", map[string]any{"networkAllowList": "10.0.0.0/8"})
	require.Equal(t, http.StatusOK, code, string(body))
	_, n := be.last()
	assert.Zero(t, n, "nothing runs yet to apply them to")

	close(be.release)
	sb := <-created
	require.NotNil(t, sb)
	want := NetworkPolicy{AllowList: "10.0.0.0/8"}
	require.Eventually(t, func() bool { p, _ := be.last(); return p == want }, 10*time.Second, 5*time.Millisecond,
		"the settings changed during the start were never applied")

	// Changed on a running sandbox, they apply at once, the last one last.
	for _, list := range []string{"192.0.2.0/24", ""} {
		code, body, _ = h.raw("POST", "/api/sandbox/"+sb.Id+"/network-settings", map[string]any{"networkAllowList": list})
		require.Equal(t, http.StatusOK, code, string(body))
		p, _ := be.last()
		assert.Equal(t, NetworkPolicy{AllowList: list}, p)
	}
}
