package docker_test

import (
	"net"
	"net/netip"
	"strconv"
	"testing"

	"github.com/docker/docker/api/types/network"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
)

// addrOn is the container's address on network name.
func addrOn(t *testing.T, h *harness, hd driver.Handle, name string) string {
	t.Helper()
	c, err := h.cli.ContainerInspect(testContext(t), hd.ContainerID)
	require.NoError(t, err)
	require.NotNil(t, c.NetworkSettings)
	require.Len(t, c.NetworkSettings.Networks, 1, "one network, the sandboxes'")
	n, ok := c.NetworkSettings.Networks[name]
	require.True(t, ok, "not on %s: %v", name, c.NetworkSettings.Networks)
	require.NotEmpty(t, n.IPAddress)
	return n.IPAddress
}

// dial asks the test server on port to connect to addr.
func dial(t *testing.T, port int, addr string) (string, error) {
	t.Helper()
	return get(baseURL(port) + "/dial?addr=" + addr)
}

func TestSandboxesCannotReachEachOther(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	a, b := h.spec(), h.spec()
	ha, hb := h.start(ctx, a), h.start(ctx, b)
	getWhenUp(t, baseURL(a.Port)+"/")
	getWhenUp(t, baseURL(b.Port)+"/")
	ipA, ipB := addrOn(t, h, ha, h.network), addrOn(t, h, hb, h.network)

	// Each server listens on all of its container's interfaces: only the
	// network keeps the other one out.
	_, err := dial(t, a.Port, net.JoinHostPort(ipA, strconv.Itoa(a.Port)))
	require.NoError(t, err, "a container reaches its own address")
	_, err = dial(t, a.Port, net.JoinHostPort(ipB, strconv.Itoa(b.Port)))
	assert.Error(t, err, "sandbox a reached sandbox b")
	_, err = dial(t, b.Port, net.JoinHostPort(ipA, strconv.Itoa(a.Port)))
	assert.Error(t, err, "sandbox b reached sandbox a")

	// The host still reaches both, on the published loopback ports.
	for _, hd := range []struct {
		h    driver.Handle
		addr netip.AddrPort
	}{{ha, a.HostAddrPort()}, {hb, b.HostAddrPort()}} {
		ok, err := h.rt.Probe(ctx, hd.h, hd.addr)
		require.NoError(t, err)
		assert.True(t, ok)
	}

	n, err := h.cli.NetworkInspect(ctx, h.network, network.InspectOptions{})
	require.NoError(t, err)
	assert.Equal(t, "bridge", n.Driver)
	assert.Equal(t, "false", n.Options["com.docker.network.bridge.enable_icc"])
	assert.Len(t, n.Containers, 2, "one network for all sandboxes")
}

func TestForeignNetworkIsNotUsed(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	// A network of that name that lets containers talk, made by someone
	// else: the runtime must not put sandboxes on it.
	_, err := h.cli.NetworkCreate(ctx, h.network, network.CreateOptions{Driver: "bridge"})
	require.NoError(t, err)
	_, err = h.rt.Start(ctx, h.spec())
	assert.Equal(t, provider.CreateFailed, provider.Code(err), "%v", err)
	assert.ErrorContains(t, err, "docker network rm "+h.network)
}

func TestNetworkIsMadeAgainWhenRemoved(t *testing.T) {
	h := newHarness(t)
	ctx := testContext(t)
	spec := h.spec()
	hd := h.start(ctx, spec)
	getWhenUp(t, baseURL(spec.Port)+"/")
	require.NoError(t, h.rt.Stop(ctx, hd, 0))
	require.NoError(t, h.rt.Remove(ctx, hd))
	require.NoError(t, h.cli.NetworkRemove(ctx, h.network))

	hd = h.start(ctx, spec)
	getWhenUp(t, baseURL(spec.Port)+"/")
	addrOn(t, h, hd, h.network)
}
