// Package docker runs each sandbox's workload as a Docker container, through
// the Docker Engine API (DOCKER_HOST is honoured).
//
// A sandbox owns exactly one container, named sandplane-<id> and labelled
// with the daemon's root and the sandbox's id, so that a restarted daemon
// finds its containers again and Orphans finds the ones nobody knows. Stop
// keeps the container and Start restarts it, so the container's filesystem
// survives a stop as a Daytona sandbox's does; Remove deletes it. The runtime
// never pulls: an image must already be on the engine.
//
// The workload's port is published on 127.0.0.1 only. Env values that point
// at the host's loopback are rewritten to host.docker.internal, which the
// container resolves to the host, because inside the container 127.0.0.1 is
// the container itself.
package docker
