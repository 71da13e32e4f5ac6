// Package manager is the heart of the local control plane: the registry of
// sandboxes, its persistence (one sandbox.json per sandbox, written
// atomically), rehydration after a daemon restart, reconciliation of dead
// workloads, and Daytona-style idle auto-stop on the injected clock.
//
// The manager owns every state transition. It brings workloads up through
// local/launcher (ports, preflight, start, readiness) and drivers
// (local/driver) only spawn, watch and stop them; the daemon (local/daemon)
// only translates HTTP. Operations on one sandbox are serialised; reads never block behind a
// long operation and never count as activity.
package manager
