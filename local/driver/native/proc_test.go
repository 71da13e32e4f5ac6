package native

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHasVar(t *testing.T) {
	env := []byte("A=1\x00SANDPLANE_ROOT=/r\x00B=\x00")
	assert.True(t, hasVar(env, "SANDPLANE_ROOT=/r"))
	assert.True(t, hasVar(env, "B="))
	assert.False(t, hasVar(env, "SANDPLANE_ROOT=/"), "a prefix is not a match")
	assert.False(t, hasVar(env, "ANDPLANE_ROOT=/r"))
}
