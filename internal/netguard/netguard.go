package netguard

import (
	"net/netip"
	"net/url"
	"strings"
)

// Class says how a host names loopback, if at all.
type Class int

const (
	// NotLoopback: a name or address that is not loopback, or a value
	// that names nothing.
	NotLoopback Class = iota
	// LoopbackIP: an IP address of loopback (127.0.0.0/8, ::1, or
	// IPv4-mapped 127.0.0.0/8).
	LoopbackIP
	// Localhost: the name localhost itself.
	Localhost
	// UnderLocalhost: a name under localhost, such as a preview's
	// 4000-abc.localhost.
	UnderLocalhost
)

// Loopback reports whether c is one of the loopback classes.
func (c Class) Loopback() bool { return c != NotLoopback }

// String names c, for tests and logs.
func (c Class) String() string {
	switch c {
	case LoopbackIP:
		return "loopback-ip"
	case Localhost:
		return "localhost"
	case UnderLocalhost:
		return "under-localhost"
	}
	return "not-loopback"
}

// Classify says how hostport, a Host header's value or a URL's authority
// without userinfo, names loopback. It never fails: a value that names
// nothing is NotLoopback.
func Classify(hostport string) Class {
	host, ip, ok := split(hostport)
	switch {
	case !ok:
		return NotLoopback
	case ip.IsValid():
		if ip.IsLoopback() {
			return LoopbackIP
		}
		return NotLoopback
	case host == "localhost":
		return Localhost
	case strings.HasSuffix(host, ".localhost"):
		return UnderLocalhost
	}
	return NotLoopback
}

// Hostname is the host of hostport as the rules compare it: without the
// port and the brackets of an IPv6 address, lowercased, with a trailing
// dot dropped from a name. ok is false when hostport names nothing (see
// the package's rules), and then host is "".
func Hostname(hostport string) (host string, ok bool) {
	host, _, ok = split(hostport)
	return host, ok
}

// OriginClass says how the host of origin, an Origin header's value, names
// loopback; NotLoopback unless origin is scheme://host[:port] with scheme
// http or https. Callers that serve pages they do not trust under
// localhost (previews) take only LoopbackIP and Localhost: see
// LoopbackOrigin.
func OriginClass(origin string) Class {
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.User != nil ||
		u.Opaque != "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return NotLoopback
	}
	return Classify(u.Host)
}

// LoopbackOrigin reports whether origin is a page on a loopback address or
// on localhost itself. A page under localhost is not: previews serve
// sandboxes' own pages there, which must not drive what serves them.
// "null" is not either.
func LoopbackOrigin(origin string) bool {
	c := OriginClass(origin)
	return c == LoopbackIP || c == Localhost
}

// split parses hostport by the package's rules. host is the normalised
// host; ip is set when it is an IP address.
func split(hostport string) (host string, ip netip.Addr, ok bool) {
	host, port, ok := cutPort(hostport)
	if !ok || !isPort(port) {
		return "", netip.Addr{}, false
	}
	if v6, isV6 := strings.CutPrefix(host, "["); isV6 {
		a, err := netip.ParseAddr(strings.TrimSuffix(v6, "]"))
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", netip.Addr{}, false
		}
		return a.String(), a, true
	}
	if a, err := netip.ParseAddr(host); err == nil {
		// No colon got this far, so a is IPv4 in its canonical form.
		return a.String(), a, true
	}
	// Lowercased byte by byte: strings.ToLower would turn the Kelvin sign
	// into a k, and a name no browser sends into one the rules take.
	host = strings.TrimSuffix(asciiLower(host), ".")
	if !isName(host) {
		return "", netip.Addr{}, false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return "", netip.Addr{}, false // 127.0.0.1. : an address is no name
	}
	return host, netip.Addr{}, true
}

// cutPort splits host[:port] and [v6][:port]; the host keeps its
// brackets. ok is false for more than one colon outside brackets, or
// brackets anywhere but around the whole host.
func cutPort(hostport string) (host, port string, ok bool) {
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return "", "", false
		}
		host, rest := hostport[:end+1], hostport[end+1:]
		if rest == "" {
			return host, "", true
		}
		port, ok = strings.CutPrefix(rest, ":")
		return host, port, ok
	}
	host, port, _ = strings.Cut(hostport, ":")
	if strings.ContainsAny(port, ":") || strings.ContainsAny(host, "[]") {
		return "", "", false
	}
	return host, port, true
}

// isPort reports whether port is empty or at most five digits (RFC 3986
// allows an empty port; Host headers carry one now and then).
func isPort(port string) bool {
	if len(port) > 5 {
		return false
	}
	for _, c := range []byte(port) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// asciiLower lowercases the ASCII letters of s and nothing else.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// isName reports whether host, lowercased and without its trailing dot, is
// a DNS name of non-empty labels of letters, digits, '-' and '_'. A
// browser sends any other name in its punycode form.
func isName(host string) bool {
	if host == "" || len(host) > 253 {
		return false
	}
	for label := range strings.SplitSeq(host, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range []byte(label) {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
