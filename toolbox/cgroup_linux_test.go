//go:build linux

package toolbox

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeTree writes files (path: content) under a new root.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, body := range files {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(body), 0o644))
	}
	return root
}

func TestReadCgroup(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name    string
		files   map[string]string
		want    cgroupStats
		bounded bool
	}{
		{"v2 with limits", map[string]string{
			"cgroup.controllers": "cpu memory",
			"memory.max":         "1073741824\n",
			"memory.current":     "300000000\n",
			"memory.stat":        "anon 100000000\nfile 200000000\n",
			"cpu.max":            "150000 100000\n",
			"cpu.stat":           "usage_usec 2500000\nuser_usec 2000000\n",
		}, cgroupStats{memLimit: gib, memCurrent: 300000000, memFile: 200000000, cpuQuota: 1.5, cpuUsage: 2500 * time.Millisecond}, true},
		{"v2 without limits", map[string]string{
			"cgroup.controllers": "cpu memory",
			"memory.max":         "max\n",
			"memory.current":     "300000000\n",
			"cpu.max":            "max 100000\n",
		}, cgroupStats{memCurrent: 300000000}, false},
		{"v2's root cgroup", map[string]string{"cgroup.controllers": "cpu memory"}, cgroupStats{}, false},
		{"v1 with limits", map[string]string{
			"memory/memory.limit_in_bytes": "1073741824\n",
			"memory/memory.usage_in_bytes": "300000000\n",
			"memory/memory.stat":           "cache 1\ntotal_cache 200000000\n",
			"cpu/cpu.cfs_quota_us":         "200000\n",
			"cpu/cpu.cfs_period_us":        "100000\n",
			"cpuacct/cpuacct.usage":        "2500000000\n",
		}, cgroupStats{memLimit: gib, memCurrent: 300000000, memFile: 200000000, cpuQuota: 2, cpuUsage: 2500 * time.Millisecond}, true},
		{"v1 unlimited, as the host's root", map[string]string{
			"memory/memory.limit_in_bytes": "9223372036854771712\n",
			"memory/memory.usage_in_bytes": "3000000000\n",
			"cpu/cpu.cfs_quota_us":         "-1\n",
			"cpu/cpu.cfs_period_us":        "100000\n",
		}, cgroupStats{memLimit: 9223372036854771712, memCurrent: 3000000000}, false},
		{"nothing to read", map[string]string{}, cgroupStats{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readCgroup(writeTree(t, tt.files))
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.bounded, got.bounded(8*gib, 4), "on a machine of 8 GiB and 4 CPUs")
		})
	}
}

func TestCPUMeter(t *testing.T) {
	tests := []struct {
		name        string
		first, next sample
		want        float64
	}{
		{"half busy", sample{scope: scopeMachine, cpuBusy: 10, cpuAll: 100}, sample{scope: scopeMachine, cpuBusy: 60, cpuAll: 200}, 50},
		{"idle", sample{scope: scopeSandbox, cpuBusy: 1, cpuAll: 10}, sample{scope: scopeSandbox, cpuBusy: 1, cpuAll: 20}, 0},
		{"the scope changed: no use yet", sample{scope: scopeMachine, cpuBusy: 10, cpuAll: 100}, sample{scope: scopeSandbox, cpuBusy: 60, cpuAll: 200}, 0},
		{"no time passed", sample{scope: scopeSandbox, cpuBusy: 1, cpuAll: 10}, sample{scope: scopeSandbox, cpuBusy: 2, cpuAll: 10}, 0},
		{"a counter went back (a new cgroup)", sample{scope: scopeSandbox, cpuBusy: 5, cpuAll: 10}, sample{scope: scopeSandbox, cpuBusy: 1, cpuAll: 20}, 0},
		{"more than its share (a quota's burst)", sample{scope: scopeSandbox, cpuBusy: 0, cpuAll: 10}, sample{scope: scopeSandbox, cpuBusy: 20, cpuAll: 20}, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m cpuMeter
			assert.Zero(t, m.usedPct(tt.first), "the first sample has nothing to compare with")
			assert.InDelta(t, tt.want, m.usedPct(tt.next), 1e-9)
		})
	}
}
