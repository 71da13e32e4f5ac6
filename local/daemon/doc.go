// Package daemon is the HTTP face of the local control plane: the /v1 API
// generated from openapi/controlplane.yaml (strict server, kin-openapi request
// validation), the loopback guards (Host and Origin checks, optional bearer
// token) and the dashboard. It translates; the manager decides.
package daemon
