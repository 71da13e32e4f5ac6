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
pkg: github.com/sandplane/sandplane/simulator
BenchmarkSimChurnRSS-2   	1	24442189588 ns/op	26.90 MiB-heap-after	26.62 MiB-heap-before	63.42 MiB-rss-after	61.16 MiB-rss-before	1.037 x-rss-growth
PASS
`
	results, err := parse(strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, results, 3)
	assert.Equal(t, result{name: "local.CreateToStarted", figures: []figure{
		{name: "local.CreateToStarted", unit: "ms/op", value: 30.49, baseline: 17.60, ratio: 1.732},
	}}, results[0])
	assert.Equal(t, result{name: "local.Rate", other: []string{"5000 req/s"}}, results[1])
	churn := results[2]
	require.Len(t, churn.figures, 2)
	assert.Equal(t, "MiB-heap", churn.figures[0].unit)
	assert.Equal(t, "MiB-rss", churn.figures[1].unit)
	assert.InDelta(t, 63.42/61.16, churn.figures[1].ratio, 1e-9, "after over before")
	assert.Empty(t, churn.other, "the benchmark's own ratio is not repeated")

	var out bytes.Buffer
	write(&out, results)
	for _, want := range []string{"local.CreateToStarted", "1.73x", "5000 req/s", "simulator.SimChurnRSS", "MiB-rss", "1.04x"} {
		assert.Contains(t, out.String(), want)
	}
}
