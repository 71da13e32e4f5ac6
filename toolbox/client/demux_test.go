package client

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDemux(t *testing.T) {
	const o, e = "\x01\x01\x01", "\x02\x02\x02"
	tests := []struct {
		name           string
		messages       []string
		stdout, stderr string
	}{
		{"one message per stream", []string{o + "out\n", e + "err\n"}, "out\n", "err\n"},
		{"markers inside a message", []string{o + "a" + e + "b" + o + "c"}, "ac", "b"},
		{"a marker split across messages", []string{o + "a\x01", "\x01", "\x01b" + e + "\x02", "\x02x"}, "ab", "\x02\x02x"},
		{"marker-like bytes that are not one", []string{o + "\x01\x01", "z\x02"}, "\x01\x01z\x02", ""},
		{"a held-back tail at the end", []string{o + "end\x01\x01"}, "end\x01\x01", ""},
		{"bytes before any marker are dropped", []string{"junk" + o + "ok"}, "ok", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut strings.Builder
			d := &demux{stdout: &out, stderr: &errOut}
			for _, m := range tt.messages {
				require.NoError(t, d.write([]byte(m)))
			}
			require.NoError(t, d.flush())
			assert.Equal(t, tt.stdout, out.String())
			assert.Equal(t, tt.stderr, errOut.String())
		})
	}
}
