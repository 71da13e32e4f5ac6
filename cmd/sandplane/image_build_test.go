package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

func runImageBuild(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetArgs(append([]string{"image", "build"}, args...))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestImageBuildRejectsBadInputBeforeBuilding(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"ftp mirror", []string{"--mirror", "ftp://deb.debian.org/debian"}},
		{"suite that is a path", []string{"--suite", "../bookworm"}},
		{"an argument", []string{"bookworm"}},
		{"unknown flag", []string{"--bogus"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No engine answers here: a bad request must fail before asking.
			t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "none.sock"))
			stdout, _, err := runImageBuild(t, tc.args...)
			require.Error(t, err)
			assert.Equal(t, 2, exitCode(err), "%v", err)
			assert.Empty(t, stdout)
		})
	}
}

func TestImageBuildWithoutAnEngineExitsFour(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "none.sock"))
	stdout, _, err := runImageBuild(t)
	require.Error(t, err)
	assert.Equal(t, provider.Unavailable, provider.Code(err), "%v", err)
	assert.Equal(t, 4, exitCode(err))
	assert.Contains(t, provider.Message(err), "start dockerd or set DOCKER_HOST")
	assert.Empty(t, stdout)
}
