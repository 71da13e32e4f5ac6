// Package provider is what a host server imports: one Provider interface for
// every sandbox backend (the local control plane, Daytona, the simulator), the
// wire types generated from openapi/controlplane.yaml, and one error model.
//
// Contracts are stated in error codes (see Code). A backend classifies its
// native errors in exactly one function, so callers can branch on
// provider.Code(err) without knowing which backend answered.
package provider
