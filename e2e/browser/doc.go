// Package browser tests the dashboard in a real headless Chromium against a
// real daemon process: the page loads, creates a sandbox, follows it to
// started, stops it, and sees every change arrive from the event stream
// without a reload. Run with -update to refresh docs/dashboard.png.
//
// The test skips, saying so, only when no Chromium binary is installed
// (Debian: apt-get install chromium).
package browser
