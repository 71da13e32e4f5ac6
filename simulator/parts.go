package simulator

// The simulator's jobs beyond the wiring are types of their own over it:
// the handler groups (sandboxAPI and creation in api.go, listAPI,
// snapshotAPI, volumeAPI, extraAPI, proxyAPI, adminAPI) and the reconciler
// (reconciler.go, jobs.go), beside the parts under internal/ (store, cost,
// faults, engine, backend). Each reaches the simulator's state through it,
// under its store lock, so that a file reads as one job and the Simulator
// keeps the wiring.

// part adapts a handler of a group to the route table.
func part[G any](group func(*Simulator) G, h func(G, *call) (reply, *apiError)) handlerFunc {
	return func(s *Simulator, c *call) (reply, *apiError) { return h(group(s), c) }
}
