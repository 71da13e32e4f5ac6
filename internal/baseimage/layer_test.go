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
	bin, server := []byte("\x7fELF binary"), []byte("\x7fELF server")
	tests := []struct {
		name       string
		server     []byte
		dockerfile string
	}{
		{name: "the binary's toolbox", dockerfile: `FROM sandplane/base:0123
COPY sandplane /usr/local/bin/sandplane
RUN ln -s /usr/local/bin/sandplane /sandplane
ENV HOME=/home/daytona
WORKDIR /home/daytona
ENTRYPOINT ["/usr/local/bin/sandplane","toolbox","--host","0.0.0.0"]
CMD []
`},
		{name: "the server alone", server: server, dockerfile: `FROM sandplane/base:0123
COPY sandplane /usr/local/bin/sandplane
RUN ln -s /usr/local/bin/sandplane /sandplane
COPY sandplane-toolbox /usr/local/bin/sandplane-toolbox
ENV HOME=/home/daytona
WORKDIR /home/daytona
ENTRYPOINT ["/usr/local/bin/sandplane-toolbox","--host","0.0.0.0"]
CMD []
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := Toolbox{Base: "sandplane/base:0123", Binary: bin, Server: tt.server}
			raw, err := toolboxContext(tb)
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
			if tt.server != nil {
				assert.Equal(t, string(server), content["sandplane-toolbox"])
				assert.Equal(t, int64(0o755), files["sandplane-toolbox"].Mode)
			} else {
				assert.NotContains(t, files, "sandplane-toolbox")
			}
			assert.Equal(t, tt.dockerfile, content["Dockerfile"])

			again, err := toolboxContext(tb)
			require.NoError(t, err)
			assert.Equal(t, raw, again, "the same binaries make the same context, so the engine's cache holds")
		})
	}
}
