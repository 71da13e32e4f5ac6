package buildversion

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestResolve(t *testing.T) {
	mod := func(v string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/sandplane/sandplane", Version: v}}
	}
	tests := []struct {
		name    string
		bi      *debug.BuildInfo
		stamped string
		want    string
	}{
		{"go install of a release", mod("v1.2.3"), "", "v1.2.3"},
		{"go install of a commit", mod("v0.0.0-20260101000000-abcdef123456"), "", "v0.0.0-20260101000000-abcdef123456"},
		{"the module version wins over a stamp", mod("v1.2.3"), "abc1234-dirty", "v1.2.3"},
		{"a build without one takes the Makefile's stamp", mod("(devel)"), "abc1234-dirty", "abc1234-dirty"},
		{"no build info", nil, "abc1234", "abc1234"},
		{"nothing at all", mod(""), "", "dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, resolve(tt.bi, tt.stamped))
		})
	}
}
