// Package depgraph holds a test that keeps the SDK light: the dependencies of
// the packages a host server imports (provider, local, daytona, and
// toolbox/client, which links the toolbox's wire types but never its
// server) are kept in
// golden files under testdata, as Tailscale's depaware does, so that a
// change to them shows in review, and a test fails when one of them links
// server code (the daemon, the manager, the drivers, kin-openapi, YAML, the
// Docker client). `go test ./internal/depgraph -update` rewrites the files.
package depgraph
