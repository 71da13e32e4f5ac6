// Package daytona is a provider.Provider for Daytona (v0.190.0), on the
// official Go api-client. The same provider drives the sandplane simulator
// (`sandplane sim`), which speaks the same API.
//
//	p, err := daytona.New(daytona.FromEnv()) // DAYTONA_API_KEY, DAYTONA_API_URL, DAYTONA_TARGET
//	p, err := provider.Open(ctx, "daytona://")
//
// What the Provider contract asks for and Daytona does not do by itself, the
// provider does on the injected clock: Create and Start return once the
// sandbox is started, Stop once it is stopped, Delete once the sandbox is
// gone; a sandbox that lands in error or build_failed fails the wait at once
// with its errorReason. Transient failures (429 with Retry-After, 5xx,
// refused or reset connections) are retried with backoff, except that a
// create, start, stop or delete whose request may have reached the server is
// never sent again blindly: the provider reads the sandbox back first (a
// create by its name, and only when it has one) and carries on from what it
// finds.
//
// Daytona's native answers are classified in two functions: mapState for
// states and classify for errors. A 404, 409, 400 and 401 become not_found,
// failed_precondition, invalid_argument and unauthenticated, with the
// server's message kept, refined where the Provider contract names a more
// precise code for the same situation:
//
//   - a 409 on create is a name conflict: already_exists;
//   - a 400 on start or stop refuses a state ("not in a stoppable state",
//     "errored state"): failed_precondition, as the contract says for a stop
//     of a stopped sandbox;
//   - a 400 "Sandbox failed to start" is create_failed, an unknown snapshot
//     preflight_failed;
//   - a 404 for a route the server does not have (resize behind Daytona's
//     SANDBOX_RESIZE flag) is unsupported;
//   - an HTML answer means DAYTONA_API_URL lacks its /api suffix:
//     invalid_argument, saying so.
//
// Where Daytona differs from the local control plane (see Traits):
//
//   - stopping a stopped sandbox is failed_precondition (Daytona answers 400);
//   - Stop waits for stopped, so it is synchronous for the caller (SyncStop);
//   - auto-stop runs every 10 s, a sixth of a minute (ReapIntervalMinutes);
//   - Resize is real when the organization has resize enabled, unsupported
//     otherwise;
//   - EntrypointLogs reads the entrypoint session of the sandbox's toolbox
//     (what the snapshot's entrypoint printed) and redacts the sandbox's env
//     values, as the local control plane does; a toolbox older than the
//     entrypoint session is unsupported;
//   - an auto-stopped sandbox carries no errorReason: Daytona does not record
//     why a sandbox stopped;
//   - PreviewURL returns a signed preview URL (the token is in the URL, so it
//     needs no header, and Preview.Token is empty) that expires after the
//     preview TTL (WithPreviewTTL, one hour by default); port 0 is
//     invalid_argument, because a Daytona sandbox has no port of its own;
//   - Sandbox.Runtime is left empty: Daytona runs its own containers, which
//     are neither of the local runtimes;
//   - Create rejects a caller-chosen Id and a Runtime (invalid_argument):
//     Daytona assigns ids and picks its own runtime.
//
// Daytona v0.205.1's newer capabilities are provider's optional interfaces
// (Traits TTL, AutoPause, Secrets, WarmPools): TTLSetter, AutoPauser,
// SecretsAttacher and WarmPooler, and CreateRequest's TTLMinutes,
// AutoPauseInterval and Secrets. The pinned api-client (v0.190.0) has
// neither their routes nor their fields, so the create sends the fields in
// the client's AdditionalProperties, in the shape SDK 0.218 sends them
// (secrets as one-entry {ENV: secretName} objects), and the routes go
// through raw, the one place that calls Daytona without the client, with
// the client's HTTP client, server URL, headers and key. A server older
// than v0.205.1 answers their routes with NestJS's "Cannot" 404, which
// classify makes unsupported. A paused sandbox is StatePaused; its toolbox
// is given, because Daytona's proxy resumes it for the first request.
// classify also refines: a 404 "Secret ..." is preflight_failed on create
// and invalid_argument on SetSecrets (the secret is missing, not the
// sandbox), and an interval setter refused for the sandbox's other
// intervals (auto-stop and auto-pause both on, auto-pause on an ephemeral
// sandbox) is failed_precondition. EntrypointLogs goes through rawAt too,
// to the sandbox's toolbox behind Daytona's proxy, after reading the
// sandbox: a 404 there is a toolbox without the entrypoint session,
// unsupported.
package daytona
