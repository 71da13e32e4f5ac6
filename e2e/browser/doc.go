// Package browser tests the dashboard in a real headless Chromium against a
// real daemon process: the page loads, creates a sandbox, follows it to
// started, stops it, and sees every change arrive from the event stream
// without a reload. Run with -update to refresh docs/dashboard.png.
//
// It also opens the dashboard on one agent session (/?session=ID), and
// loads the TypeScript client's browser build from a page on another
// localhost port, calling the daemon across origins.
//
// Against `sandplane sim`, it opens a signed preview URL of a sandbox's page
// (no API key, no preview token) and sees it refused once expired.
//
// The tests skip, saying so, only when no Chromium binary is installed
// (Debian: apt-get install chromium); the TypeScript client's also when
// node or npm is missing, and fails when clients/typescript's packages are
// not installed (make test-deps).
package browser
