package simulator

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestListItemEncoding holds appendListItem to what encoding/json makes of
// sandboxListItemDTO, byte for byte, over rows with and without every
// nullable column and with strings that need escaping.
func TestListItemEncoding(t *testing.T) {
	str := func(s string) *string { return &s }
	at := time.Date(2025, 3, 4, 5, 6, 7, 891234567, time.FixedZone("X", 3600))
	base := func() *sandbox {
		return &sandbox{ID: "6c4c0f0e-0000-4000-8000-000000000001", OrgID: "org", Name: "web", Target: "us",
			State: stStarted, Desired: dsStarted, User: "daytona", CPU: 1, Memory: 1, Disk: 3, BackupState: "None",
			AutoStop: 15, AutoArchive: 10080, AutoDelete: -1, CreatedAt: at, UpdatedAt: at.Add(time.Second), LastActivity: at.Add(time.Hour)}
	}
	for _, tc := range []struct {
		name   string
		change func(sb *sandbox)
	}{
		{"nulls", func(sb *sandbox) {}},
		{"every column set", func(sb *sandbox) {
			sb.RunnerID, sb.Snapshot, sb.ErrorReason, sb.DaemonVersion = str("r"), str("snap:1"), str("boom"), str("v1")
			sb.GPUType, sb.GPU = str("H100"), 1
			sb.Recoverable, sb.Public = true, true
			sb.Labels = map[string]string{"b": "2", "a": "1", "": ""}
		}},
		{"escapes", func(sb *sandbox) {
			sb.Name = `say "hi" <b>&amp;</b> \ é 日本 ` + "\u2028\u2029\x01\t\n\x7f"
			sb.ErrorReason = str("invalid utf-8: \xff\xfe")
			sb.Labels = map[string]string{"<k>": "v&", "ключ": "значение", "ctl\x00": "\x1f"}
		}},
		{"derived state", func(sb *sandbox) { sb.State, sb.Desired = stArchived, dsStarted }},
		{"zero times", func(sb *sandbox) { sb.CreatedAt, sb.UpdatedAt, sb.LastActivity = time.Time{}, time.Time{}, time.Time{} }},
		{"far times", func(sb *sandbox) {
			sb.CreatedAt = time.Date(12345, 1, 2, 3, 4, 5, 6e6, time.UTC)
			sb.UpdatedAt = time.Date(-1, 12, 31, 23, 59, 59, 999999999, time.UTC)
			sb.LastActivity = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("Y", -7200))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := base()
			tc.change(sb)
			want, err := json.Marshal(sb.listItem("http://localhost:4026/toolbox"))
			require.NoError(t, err)
			assert.Equal(t, string(want), string(appendListItem(nil, sb, "http://localhost:4026/toolbox")))
		})
	}
}
