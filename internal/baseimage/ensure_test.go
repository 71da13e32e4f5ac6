package baseimage

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

// fakeEngine holds images in memory: labels and tags per id. Only what the
// package calls is there; the rest of Engine panics.
type fakeEngine struct {
	mu     sync.Mutex
	images map[string]fakeImage
	down   bool
}

type fakeImage struct {
	labels map[string]string
	tags   []string
}

func newFakeEngine() *fakeEngine { return &fakeEngine{images: map[string]fakeImage{}} }

func (f *fakeEngine) add(id string, labels map[string]string, tags ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images[id] = fakeImage{labels: labels, tags: tags}
}

func (f *fakeEngine) ImageList(_ context.Context, opts image.ListOptions) ([]image.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, fmt.Errorf("cannot connect to the docker daemon: %w", cerrdefs.ErrUnavailable)
	}
	var out []image.Summary
	for id, img := range f.images {
		match := true
		for _, kv := range opts.Filters.Get("label") {
			k, v, _ := strings.Cut(kv, "=")
			match = match && img.labels[k] == v
		}
		if match {
			out = append(out, image.Summary{ID: id, Labels: img.labels, RepoTags: img.tags})
		}
	}
	return out, nil
}

func (f *fakeEngine) ImageTag(_ context.Context, source, target string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	img, ok := f.images[source]
	if !ok {
		return cerrdefs.ErrNotFound
	}
	img.tags = append(img.tags, target)
	f.images[source] = img
	return nil
}

func (f *fakeEngine) ImageInspect(context.Context, string, ...client.ImageInspectOption) (image.InspectResponse, error) {
	panic("not used")
}

func (f *fakeEngine) ImageImport(context.Context, image.ImportSource, string, image.ImportOptions) (io.ReadCloser, error) {
	panic("not used")
}

func (f *fakeEngine) ImageBuild(context.Context, io.Reader, build.ImageBuildOptions) (build.ImageBuildResponse, error) {
	panic("not used")
}

func (f *fakeEngine) ServerVersion(context.Context) (types.Version, error) {
	return types.Version{Os: "linux", Arch: "amd64"}, nil
}

// fakeBuilder stands for debootstrap and the import: it counts its runs
// and, once released, puts an image with the hash on the engine.
type fakeBuilder struct {
	e       *fakeEngine
	builds  atomic.Int32
	started chan struct{} // receives once per run
	release chan struct{} // closed to let runs finish
}

func newFakeBuilder(e *fakeEngine) *fakeBuilder {
	return &fakeBuilder{e: e, started: make(chan struct{}, 10), release: make(chan struct{})}
}

func (b *fakeBuilder) build(ctx context.Context, _ Engine, _ Spec, hash, _ string, r *reporter) error {
	n := b.builds.Add(1)
	r.report(Progress{Phase: PhaseBootstrap, Detail: "fake"})
	b.started <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.e.add(fmt.Sprintf("sha256:built%d", n), map[string]string{LabelHash: hash}, Tag(hash))
	return nil
}

// progressLog collects a call's progress, safe to read while it runs.
type progressLog struct {
	mu     sync.Mutex
	steps  []Progress
	onStep chan Progress
}

func newProgressLog() *progressLog { return &progressLog{onStep: make(chan Progress, 100)} }

func (l *progressLog) add(p Progress) {
	l.mu.Lock()
	l.steps = append(l.steps, p)
	l.mu.Unlock()
	l.onStep <- p
}

func (l *progressLog) phases() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, p := range l.steps {
		out = append(out, p.Phase)
	}
	return out
}

func testOptions(t *testing.T, b *fakeBuilder, clk *clocktest.Fake, log *progressLog) Options {
	return Options{Spec: baseSpec(), Clock: clk, TempDir: t.TempDir(), Progress: log.add, build: b.build}
}

// waitFor waits, boundedly, for a step of phase in log.
func waitFor(t *testing.T, log *progressLog, phase string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case p := <-log.onStep:
			if p.Phase == phase {
				return
			}
		case <-timeout:
			t.Fatalf("no %s step; got %v", phase, log.phases())
		}
	}
}

func TestEnsureBuildsOnceForConcurrentCallers(t *testing.T) {
	e := newFakeEngine()
	b := newFakeBuilder(e)
	clk := clocktest.NewFake(time.Time{})
	tmp := t.TempDir()
	ctx := context.Background()

	type result struct {
		ref string
		err error
	}
	firstLog, secondLog := newProgressLog(), newProgressLog()
	first, second := make(chan result, 1), make(chan result, 1)
	go func() {
		opts := testOptions(t, b, clk, firstLog)
		opts.TempDir = tmp
		ref, err := Ensure(ctx, e, opts)
		first <- result{ref, err}
	}()
	<-b.started // the first holds the lock and builds

	go func() {
		opts := testOptions(t, b, clk, secondLog)
		opts.TempDir = tmp
		ref, err := Ensure(ctx, e, opts)
		second <- result{ref, err}
	}()
	waitFor(t, secondLog, PhaseWaiting)
	require.NoError(t, clk.BlockUntilWaiters(ctx, 1)) // the second sleeps before trying the lock again

	close(b.release)
	r1 := <-first
	require.NoError(t, r1.err)
	clk.Advance(lockPoll)
	r2 := <-second
	require.NoError(t, r2.err)

	assert.Equal(t, int32(1), b.builds.Load(), "one build for two callers")
	assert.Equal(t, Tag(baseSpec().Hash()), r1.ref)
	assert.Equal(t, r1.ref, r2.ref)
	assert.Equal(t, []string{PhaseBootstrap, PhaseDone}, firstLog.phases())
	assert.Equal(t, []string{PhaseWaiting, PhaseCached}, secondLog.phases())
}

func TestEnsureUsesTheCachedImage(t *testing.T) {
	e := newFakeEngine()
	b := newFakeBuilder(e)
	hash := baseSpec().Hash()
	e.add("sha256:old", map[string]string{LabelHash: "another"}, Repository+":another")
	e.add("sha256:cached", map[string]string{LabelHash: hash}, Tag(hash))
	log := newProgressLog()
	ref, err := Ensure(context.Background(), e, testOptions(t, b, clocktest.NewFake(time.Time{}), log))
	require.NoError(t, err)
	assert.Equal(t, Tag(hash), ref)
	assert.Zero(t, b.builds.Load())
	assert.Equal(t, []string{PhaseCached}, log.phases())
}

func TestEnsureTagsAnUntaggedCachedImage(t *testing.T) {
	e := newFakeEngine()
	b := newFakeBuilder(e)
	hash := baseSpec().Hash()
	e.add("sha256:cached", map[string]string{LabelHash: hash})
	ref, err := Ensure(context.Background(), e, testOptions(t, b, clocktest.NewFake(time.Time{}), newProgressLog()))
	require.NoError(t, err)
	assert.Equal(t, Tag(hash), ref)
	assert.Zero(t, b.builds.Load())
	assert.Equal(t, []string{Tag(hash)}, e.images["sha256:cached"].tags)
}

func TestBuildIgnoresTheCache(t *testing.T) {
	e := newFakeEngine()
	b := newFakeBuilder(e)
	close(b.release)
	hash := baseSpec().Hash()
	e.add("sha256:cached", map[string]string{LabelHash: hash}, Tag(hash))
	ref, err := Build(context.Background(), e, testOptions(t, b, clocktest.NewFake(time.Time{}), newProgressLog()))
	require.NoError(t, err)
	assert.Equal(t, Tag(hash), ref)
	assert.Equal(t, int32(1), b.builds.Load())
}

func TestEnsureGivesUpWaitingWhenCancelled(t *testing.T) {
	e := newFakeEngine()
	b := newFakeBuilder(e)
	clk := clocktest.NewFake(time.Time{})
	tmp := t.TempDir()
	holder := make(chan error, 1)
	go func() {
		opts := testOptions(t, b, clk, newProgressLog())
		opts.TempDir = tmp
		_, err := Ensure(context.Background(), e, opts)
		holder <- err
	}()
	<-b.started

	ctx, cancel := context.WithCancel(context.Background())
	log := newProgressLog()
	waiter := make(chan error, 1)
	go func() {
		opts := testOptions(t, b, clk, log)
		opts.TempDir = tmp
		_, err := Ensure(ctx, e, opts)
		waiter <- err
	}()
	waitFor(t, log, PhaseWaiting)
	cancel()
	assert.ErrorIs(t, <-waiter, context.Canceled)
	close(b.release)
	assert.NoError(t, <-holder)
	assert.Equal(t, int32(1), b.builds.Load())
}

func TestEnsureErrors(t *testing.T) {
	t.Run("bad spec", func(t *testing.T) {
		e := newFakeEngine()
		opts := testOptions(t, newFakeBuilder(e), clocktest.NewFake(time.Time{}), newProgressLog())
		opts.Spec.Suite = "../etc"
		_, err := Ensure(context.Background(), e, opts)
		assert.Equal(t, provider.InvalidArgument, provider.Code(err))
	})
	t.Run("engine down", func(t *testing.T) {
		e := newFakeEngine()
		e.down = true
		b := newFakeBuilder(e)
		_, err := Ensure(context.Background(), e, testOptions(t, b, clocktest.NewFake(time.Time{}), newProgressLog()))
		assert.Equal(t, provider.Unavailable, provider.Code(err))
		assert.Contains(t, provider.Message(err), "start dockerd")
		assert.Zero(t, b.builds.Load())
	})
}
