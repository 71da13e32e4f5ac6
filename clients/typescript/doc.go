// Package typescript holds @sandplane/client, the TypeScript client of the
// local control plane (`sandplane serve`), an npm package: its types in
// src/generated are GENERATED from openapi/controlplane.yaml and
// openapi/wire.yaml by openapi-typescript (pinned in package.json), its
// hand-written ControlPlaneClient in src/index.ts runs on openapi-fetch.
// The Go side is only this directive and client_test.go, which runs the
// package's node tests against a real daemon. Never edit src/generated;
// change the contract and run `make generate` (after `make test-deps`,
// which installs the generator with npm ci).
package typescript

//go:generate npm run --silent generate
