// Package api is GENERATED from openapi/controlplane.yaml by oapi-codegen: the
// wire models, the strict server interface and the client of the /v1 API.
// Never edit api.gen.go; change the contract and run `make generate`.
package api

//go:generate go tool oapi-codegen -config cfg.yaml ../../openapi/controlplane.yaml
