// Package api is the daemon's side of the /v1 contract: the strict server
// interface and its router, GENERATED from openapi/controlplane.yaml by
// oapi-codegen with the models of provider/wire (import-mapping), and the
// contract itself, embedded, for request validation (Spec). Never edit
// api.gen.go; change the contract and run `make generate`.
package api

//go:generate go tool oapi-codegen -config cfg.yaml ../../../../openapi/controlplane.yaml
