package baseimage

import (
	"archive/tar"
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteTar(t *testing.T) {
	root := t.TempDir()
	write := func(name, data string, mode os.FileMode) {
		p := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(data), mode))
		require.NoError(t, os.Chmod(p, mode))
	}
	write("usr/bin/perl", "#!perl", 0o755)
	require.NoError(t, os.Link(filepath.Join(root, "usr/bin/perl"), filepath.Join(root, "usr/bin/perl5.36")))
	require.NoError(t, os.Symlink("usr/bin", filepath.Join(root, "bin")))
	write("etc/shadow", "root:*:", 0o640)
	require.NoError(t, os.Chown(filepath.Join(root, "etc/shadow"), 0, 42))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "tmp"), 0o755))
	require.NoError(t, os.Chmod(filepath.Join(root, "tmp"), os.ModeSticky|0o777))
	write("dev/leftover", "x", 0o644)
	write("proc/leftover", "x", 0o644)
	sock, err := net.Listen("unix", filepath.Join(root, "run.sock"))
	require.NoError(t, err)
	defer sock.Close()

	var buf bytes.Buffer
	require.NoError(t, writeTar(&buf, root))

	got := map[string]*tar.Header{}
	content := map[string]string{}
	tr := tar.NewReader(&buf)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got[hdr.Name] = hdr
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		content[hdr.Name] = string(data)
	}
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	assert.ElementsMatch(t, []string{"bin", "dev/", "etc/", "etc/shadow", "proc/", "tmp/", "usr/", "usr/bin/", "usr/bin/perl", "usr/bin/perl5.36"}, names)

	assert.Equal(t, byte(tar.TypeSymlink), got["bin"].Typeflag)
	assert.Equal(t, "usr/bin", got["bin"].Linkname)
	assert.Equal(t, "#!perl", content["usr/bin/perl"])
	assert.Equal(t, int64(0o755), got["usr/bin/perl"].Mode&0o7777)
	assert.Equal(t, byte(tar.TypeLink), got["usr/bin/perl5.36"].Typeflag)
	assert.Equal(t, "usr/bin/perl", got["usr/bin/perl5.36"].Linkname)
	assert.Equal(t, 42, got["etc/shadow"].Gid)
	assert.Equal(t, int64(0o640), got["etc/shadow"].Mode&0o7777)
	assert.Empty(t, got["etc/shadow"].Gname, "numeric owners only")
	assert.Equal(t, int64(0o1777), got["tmp/"].Mode&0o7777)
}

func TestCopyLocalCAs(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "usr/local/share/ca-certificates")
	require.NoError(t, os.MkdirAll(filepath.Join(src, "corp"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "corp", "proxy.crt"), []byte("CERT"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "README"), []byte("not a certificate"), 0o644))
	require.NoError(t, copyLocalCAs(src, dst))
	got, err := os.ReadFile(filepath.Join(dst, "corp", "proxy.crt"))
	require.NoError(t, err)
	assert.Equal(t, "CERT", string(got))
	assert.NoFileExists(t, filepath.Join(dst, "README"))
	assert.NoError(t, copyLocalCAs(filepath.Join(src, "missing"), dst), "a host without local CAs copies nothing")
}
