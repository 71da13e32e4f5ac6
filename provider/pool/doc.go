// Package pool keeps the sandbox of a conversation warm between its turns,
// on any provider.Provider, without paying for idle machines or leaking them.
//
// A host server calls Acquire at the start of a turn with the
// conversation's key and Release at its end. Acquire hands out, in order of
// preference, the key's sandbox parked running (PathWarm), its sandbox
// parked stopped, started again (PathResumed), or a new one (PathCreated),
// and reports how long each stage took. Release parks the sandbox running
// for a keep-warm TTL, then stops it; deletion is left to the provider's own
// auto-delete timer where it has one (provider.AutoDeleter, Daytona) and
// done by the pool after a parked-stopped TTL where it has not (local).
// Auto-stop and auto-delete are set on every sandbox the pool creates, so a
// host that crashes leaks nothing for long; auto-archive never is. Every
// timer and the warm cap can be overridden from the environment (EnvKeepWarm
// and the others; an option in code wins).
//
// Leak safety is a property of the design: the self-reaping timers are set
// at create; the pool refreshes the activity of a sandbox only while a turn
// holds it, and only up to WithMaxLease (then the lease is LeaseExpired and
// the provider's auto-stop takes over), so it never keeps a parked sandbox
// alive by polling it; and VerifyEmpty lists what of a pool is still live,
// the check the pool's tests run after every Shutdown.
//
// Three invariants hold whatever the provider does:
//
//   - Active turns are never blocked: Acquire never waits for nor refuses a
//     sandbox because other turns are active. The warm cap (WithWarmCap,
//     default 20) bounds only idle sandboxes parked running: a turn that
//     ends when every warm slot is taken evicts the least recently parked
//     warm sandbox (stopped, never deleted) to take its slot, and parks
//     stopped when none can be evicted. A stop that hangs keeps its sandbox
//     counted until a poll of the real state confirms it.
//   - A parked sandbox is handed out again only when its spec fingerprint
//     (snapshot, runtime, env, labels, resources: a keyed hash, since env
//     values are secrets) matches the request and the caller's Check passes.
//   - The key's pointer to its sandbox lives in a Store, replaced only by
//     compare-and-set on a generation number, so a turn that lost its key
//     (to a newer turn, or to Shutdown) can never overwrite the pointer of the
//     turn that holds it.
//
// Every teardown carries a Reason, is logged, told to the pool's Observer
// (poolmetrics counts it for Prometheus), and on providers that
// record why a sandbox stopped (provider.ReasonStopper) shows in its
// sandbox.stopped event as "pool: <reason>". A lost sandbox is told from a
// slow provider: only a terminal answer (not found, destroyed, error) makes
// the pool forget a sandbox; a transient one (unavailable, 429, 5xx,
// mid-transition) keeps it for the next try.
//
// Every timer runs on provider/clock, so tests drive the pool on a fake
// clock; pooltest has an in-memory provider that can hang, fail and change
// state underneath the pool.
package pool
