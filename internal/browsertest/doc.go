// Package browsertest starts a real headless Chromium for the tests that
// drive one (the dashboard's, the preview cookie attack), with the flags
// that keep it quiet and self-contained: a fresh profile, no proxy, no
// background traffic, no QUIC.
package browsertest
