package baseimage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"

	"github.com/sandplane/sandplane/provider"
)

// Labels on every image this package makes.
const (
	// LabelHash holds the Spec.Hash of a base image; Ensure finds images by it.
	LabelHash = "io.sandplane.base.hash"
	// LabelSuite holds the base image's Debian release, for people reading
	// `docker images --filter label=io.sandplane.base.suite`.
	LabelSuite = "io.sandplane.base.suite"
)

// Repository is where base images are tagged, as Repository:<hash prefix>.
const Repository = "sandplane/base"

// Tag is the tag of the base image with hash: the repository and the
// hash's first 16 digits. Ensure finds images by their full hash label, so
// the short tag only has to be readable.
func Tag(hash string) string { return Repository + ":" + hash[:16] }

// Engine is the part of the Docker Engine API the package uses;
// *client.Client is one. Its errors are the client's (errdefs classes,
// client.IsErrConnectionFailed).
type Engine interface {
	ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error)
	ImageTag(ctx context.Context, source, target string) error
	ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	ImageImport(ctx context.Context, source image.ImportSource, ref string, options image.ImportOptions) (io.ReadCloser, error)
	ImageBuild(ctx context.Context, buildContext io.Reader, options build.ImageBuildOptions) (build.ImageBuildResponse, error)
	ServerVersion(ctx context.Context) (types.Version, error)
}

var _ Engine = (*client.Client)(nil)

// Find returns the tag of the base image with hash when the engine holds
// one, tagging it again should someone have removed the tag. ok is false
// when there is none. unavailable, internal.
func Find(ctx context.Context, e Engine, hash string) (ref string, ok bool, err error) {
	imgs, err := e.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelHash+"="+hash))})
	if err != nil {
		return "", false, classify("list the base images", err)
	}
	if len(imgs) == 0 {
		return "", false, nil
	}
	tag := Tag(hash)
	for _, img := range imgs {
		for _, t := range img.RepoTags {
			if t == tag {
				return tag, true, nil
			}
		}
	}
	if err := e.ImageTag(ctx, imgs[0].ID, tag); err != nil {
		return "", false, classify("tag base image "+imgs[0].ID, err)
	}
	return tag, true, nil
}

// classify gives an error of the Docker client a code; what says what
// failed. Errors with a code and context errors pass through.
func classify(what string, err error) error {
	var pe *provider.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case client.IsErrConnectionFailed(err) && errors.Is(err, fs.ErrPermission):
		return provider.Errorf(provider.Unavailable, "%s: permission denied on the docker engine socket: add your user to the docker group or set DOCKER_HOST: %w", what, err)
	case client.IsErrConnectionFailed(err), cerrdefs.IsUnavailable(err):
		return provider.Errorf(provider.Unavailable, "%s: the docker engine does not answer: start dockerd or set DOCKER_HOST: %w", what, err)
	case cerrdefs.IsNotFound(err):
		return provider.Errorf(provider.NotFound, "%s: %w", what, err)
	case cerrdefs.IsInvalidArgument(err):
		return provider.Errorf(provider.InvalidArgument, "%s: %w", what, err)
	}
	return provider.Errorf(provider.Internal, "%s: %w", what, err)
}

// readMessages reads the engine's JSON message stream of an import or a
// build to its end, handing each line of output to line. It fails with the
// error the stream ends with, if any.
func readMessages(r io.Reader, line func(string)) error {
	w := &lineWriter{line: line}
	err := jsonmessage.DisplayJSONMessagesStream(r, w, 0, false, nil)
	w.flush()
	return err
}

// lineWriter calls line for every complete, non-blank line written to it.
type lineWriter struct {
	line func(string)
	buf  []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.emit(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

func (w *lineWriter) flush() {
	w.emit(string(w.buf))
	w.buf = nil
}

func (w *lineWriter) emit(s string) {
	if s = strings.TrimSpace(s); s != "" {
		w.line(s)
	}
}
