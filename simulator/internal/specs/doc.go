// Package specs holds the upstream Daytona OpenAPI documents the simulator
// serves and validates against, embedded in the binary so that
// `sandplane sim` needs no Go toolchain or module cache at run time.
//
// The primary document, API, is the newest release of the Daytona API the
// simulator follows: clients/daytona-api.yaml, copied unchanged from
// api-client-go/api/openapi.yaml of https://github.com/daytona/clients at
// tag v0.205.1 (clients/SOURCE names the commit and git blob; a test checks
// the blob). That module is not on the Go module proxy, so `go generate`
// does not fetch it: to move the pin, copy the file from the new tag and
// update clients/VERSION and clients/SOURCE.
//
// LegacyAPI (daytona-api.yaml) and Toolbox (daytona-toolbox-api.yaml) are
// copied unchanged from the Go modules pinned in go.mod by `go generate`
// (see gen/), so they always match the api-client the tests drive; `make
// check-generate` fails when a copy differs from its module. LegacyAPI is
// used only for operations API no longer has.
//
// All are Daytona's, under the Apache License 2.0 (LICENSE and
// clients/LICENSE beside them).
package specs

//go:generate go run ./gen
