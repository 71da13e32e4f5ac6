// Package relay is the data-plane proxy in front of sandboxes of any
// provider.Provider: an http.Handler on httputil.ReverseProxy that routes to
// a sandbox's port and keeps the sandbox's idle clock honest.
//
// # Why
//
// Idle auto-stop is client-pushed (RefreshActivity), so whatever serves the
// sandbox's traffic must push it. Too little and an agent loses its sandbox
// mid-generation because a long response counted as nothing; too much, or for
// the wrong thing, and an open connection nobody uses keeps a forgotten
// sandbox running for days. The relay sees all the traffic, so it decides.
//
// # What Daytona's proxy does, and what the relay does
//
// Daytona's proxy calls UpdateLastActivity at the start of every preview and
// toolbox request, then every 50 s while the request or connection stays
// open, deduplicated per sandbox for 45 s, and skips both when the request
// carries X-Daytona-Skip-Last-Activity-Update: true. The relay keeps those
// semantics and scales them to the sandbox:
//
//   - Per request: a refresh unless the sandbox was refreshed (or a refresh
//     is under way) within its window, a third of its auto-stop interval, or
//     Daytona's 45 s dedupe when that is longer. A burst of ten thousand
//     requests sends one refresh per window.
//   - While open: every proxied request is an open connection of its sandbox
//     until its handler returns, WebSockets and other upgrades until either
//     side closes, SSE and chunked responses until they end. While one is
//     open, a heartbeat refreshes 10/9 of a window after the last refresh
//     (Daytona's 50 s at a one-minute interval). The last connection to
//     close stops the heartbeat at once, so a closed browser tab lets the
//     sandbox auto-stop on schedule.
//   - Time: the auto-stop interval is the sandbox's autoStopInterval times
//     the provider's interval minute (Info.Minute: a local daemon's --minute,
//     Daytona's minute). The 45 s and 50 s scale with that minute, so a
//     daemon run with --minute 1s behaves like Daytona in seconds. An
//     interval changed while a connection is open reaches its heartbeat
//     through the backend's event stream (an Invalidator): the relay
//     resolves the sandbox again, and a beat the new interval makes due
//     sooner is moved up. Without a stream, the change counts from the
//     next resolution.
//   - Skip header: X-Daytona-Skip-Last-Activity-Update: true means no
//     refresh and no heartbeat for that request; the header is not forwarded.
//     FromProvider's targets send it upstream instead: Daytona's proxy and
//     the local daemon count activity themselves, an open connection for as
//     long as it is open, so a relay in front of them tells them not to and
//     decides alone, its idle keep-alive limit included.
//   - Fire and forget: RefreshActivity runs in its own goroutine, bounded by
//     WithRefreshTimeout and WithMaxConcurrentRefreshes. A refresh
//     that fails, hangs or is skipped for the bound never fails, delays or
//     buffers the request. Failures are counted, logged at most once a minute
//     per sandbox, and retried by the next request or heartbeat after a tenth
//     of the window.
//   - Idle keep-alive limit (WithIdleKeepAlive, off by default): an open
//     connection that moved no bytes for that long stops counting, checked at
//     each heartbeat; traffic makes it count again, and the first byte after
//     a heartbeat skipped for idleness refreshes at once, since the next
//     beat may come after the auto-stop. This is the leaked
//     WebSocket that would otherwise keep a forgotten sandbox running forever.
//
// Responses stream: SSE and chunked answers are flushed as they arrive, and
// WebSocket upgrades pass through.
//
// # Routing
//
// By Host, as Daytona's <port>-<id>.<proxy domain>:
//
//	http://3000-<id>.localhost:4030/path   (*.localhost is loopback in browsers and curl)
//
// and by path for clients that cannot set a Host, on the relay's own host
// (WithDomain, localhost or a loopback address):
//
//	http://127.0.0.1:4030/3000-<id>/path   (the upstream sees /path)
//
// Host names are case-insensitive, so host routing reaches sandboxes whose id
// or name is lowercase; path routing takes any id. Path routing works for
// pages whose links are relative; absolute links leave the prefix.
// WithPathPrefix moves path routing under a prefix of the server's
// (the daemon serves /preview/<port>-<id>/ beside its API), and Domain "*"
// routes by the first label of any host, for a server that guards its Host
// names itself. Forward proxies a request its caller routed (a toolbox
// proxy under /toolbox/<id>/) the same way.
//
// # In the backend's process
//
// The daemon and the simulator serve their own previews through a relay
// whose Resolver reads their registry. There a refresh costs a write, not a
// call: WithDaytonaTiming keeps Daytona's 45 s and 50 s for every
// sandbox, InlineRefresh sends a request's refresh before proxying it (what
// the response shows is already refreshed), and negative timeouts and
// CacheTTL drop the per-request timers and the cache.
//
// A sandbox is resolved through the Resolver (FromProvider adapts any
// provider) and cached for WithCacheTTL, or until the backend's event
// stream (an Invalidator; FromProvider uses provider.Watcher when the provider
// has one) says the sandbox stopped, restarted, changed or went away: a local
// sandbox's port goes to the next sandbox, so a stale address must not
// outlive the stop by long. When the upstream refuses the
// connection or answers 502, the relay resolves again: a sandbox that is no
// longer started gets a 503 with a clear message at once, never a hang, and a
// sandbox that moved gets the request (if it has no body) at its new address,
// from then on an open connection of the sandbox it reached there.
// Errors are the project's JSON body {"error": {"code", "message"}}.
//
// # Private sandboxes
//
// A Target with a Token is private. A request passes with the token in
// X-Daytona-Preview-Token, or in the query parameter DAYTONA_SANDBOX_AUTH_KEY,
// which a browser opening a preview link carries. The relay answers that
// parameter with a cookie: sandplane_preview, HttpOnly, SameSite=Lax,
// host-only (a host-routed sandbox has a host of its own), Secure over TLS.
// A path route takes the header only: every path route shares the relay's
// origin (the daemon's, with its API), where a cookie or a link token would
// let one sandbox's page act as another's or as the daemon's. Its value is an HMAC of the
// sandbox id, port and token under the relay's key, so it never holds the
// token, opens nothing else, and dies with a rotated token. A browser
// navigation (Sec-Fetch-Mode: navigate) is redirected to the same address
// without the parameter, so the token leaves the address bar and history.
// Every sandbox under *.localhost is the same site, so SameSite alone would
// let a page of one sandbox send requests with another's cookie: the cookie
// counts only for a request that is not cross-origin (Sec-Fetch-Site, Origin)
// or is a top-level navigation. Path-routed sandboxes share one origin, so
// only host routing keeps browsers' sandboxes apart.
// The token, the parameter and the cookie never reach the upstream; the
// Target's Header (the preview token) is injected instead. The upstream sees
// its own Host, and an Origin that is the sandbox's own address becomes the
// upstream's, so a server that checks Origin against Host (WebSocket
// libraries do) accepts its own pages; a foreign Origin passes unchanged for
// the sandbox to refuse. Transport
// errors are reported by kind only: an upstream URL may hold a signed token.
//
// # Metrics
//
// Requests, refreshes sent (and by heartbeat), failed, skipped by reason, and
// open connections, as Stats. relaymetrics makes Prometheus collectors of
// them (sandplane_relay_*), apart so that this package links no Prometheus;
// WithMetricsPath serves the host's handler of them on the relay's own host.
//
// Every timer runs on the clock WithClock gives (clock.Real by default).
package relay
