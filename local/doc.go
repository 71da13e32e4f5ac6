// Package local is the Go client of the local control plane: a
// provider.Provider that talks to `sandplane serve` over loopback HTTP through
// the client generated from openapi/controlplane.yaml.
//
//	p, err := local.New("")          // AGENT_CONTROL_PLANE_URL or http://127.0.0.1:4025
//	sb, err := p.Create(ctx, provider.CreateRequest{Labels: map[string]string{"origin": "harness"}})
package local
