package baseimage

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/docker/docker/api/types/build"

	"github.com/sandplane/sandplane/provider"
)

// ToolboxPath is where LayerToolbox puts the sandplane binary: on PATH, so
// that `sandplane` works in a sandbox's shell too.
const ToolboxPath = "/usr/local/bin/sandplane"

// ServerPath is where LayerToolbox puts the toolbox server alone
// (sandplane-toolbox), when it is given one.
const ServerPath = "/usr/local/bin/sandplane-toolbox"

// ToolboxEntrypoint is the toolbox image's ENTRYPOINT: the toolbox on every
// interface of the container, on $PORT, which the docker runtime sets and
// publishes.
var ToolboxEntrypoint = []string{ToolboxPath, "toolbox", "--host", "0.0.0.0"}

// ServerEntrypoint is ToolboxEntrypoint for an image with a Server: the
// same toolbox and flags, in the program that links nothing else, so that
// an idle container's toolbox holds about 8 MB resident rather than 23.
var ServerEntrypoint = []string{ServerPath, "--host", "0.0.0.0"}

// Toolbox is an image of the sandplane toolbox on top of a base image.
type Toolbox struct {
	// Base is the image to build on, already on the engine (it is never
	// pulled): the tag Ensure returns, typically. The toolbox runs commands
	// with its /bin/sh.
	Base string
	// Binary is the sandplane binary for the engine's platform. The base
	// image has a C library, so it need not be static.
	Binary []byte
	// Server, when set, is sandplane-toolbox of the same build as Binary,
	// which the image then runs (ServerEntrypoint); Binary stays on PATH.
	Server []byte
	// Tag names the result.
	Tag string
	// Labels go on the result (a digest of Binary, typically, to tell
	// when it is stale).
	Labels map[string]string
	// Progress, when set, gets the build's steps.
	Progress func(Progress)
}

// LayerToolbox builds t on the engine: Base plus the binary at ToolboxPath
// (and the server at ServerPath), ToolboxEntrypoint (ServerEntrypoint),
// HOME and the working directory Home. The user stays root, as in the
// FROM-scratch toolbox image: the runtime sets the user a snapshot asks for, and the toolbox's file and git APIs reach the whole
// filesystem as Daytona's do. It is an engine build (an imported layer has
// no parent), from an in-memory context, with the classic builder, which
// needs no session and never pulls an image the engine has.
// invalid_argument (no base, tag or binary), unavailable, not_found (the
// base image is missing), internal (the build failed).
func LayerToolbox(ctx context.Context, e Engine, t Toolbox) error {
	if t.Base == "" || t.Tag == "" || len(t.Binary) == 0 || strings.ContainsAny(t.Base, " \t\r\n\"'\\$") {
		return provider.Errorf(provider.InvalidArgument, "layer the toolbox: a base image (a plain reference), a tag and a binary are required")
	}
	if _, err := e.ImageInspect(ctx, t.Base); err != nil {
		return classify("layer the toolbox on "+t.Base, err)
	}
	buildCtx, err := toolboxContext(t)
	if err != nil {
		return provider.Errorf(provider.Internal, "layer the toolbox: %v", err)
	}
	r := newReporter(t.Progress)
	r.report(Progress{Phase: PhaseLayer, Detail: t.Tag + " from " + t.Base})
	resp, err := e.ImageBuild(ctx, bytes.NewReader(buildCtx), build.ImageBuildOptions{
		Tags:        []string{t.Tag},
		Dockerfile:  "Dockerfile",
		Labels:      t.Labels,
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return classify("build the toolbox image "+t.Tag, err)
	}
	defer resp.Body.Close()
	err = readMessages(resp.Body, func(line string) {
		if strings.HasPrefix(line, "Step ") {
			r.report(Progress{Phase: PhaseLayer, Detail: line})
		}
	})
	if err != nil {
		return classify("build the toolbox image "+t.Tag, err)
	}
	r.report(Progress{Phase: PhaseDone, Detail: t.Tag})
	return nil
}

// contextFile is a file of a build context.
type contextFile struct {
	name string
	mode int64
	data []byte
}

// toolboxContext is the build context of t: its Dockerfile and binaries.
func toolboxContext(t Toolbox) ([]byte, error) {
	entrypoint := ToolboxEntrypoint
	files := []contextFile{{"sandplane", 0o755, t.Binary}}
	lines := []string{
		"FROM " + t.Base,
		"COPY sandplane " + ToolboxPath,
		// The scratch toolbox image has the binary at /sandplane, and
		// snapshots name it there in their commands: it stays valid here.
		"RUN ln -s " + ToolboxPath + " /sandplane",
	}
	if len(t.Server) > 0 {
		entrypoint = ServerEntrypoint
		files = append(files, contextFile{"sandplane-toolbox", 0o755, t.Server})
		lines = append(lines, "COPY sandplane-toolbox "+ServerPath)
	}
	ep, err := json.Marshal(entrypoint)
	if err != nil {
		return nil, err
	}
	dockerfile := strings.Join(append(lines,
		"ENV HOME="+Home,
		"WORKDIR "+Home,
		"ENTRYPOINT "+string(ep),
		// A base image's CMD would become the toolbox's arguments.
		"CMD []",
	), "\n") + "\n"
	files = append(files, contextFile{"Dockerfile", 0o644, []byte(dockerfile)})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// A fixed time keeps the context byte-identical for the same binary,
	// so the engine's build cache holds.
	mtime := time.Unix(0, 0)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime, Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
