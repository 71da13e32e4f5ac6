// Package redact hides a sandbox's env values in what its workload printed
// (its entrypoint logs, a failed start's output) before a caller sees it,
// for the local daemon, the simulator and the Daytona provider alike.
package redact
