// Package docker runs each sandbox's workload as a Docker container, through
// the Docker Engine API (DOCKER_HOST is honoured).
//
// A sandbox owns exactly one container, named sandplane-<id> and labelled
// with the daemon's root and the sandbox's id, so that a restarted daemon
// finds its containers again and Orphans finds the ones nobody knows. Stop
// keeps the container and Start restarts it, so the container's filesystem
// survives a stop as a Daytona sandbox's does; Remove deletes it.
//
// The runtime never pulls: an image must already be on the engine, or have a
// source (SetImageSource) that Preflight runs before the image's first use
// and whenever it is missing, once however many creates wait for it.
// BuildScratchImage makes such images FROM scratch out of files, a statically
// linked binary typically, with no registry at all; the daemon builds its
// toolbox image this way from its own binary.
//
// The workload's port is the same number inside and out, published on
// loopback only (Spec.HostAddr: the sandbox's own address when the launcher
// gives it one, else 127.0.0.1; IPv4, never [::1]), so the workload must listen on $PORT on all of the
// container's interfaces: the engine's proxy cannot reach a server bound to
// the container's 127.0.0.1.
//
// Every sandbox container joins one bridge network, NetworkName ("sandplane"),
// made on first use with inter-container traffic off
// (com.docker.network.bridge.enable_icc=false) and labelled
// io.sandplane.network=isolated; a network of that name without those marks
// is refused, not used. One network for all because the engine's default
// address pools hold only about thirty. What that gives:
//   - a sandbox cannot open a connection to another sandbox's container, by
//     address or by name (the engine's DNS on the network answers names, but
//     the bridge drops the packets);
//   - the host reaches every container, and the published port stays on the
//     host's loopback only;
//   - a container still reaches the host (host.docker.internal, below) and,
//     through the engine's NAT, every network the host reaches: egress is
//     not restricted, and a service the host runs on a bridge address or on
//     0.0.0.0 is reachable from every sandbox;
//   - the containers of other projects on the engine's default bridge are
//     on another network, which the engine keeps apart from this one.
//
// A container made before the network existed no longer fits its spec (the
// network is part of the digest) and is replaced on its next start, its
// filesystem carried over, so it joins the network too.
//
// A spec with Network NetworkHost ("host", a snapshot's explicit opt-in)
// runs on the host's network instead: no bridge, no published port and no
// proxy in front of it, and none of the isolation above; its env values are
// left as they are, since localhost is the host's there.
//
// Waits share one subscription to the engine's event stream (container die
// and destroy): a waiter inspects its container when an event of it
// arrives, or when the stream (re)connects, since an event may have been
// missed while it was down. A create inspects the container name once
// (Preflight), and the sandbox network only on its first create.
//
// Env values that point at the host's loopback are rewritten to
// host.docker.internal, because inside the container 127.0.0.1 is the
// container itself; the name resolves to the host through the engine's
// host-gateway. On Linux that is the bridge's gateway address, so the
// rewritten URL reaches only host services listening on that address or on
// 0.0.0.0: a service bound to 127.0.0.1 alone stays out of reach (Docker
// Desktop forwards such connections to the host's loopback; a Linux engine
// does not). Bind such a service to the bridge address (docker0, usually
// 172.17.0.1) or run it in a container.
package docker
