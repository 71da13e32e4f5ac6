// Package openapi embeds the contract of the local control plane:
// controlplane.yaml (the operations of /v1) and wire.yaml (their schemas,
// which controlplane.yaml refers to). The daemon validates requests against
// them; everything else generated from them lives in provider/wire,
// local/daemon/internal/api and local/internal/client. It imports nothing
// but the standard library.
package openapi

import "embed"

// Files holds controlplane.yaml and wire.yaml at its root.
//
//go:embed controlplane.yaml wire.yaml
var Files embed.FS

// Root is the contract's entry point in Files.
const Root = "controlplane.yaml"
