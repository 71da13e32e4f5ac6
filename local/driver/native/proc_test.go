package native

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	// Fields 3..22 after the command name; 12345 is the start time (22).
	const rest = " S 1 4242 4243 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 12345 1000 50"
	tests := []struct {
		name string
		line string
		want procStat
	}{
		{"plain", "4243 (sleep)" + rest, procStat{State: 'S', PGrp: 4242, Session: 4243, StartTime: 12345}},
		{"spaces and parentheses in the name", "4243 (a) (b c)" + rest, procStat{State: 'S', PGrp: 4242, Session: 4243, StartTime: 12345}},
		{"zombie", "4243 (x)" + " Z" + rest[2:], procStat{State: 'Z', PGrp: 4242, Session: 4243, StartTime: 12345}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat([]byte(tt.line))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	for _, bad := range []string{"", "4243 sleep S 1", "4243 (sleep) S 1 2 3", "4243 (sleep)" + rest[:len(rest)-20]} {
		_, err := parseStat([]byte(bad))
		assert.ErrorIs(t, err, errMalformedStat, "%q", bad)
	}
}

func TestHasVar(t *testing.T) {
	env := []byte("A=1\x00SANDPLANE_ROOT=/r\x00B=\x00")
	assert.True(t, hasVar(env, "SANDPLANE_ROOT=/r"))
	assert.True(t, hasVar(env, "B="))
	assert.False(t, hasVar(env, "SANDPLANE_ROOT=/"), "a prefix is not a match")
	assert.False(t, hasVar(env, "ANDPLANE_ROOT=/r"))
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 7 1000 50"))
	f.Add([]byte("2 ()) R ) 1 1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseStat(b)
		if err == nil && st.State == 0 {
			t.Fatalf("parsed %q without a state", b)
		}
	})
}
