package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	in := `goos: linux
pkg: github.com/sandplane/sandplane/local
BenchmarkCreateToStarted-2   	      20	  33323822 ns/op	        17.60 ms/op-baseline	        30.49 ms/op-subject	         1.732 x-baseline
BenchmarkOther-2   	      20	  100 ns/op
BenchmarkRate-2   	      20	  100 ns/op	  5000 req/s
PASS
`
	rows, err := parse(strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, rows, 2)
	assert.Equal(t, row{name: "local.CreateToStarted", subject: 30.49, baseline: 17.60, ratio: 1.732, versus: true}, rows[0])
	assert.Equal(t, row{name: "local.Rate", other: []string{"5000 req/s"}}, rows[1])
	var out bytes.Buffer
	write(&out, rows)
	assert.Contains(t, out.String(), "local.CreateToStarted")
	assert.Contains(t, out.String(), "1.73x")
	assert.Contains(t, out.String(), "5000 req/s")
}
