// Package backend is what runs the workloads behind simulated sandboxes:
// the Backend interface and its optional capabilities (ImageBackend,
// VolumeBackend, NetworkBackend, ResizeBackend), None (no workloads, a pure
// state machine), and NewRuntime, which runs each sandbox's toolbox on a
// sandplane runtime: native processes through local/launcher, or docker
// containers with the docker capabilities (snapshot images, volumes,
// network rules, links, resize) when given an engine client. Every
// workload's toolbox runs the sandbox's entrypoint (Workload.Entrypoint,
// DefaultEntrypoint), and a fork's first start copies its source's files
// (Workload.ForkOf: the native home, or a commit of the docker container).
//
// It knows nothing of the simulator's HTTP surface or its records: the
// simulator hands it a Workload per sandbox and routes toolbox and preview
// requests to the Route it answers. A route leads only to the sandbox's own
// workload (ErrNotListening otherwise), and what the docker backend makes on
// the engine carries LabelSim and the owner label of the simulator process
// that made it, so that the next backend on the machine sweeps what a killed
// one left.
package backend
