// Package simulator is a stateful simulator of the Daytona API (v0.205.1,
// with the operations of v0.190.0 that later releases dropped).
//
// Point DAYTONA_API_URL at <base>/api and the official SDKs work unchanged:
// sandboxes move through Daytona's raw states on an injected clock, responses
// carry Daytona's derived display state, status codes and error bodies
// (including the places where the real server and its OpenAPI file
// disagree), and the auto-stop, auto-pause, auto-archive and auto-delete
// jobs run every ten seconds off lastActivityAt, exactly as Daytona's do,
// beside the TTL (ttlMinutes, setTtl), which destroys a sandbox at its
// autoDestroyAt whatever its state or activity. Auto-pause (autopause.go)
// freezes an idle sandbox in place; start or toolbox traffic resumes it.
// Error bodies carry the code and source SDK 0.218 picks its error classes
// by (errors.go, toolbox/wire).
//
// Routes served by Handler:
//
//	/api/...                   the Daytona REST API (API-key auth, NestJS error bodies):
//	                           sandboxes, snapshots, volumes, SSH access, telemetry,
//	                           organization secrets (secrets.go)
//	/api/socket.io/            Daytona's event gateway (socket.io; organization rooms)
//	/api/toolbox/{id}/toolbox/ the deprecated toolbox routes: the toolbox proxy
//	/metrics                   Prometheus metrics
//	/toolbox/{sandboxId}/...   the toolbox proxy: forwards to the sandbox's workload;
//	                           a pre-signed file URL opens its one download or
//	                           upload without the API key (fileurls.go)
//	/_preview/{port}-{id}/...  preview traffic for getPreviewLink URLs
//	/_preview/{port}-{token}/  the same for signed preview URLs
//	/_sim/...                  the admin API (its own key, one organization
//	                           per call): faults, call log, cost, vanish
//
// A sandbox that mounts secrets sees their placeholders only; on the native
// backend its HTTP(S) goes through the secrets egress proxy (egress.go,
// internal/secrets), which puts each value into requests to the hosts its
// secret allows and nowhere else, dialling within the sandbox's network
// settings. Other runtime backends refuse secrets.
//
// The proxies reach only ports of the sandbox a request names: a port its
// processes listen on (native), or its container's address (docker). The
// toolbox gets the sandbox's own secret as X-Daytona-Preview-Token, never
// the caller's credentials. Unless Config.AnyHost, only loopback Hosts are
// answered (DNS rebinding).
//
// Preview URLs use a path scheme so that they work on loopback without DNS:
// getPreviewLink(3000) answers http://<sim>/_preview/3000-<sandboxId>/. The
// host form that Daytona uses, <port>-<sandboxId>.<anything>, is routed too
// when a request arrives with such a Host header. Both proxies are
// provider/relay handlers over the simulator's own store, as the local
// daemon's previews are over its manager: the same code decides what counts
// as activity.
//
// Run serves a simulator as `sandplane sim` does: it applies the listen
// rules (any API key on loopback only), builds the backend (native, docker
// or none), prints what to export, and shuts down when its context ends.
//
// A Backend gives each sandbox a real workload: with a runtime backend
// process/execute runs a real command and preview URLs reach a real port;
// the none backend is a pure state machine for large, fast runs. The runtime
// backend brings workloads up through local/launcher, as the daemon does.
//
// Every timer runs on Config.Clock, and Config.Minute is the length of one
// interval minute. The job cadence and the activity timings (the 10 s jobs,
// the 5 s activity throttle, the proxy's 50 s re-bump and 45 s dedupe) scale
// with Minute, so shrinking Minute to a second turns a one-minute auto-stop
// into about a second of wall time. Transition delays come from the Profile
// and do not scale.
//
// Every API request is validated against the upstream OpenAPI document that
// ships inside the pinned api-client module, embedded in the binary
// (internal/specs). Optional Backend capabilities (ImageBackend,
// VolumeBackend, NetworkBackend, ResizeBackend) make snapshots, volumes,
// network settings and resize real; without them they are records, and the
// answer's X-Sandplane-Warning header says so. Where the real server and that
// document disagree, the simulator follows the server and lists the
// difference in SpecExceptions.
//
// The simulator is built of parts with one job each. internal/store keeps
// the sandbox records and their indexes (by id, by name, per organization
// in creation and activity order, by label, by link), with no HTTP and no
// backend; internal/cost is the cost ledger; internal/faults the scripted
// and random faults; internal/engine is the lifecycle (which step comes
// next, how long it takes, which cron is due, a step run on the clock);
// internal/backend runs the workloads (Backend and its capabilities, the
// runtime and docker backends, whose names this package re-exports). The
// reconciler (reconciler.go, jobs.go) applies that lifecycle to the records,
// with the backend doing each step's work; the handler
// groups (parts.go) serve the routes; the Simulator wires them and holds
// the store's lock.
package simulator
