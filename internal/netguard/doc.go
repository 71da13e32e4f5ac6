// Package netguard holds the network rules that keep a server on loopback
// out of reach of web pages on other names: which Host and Origin header
// values name loopback, and which listen addresses are loopback. The
// daemon, the toolbox, the relay and the simulator all ask it, so that they
// give one answer for each edge case.
//
// The rules, and why:
//
//   - A Host is host[:port], the port all digits (possibly empty), an IPv6
//     address in brackets. Anything else (two colons without brackets,
//     brackets around a name, a zone, a port that is not a number) names
//     nothing and is refused.
//   - Names are compared lowercased, with one trailing dot dropped:
//     "LOCALHOST", "localhost." and "localhost" are the same name (RFC 6761
//     reserves localhost., and browsers and resolvers pin it to loopback).
//   - localhost and the names under it (4000-abc.localhost, each label
//     non-empty, of letters, digits, '-' and '_') are loopback: browsers
//     resolve them themselves, so no DNS answer can rebind them.
//   - IP addresses are loopback when they are in 127.0.0.0/8, are ::1, or
//     are IPv4-mapped IPv6 of 127.0.0.0/8 ([::ffff:127.0.0.1]): each of
//     those connects to this host whatever DNS says.
//   - Only the canonical dotted-quad form of an IPv4 address is an address.
//     127.1, 0x7f.1, 017700000001 and 127.0.0.1. are refused. A browser
//     normalises each of them to 127.0.0.1 before it sends a Host or an
//     Origin (the WHATWG URL standard's IPv4 parser), so refusing them
//     turns away no browser; a hand-made client can say 127.0.0.1. Taking
//     them would mean a second IPv4 parser whose answers no resolver
//     agrees on.
//   - An Origin is loopback when its scheme is http or https and its host
//     is an IP address of loopback or localhost itself: not a name under
//     localhost, which is where previews serve sandboxes' own pages, and
//     not "null" (a file, a sandboxed frame, a redirect across sites).
//   - A listen address is loopback when its host is an IP address of
//     loopback or exactly localhost (ListenLoopback).
//
// Behaviour that changed when the four copies became this one: the daemon
// takes localhost. and names under localhost with a trailing dot as its own
// (it refused the first and took the second); the toolbox no longer takes
// brackets around a name ("[localhost]") or an unbalanced bracket, nor an
// Origin under localhost (a preview page); the relay and the toolbox refuse
// "127.0.0.1." and a Host whose port is not a number; every copy refuses an
// unbracketed IPv6 Host ("::1") and a zone.
package netguard
