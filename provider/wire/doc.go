// Package wire holds the types of the local control plane's contract,
// GENERATED from openapi/wire.yaml by oapi-codegen (models only). It is a leaf
// of the standard library: package provider names these types, and the
// daemon's server and the daemon's client reuse them, so a host server that
// imports the SDK links no server or client code. Never edit wire.gen.go;
// change the contract and run `make generate`.
package wire

//go:generate go tool oapi-codegen -config cfg.yaml ../../openapi/wire.yaml
