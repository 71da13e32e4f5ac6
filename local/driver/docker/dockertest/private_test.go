package dockertest_test

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sandplane/sandplane/local/driver/docker/dockertest"
)

// A private engine stopped, killed and started again on its directories
// leaves the host's docker0, the machine's engine's bridge, alone: an
// engine restarted with --bridge none or --default-address-pool deletes it.
func TestPrivateEngineLeavesTheMachinesBridgeAlone(t *testing.T) {
	if _, err := net.InterfaceByName("docker0"); err != nil {
		t.Skip("no docker0 on this machine to watch")
	}
	e := dockertest.StartPrivateEngine(t)
	for _, step := range []struct {
		name string
		do   func()
	}{
		{"stop", e.Stop}, {"start", e.Start}, {"kill -9", e.Kill9}, {"start after the kill", e.Start},
	} {
		step.do()
		_, err := net.InterfaceByName("docker0")
		assert.NoError(t, err, "docker0 after %s", step.name)
	}
}
