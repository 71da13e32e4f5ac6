package browsertest

import (
	"context"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// names are the Chromium binaries looked for on PATH, Debian's first.
var names = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// Start starts a headless Chromium with a fresh profile and returns its
// context, or skips t, saying that the test named for needs one, when none
// is installed. opts are added to the defaults (a window size, say).
// Cleanup ends the browser.
func Start(t testing.TB, forWhat string, opts ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	exe := find()
	if exe == "" {
		t.Skipf("no chromium binary on PATH: install it (Debian: apt-get install chromium) to run %s", forWhat)
	}
	all := append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("no-proxy-server", true),
	}, opts...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), all...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first run starts the browser and must not carry a timeout.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	return ctx
}

func find() string {
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}
