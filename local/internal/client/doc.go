// Package client is the HTTP client of the /v1 contract that local.Provider
// wraps, GENERATED from openapi/controlplane.yaml by oapi-codegen with the
// models of provider/wire (import-mapping). It needs nothing of the daemon.
// Never edit client.gen.go; change the contract and run `make generate`.
package client

//go:generate go tool oapi-codegen -config cfg.yaml ../../../openapi/controlplane.yaml
