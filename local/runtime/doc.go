// Package runtime defines the Runtime interface behind which the local control
// plane runs a sandbox's workload: a detached host process (native) or a
// Docker container (docker). The manager owns the registry and the state
// machine; a runtime only spawns, watches, stops and removes workloads.
package runtime
