package client_test

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/client"
)

// stdinSize is what BenchmarkExecStdin pipes: enough that the fixed cost
// of a session and a command is small beside moving the bytes.
const stdinSize = 16 << 20

// BenchmarkExecStdin pipes stdinSize bytes of text and binary through Exec
// into `cat >/dev/null` in the toolbox, beside the same bytes piped into a
// bare `cat >/dev/null` on the host, measured alternately in the same run:
// the throughput of a command's stdin against a pipe's.
func BenchmarkExecStdin(b *testing.B) {
	url, _, _ := newToolbox(b)
	c := client.New(url, nil, client.WithPollInterval(10*time.Millisecond))
	input := benchInput()
	var subject, baseline []time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		code, err := c.Exec(context.Background(), "cat >/dev/null", client.Streams{Stdin: bytes.NewReader(input)})
		require.NoError(b, err)
		require.Equal(b, 0, code)
		subject = append(subject, time.Since(start))
		baseline = append(baseline, bareCat(b, input))
	}
	s, base := median(subject), median(baseline)
	mb := float64(len(input)) / 1e6
	b.ReportMetric(mb/s.Seconds(), "MB/s-subject")
	b.ReportMetric(mb/base.Seconds(), "MB/s-baseline")
	b.ReportMetric(float64(s)/float64(base), "x-baseline")
}

// benchInput is stdinSize bytes, half text lines and half every byte value.
func benchInput() []byte {
	var buf bytes.Buffer
	for buf.Len() < stdinSize {
		buf.WriteString("a line of ordinary text, as logs and sources are\n")
		buf.Write(everyByte())
	}
	return buf.Bytes()[:stdinSize]
}

// bareCat is the time a host's cat takes to read input from a pipe.
func bareCat(b *testing.B, input []byte) time.Duration {
	start := time.Now()
	cmd := exec.Command("sh", "-c", "cat >/dev/null")
	cmd.Stdin = bytes.NewReader(input)
	require.NoError(b, cmd.Run())
	return time.Since(start)
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	slices.Sort(s)
	return s[len(s)/2]
}
