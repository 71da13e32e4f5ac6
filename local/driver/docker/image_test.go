package docker

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type tarEntry struct {
	mode     int64
	typeflag byte
	data     string
}

func readTar(t *testing.T, b []byte) (names []string, entries map[string]tarEntry) {
	t.Helper()
	entries = map[string]tarEntry{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, entries
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		names = append(names, hdr.Name)
		entries[hdr.Name] = tarEntry{mode: hdr.Mode, typeflag: hdr.Typeflag, data: string(data)}
	}
}

func TestScratchImageLayerAndChanges(t *testing.T) {
	img := ScratchImage{
		Files:      map[string][]byte{"/sandplane": []byte("bin"), "bin/sh": []byte("sh")},
		Dirs:       map[string]fs.FileMode{"tmp": fs.ModeSticky | 0o777, "/home/daytona": 0o750},
		Entrypoint: []string{"/sandplane", "toolbox", "--host", "0.0.0.0"},
		Env:        map[string]string{"HOME": "/home/daytona", "A": "1"},
		WorkDir:    "/home/daytona",
		Labels:     map[string]string{"io.x": "y"},
	}
	b, err := img.layer()
	require.NoError(t, err)
	names, entries := readTar(t, b)

	assert.Equal(t, []string{"bin/", "home/", "home/daytona/", "tmp/", "bin/sh", "sandplane"}, names,
		"parents before children, files after directories")
	assert.Equal(t, int64(0o1777), entries["tmp/"].mode, "sticky bit kept")
	assert.Equal(t, int64(0o750), entries["home/daytona/"].mode)
	assert.Equal(t, int64(0o755), entries["home/"].mode)
	assert.Equal(t, byte(tar.TypeDir), entries["bin/"].typeflag)
	assert.Equal(t, tarEntry{mode: 0o755, typeflag: tar.TypeReg, data: "sh"}, entries["bin/sh"])
	assert.Equal(t, "bin", entries["sandplane"].data)

	again, err := img.layer()
	require.NoError(t, err)
	assert.Equal(t, b, again, "byte-identical, so the engine stores the layer once")

	changes, err := img.changes()
	require.NoError(t, err)
	assert.Equal(t, []string{
		`ENV A="1"`, `ENV HOME="/home/daytona"`, `LABEL io.x="y"`, "WORKDIR /home/daytona",
		`ENTRYPOINT ["/sandplane","toolbox","--host","0.0.0.0"]`,
	}, changes)
}

func TestScratchImageRefusesWhatItCannotWrite(t *testing.T) {
	ok := ScratchImage{Files: map[string][]byte{"a": nil}, Entrypoint: []string{"/a"}}
	tests := []struct {
		name   string
		change func(*ScratchImage)
	}{
		{"no entrypoint", func(i *ScratchImage) { i.Entrypoint = nil }},
		{"path escapes", func(i *ScratchImage) { i.Files = map[string][]byte{"../etc/passwd": nil} }},
		{"unclean path", func(i *ScratchImage) { i.Files = map[string][]byte{"a//b": nil} }},
		{"root as file", func(i *ScratchImage) { i.Files = map[string][]byte{"/": nil} }},
		{"file named twice", func(i *ScratchImage) { i.Files = map[string][]byte{"a": nil, "/a": nil} }},
		{"unclean dir", func(i *ScratchImage) { i.Dirs = map[string]fs.FileMode{"tmp/": 0o777} }},
		{"env value with a dollar", func(i *ScratchImage) { i.Env = map[string]string{"A": "$HOME"} }},
		{"env value with a quote", func(i *ScratchImage) { i.Env = map[string]string{"A": `x"y`} }},
		{"env value with a newline", func(i *ScratchImage) { i.Env = map[string]string{"A": "x\nRUN y"} }},
		{"env name with a blank", func(i *ScratchImage) { i.Env = map[string]string{"A B": "x"} }},
		{"label value with a quote", func(i *ScratchImage) { i.Labels = map[string]string{"a": `x"y`} }},
		{"relative workdir", func(i *ScratchImage) { i.WorkDir = "home" }},
		{"workdir with a blank", func(i *ScratchImage) { i.WorkDir = "/a b" }},
	}
	build := func(img ScratchImage) error {
		if _, err := img.changes(); err != nil {
			return err
		}
		_, err := img.layer()
		return err
	}
	require.NoError(t, build(ok))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img := ok
			tt.change(&img)
			assert.Error(t, build(img))
		})
	}
}

func TestStaticExecutable(t *testing.T) {
	build := func(t *testing.T, cgo string, flags ...string) string {
		t.Helper()
		out := filepath.Join(t.TempDir(), "server")
		cmd := exec.Command("go", append(append([]string{"build", "-o", out}, flags...), "./testdata/server")...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo)
		msg, err := cmd.CombinedOutput()
		if err != nil && cgo == "1" {
			t.Skipf("no cgo toolchain to link a dynamic binary: %v\n%s", err, msg)
		}
		require.NoError(t, err, "%s", msg)
		return out
	}
	t.Run("static", func(t *testing.T) {
		static, err := StaticExecutable(build(t, "0"))
		require.NoError(t, err)
		assert.True(t, static)
	})
	t.Run("dynamic", func(t *testing.T) {
		static, err := StaticExecutable(build(t, "1", "-ldflags=-linkmode=external"))
		require.NoError(t, err)
		assert.False(t, static)
	})
	t.Run("not an executable", func(t *testing.T) {
		script := filepath.Join(t.TempDir(), "script")
		require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755))
		_, err := StaticExecutable(script)
		assert.Error(t, err)
	})
}
