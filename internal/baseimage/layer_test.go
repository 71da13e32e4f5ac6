package baseimage

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

func TestLayerToolboxRejectsBadInputBeforeAskingTheEngine(t *testing.T) {
	ok := Toolbox{Base: "sandplane/base:0123", Binary: []byte("elf"), Tag: "sandplane/toolbox:local"}
	for _, tc := range []struct {
		name   string
		change func(*Toolbox)
	}{
		{"no base", func(tb *Toolbox) { tb.Base = "" }},
		{"base with a line break", func(tb *Toolbox) { tb.Base = "x\nRUN rm -rf /" }},
		{"base with a variable", func(tb *Toolbox) { tb.Base = "$BASE" }},
		{"no tag", func(tb *Toolbox) { tb.Tag = "" }},
		{"no binary", func(tb *Toolbox) { tb.Binary = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := ok
			tc.change(&tb)
			// The fake panics on ImageInspect and ImageBuild: nothing may reach it.
			err := LayerToolbox(context.Background(), newFakeEngine(), tb)
			assert.Equal(t, provider.InvalidArgument, provider.Code(err))
		})
	}
}

func TestToolboxContext(t *testing.T) {
	bin := []byte("\x7fELF binary")
	raw, err := toolboxContext(Toolbox{Base: "sandplane/base:0123", Binary: bin})
	require.NoError(t, err)
	files := map[string]*tar.Header{}
	content := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[hdr.Name], content[hdr.Name] = hdr, string(data)
	}
	assert.Equal(t, string(bin), content["sandplane"])
	assert.Equal(t, int64(0o755), files["sandplane"].Mode)
	assert.Equal(t, `FROM sandplane/base:0123
COPY sandplane /usr/local/bin/sandplane
RUN ln -s /usr/local/bin/sandplane /sandplane
ENV HOME=/home/daytona
WORKDIR /home/daytona
ENTRYPOINT ["/usr/local/bin/sandplane","toolbox","--host","0.0.0.0"]
CMD []
`, content["Dockerfile"])

	again, err := toolboxContext(Toolbox{Base: "sandplane/base:0123", Binary: bin})
	require.NoError(t, err)
	assert.Equal(t, raw, again, "the same binary makes the same context, so the engine's cache holds")
}
