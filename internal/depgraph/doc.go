// Package depgraph holds the tests that keep the SDK light.
//
// The dependencies of the packages a host server imports (provider, local,
// daytona, and toolbox/client, which links the toolbox's wire types but
// never its server) are kept in golden files under testdata, as Tailscale's
// depaware does, so that a change to them shows in review, and a test fails
// when one of them links server code (the daemon, the manager, the drivers,
// kin-openapi, YAML, the Docker client). `go test ./internal/depgraph
// -update` rewrites the files.
//
// Each SDK package also has a budget (budget_test.go): a maximum count of
// non-standard packages, and heavy packages it must not link (Prometheus,
// protobuf, the Docker client, kin-openapi, YAML, the daemon, the manager,
// the drivers, the simulator). A failure names the import chain that pulls
// the heavy package in, from go list -deps -json.
package depgraph
