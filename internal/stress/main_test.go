package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCollectNamesEachFailureOnce(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"ok\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"run","Package":"p","Test":"TestB"}`,
		`{"Action":"run","Package":"p","Test":"TestB/sub"}`,
		`{"Action":"output","Package":"p","Test":"TestB/sub","Output":"expected 4, got 2\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB/sub"}`,
		`{"Action":"fail","Package":"p","Test":"TestB"}`,
		`{"Action":"fail","Package":"p"}`,
		`{"Action":"output","Package":"q","Output":"panic: boom\n"}`,
		`{"Action":"fail","Package":"q"}`,
		`not json`,
	}, "\n")
	failures, passed := collect(strings.NewReader(stream))
	assert.Equal(t, 1, passed)
	assert.Equal(t, []failure{
		{"p", "TestB/sub", "expected 4, got 2\n"},
		{"q", "(package)", "panic: boom\n"},
	}, failures)
}
