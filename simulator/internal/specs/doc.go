// Package specs holds the upstream Daytona OpenAPI documents the simulator
// serves and validates against, embedded in the binary so that
// `sandplane sim` needs no Go toolchain or module cache at run time.
//
// The files are copied unchanged from the Go modules pinned in go.mod by
// `go generate` (see gen/), so they always match the api-client the tests
// drive; `make check-generate` fails when a copy differs from its module.
// They are Daytona's, under the Apache License 2.0 (LICENSE beside them).
package specs

//go:generate go run ./gen
