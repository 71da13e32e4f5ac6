// Package secrets is the engine behind Daytona's organization secrets:
// a store of secrets whose values are write-only, the placeholders a
// sandbox sees in their stead, and the forward proxy that puts the
// values back into the requests a sandbox sends to the hosts each
// secret allows, and nowhere else.
//
// # Threat model
//
// The sandbox runs code its owner may not trust (an agent, a
// dependency), and a secret must be usable by that code without being
// readable by it.
//
// What a sandbox learns: the placeholder of each secret it mounts (in
// its env), the proxy's address and its own proxy token (in
// HTTP_PROXY/HTTPS_PROXY), and the CA certificate it is told to trust.
// None of them says anything of a value: a placeholder is 128 random
// bits after a fixed prefix, made when the secret is, and the same for
// every sandbox that mounts it, as Daytona's Secret.placeholder is.
//
// What it cannot learn: a value, by any means that does not go through
// an allowed host. The store returns a value to no caller; it leaves
// only by the proxy's substitution, and only into a request to a host
// that secret allows, from a sandbox that mounts it, authenticated by
// that sandbox's token: another sandbox's token gets its own secrets
// substituted, never this one's, even when it sends this placeholder.
// A request to any other host carries the placeholder unchanged. TLS to
// an allowed host is opened by the proxy with a leaf its CA signs for
// that host; TLS to every other host is tunnelled byte for byte, so the
// proxy neither reads it nor is able to put a value into it. The CA's
// key never leaves the simulator's process.
//
// What the model cannot prevent, and Daytona's cannot either: an
// allowed host that reflects what it received (an echo endpoint, an
// error quoting a header) hands the value back to the sandbox; so does
// a secret with no hosts, which the SDK documents as unrestricted and
// which the proxy therefore substitutes, and intercepts TLS, for every
// host. Choosing the hosts is the owner's part of the model.
//
// Limits: the proxy rewrites headers (a Basic Authorization decoded
// first) and bodies of up to Options.MaxBody bytes that carry no
// Content-Encoding; a larger or compressed body is streamed on
// untouched, so its placeholder reaches the allowed host as is. URLs
// are not rewritten. Intercepted connections speak HTTP/1.1. The proxy
// dials from the simulator's host: Options.Dial is where the simulator
// applies a sandbox's own network limits to what the proxy opens for
// it. Nothing in the package logs a value or a header; every type that
// holds a value prints, encodes and logs it as [REDACTED].
package secrets
