package toolboxcmd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWorkload(t *testing.T) {
	tests := []struct {
		name    string
		make    func(path string) // puts something at the toolbox program's place
		program bool              // the default snapshot runs it
		why     string            // why it was refused
	}{
		{"not installed", func(string) {}, false, ""},
		{"installed", func(p string) { writeProgram(t, p, 0o755) }, true, ""},
		{"of another version", func(p string) { writeProgramOf(t, p, "v0.0.1") }, false, `version "v0.0.1"`},
		{"that says no version", func(p string) { writeProgramOf(t, p, "") }, false, "no version in its answer"},
		{"writable by others", func(p string) { writeProgram(t, p, 0o775) }, false, "writable by users other than its owner"},
		{"not executable", func(p string) { writeProgram(t, p, 0o644) }, false, "not an executable file"},
		{"a directory", func(p string) { require.NoError(t, os.Mkdir(p, 0o755)) }, false, "not an executable file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			self := filepath.Join(dir, "sandplane")
			program := filepath.Join(dir, ProgramName)
			tt.make(program)
			got, why := Workload(self, "v1.2.3")
			if tt.program {
				assert.Equal(t, []string{program}, got)
			} else {
				assert.Equal(t, []string{self, "toolbox"}, got)
			}
			if tt.why == "" {
				assert.NoError(t, why)
			} else {
				assert.ErrorContains(t, why, tt.why)
			}
		})
	}
}

// writeProgram writes a program at path that answers --version as a
// sandplane-toolbox of v1.2.3 would.
func writeProgram(t *testing.T, path string, perm os.FileMode) {
	t.Helper()
	script := "#!/bin/sh\necho '" + ProgramName + " version v1.2.3'\n"
	require.NoError(t, os.WriteFile(path, []byte(script), 0o600))
	require.NoError(t, os.Chmod(path, perm))
}

// writeProgramOf writes a program that answers --version with version, or
// with nothing.
func writeProgramOf(t *testing.T, path, version string) {
	t.Helper()
	script := "#!/bin/sh\n"
	if version != "" {
		script += "echo '" + ProgramName + " version " + version + "'\n"
	}
	require.NoError(t, os.WriteFile(path, []byte(script), 0o755))
}
