// Package manager is the heart of the local control plane: the registry of
// sandboxes, its persistence (one sandbox.json per sandbox, written
// atomically), rehydration after a daemon restart, reconciliation of dead
// workloads, port allocation, and Daytona-style idle auto-stop on the
// injected clock.
//
// The manager owns every state transition. Runtimes (local/driver) only
// spawn, watch and stop workloads; the daemon (local/daemon) only translates
// HTTP. Operations on one sandbox are serialised; reads never block behind a
// long operation and never count as activity.
package manager
