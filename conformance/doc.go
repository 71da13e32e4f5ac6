// Package conformance holds every provider to the same contract: one table of
// scenarios, run unchanged against each provider, each scenario in a fresh
// harness.
//
//	func TestMyProvider(t *testing.T) {
//		conformance.Run(t, func(ctx context.Context, t *testing.T) (conformance.Harness, error) {
//			return &conformance.Static{...}, nil
//		})
//	}
//
// In this repository, go test ./conformance runs the suite against every
// provider this machine can run: the local control plane on native
// processes, the same on Docker when an engine answers, the simulator behind
// daytona.Provider, and the recorded simulator runs from testdata. Pick one
// with -provider=local|docker|sim|daytona|replay. -provider=daytona is the
// staging spot-check against the real service (DAYTONA_API_KEY and friends);
// it labels every sandbox with the run id and deletes them all at the end,
// failed or not. -record writes the HTTP exchanges of a sim or daytona run to
// testdata/<provider>/<scenario>.replay (see package cassette), which
// -provider=replay runs with no network.
//
// Time: a harness reports the length of its backend's interval minute, and
// scenarios derive every wait from it. They never sleep a fixed time: they
// poll a bounded number of times, a fixed fraction of the minute apart, so
// that a replay makes exactly the recorded requests. Local and simulated
// backends run with a shrunk minute; the real service with real minutes.
//
// The suite runs commands in sandboxes through provider.Toolboxer (and reads
// files back through the toolbox in the preview scenario), so a provider
// under test implements it.
//
// Preview traffic as activity (a stream or WebSocket held open through the
// relay keeps a sandbox started, a burst of ten thousand requests sends a
// handful of refreshes, an idle WebSocket stops counting past the keep-alive
// limit) is TestRelayActivity, run on the backends that serve previews
// through provider/relay themselves: the local daemon, native and on Docker,
// and the simulator. Those cases hold connections open for minutes and send
// more requests than a cassette should hold, so they are not scenarios.
//
// Differences between backends are never accidents: a harness states the
// Traits its provider must report, and the scenarios check the behaviour
// each trait describes. The optional capabilities (TTL, auto-pause,
// secrets) have a scenario each, skipped with its reason where the trait
// is false, after checking that a create asking for the capability answers
// unsupported there. The secrets scenario also needs a secret the harness
// made in the backend (Expectations.Secret), whose value it never sends.
package conformance
