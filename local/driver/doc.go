// Package driver defines the Driver interface behind which the local control
// plane runs a sandbox's workload: a detached host process (native) or a
// Docker container (docker). The manager owns the registry and the state
// machine; a driver only spawns, watches, stops and removes workloads. A
// driver implements one runtime of the API (provider.Runtime), as a Nomad
// task driver implements one task type.
package driver
