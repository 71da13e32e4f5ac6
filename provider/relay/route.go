package relay

import (
	"net"
	"strconv"
	"strings"

	"github.com/sandplane/sandplane/internal/netguard"
)

// route is where a request is going: port of sandbox id.
type route struct {
	port int
	id   string
	// prefix is "/<port>-<id>" for a path-routed request, "" for a
	// host-routed one. The upstream sees the path without it.
	prefix string
}

// routeKey identifies a cache entry: the sandbox as the address names it
// (an id or a name) and the port.
type routeKey struct {
	id   string
	port int
}

func (r route) key() routeKey { return routeKey{r.id, r.port} }

// maxIDLen bounds the sandbox part of an address: local ids and names take at
// most 63 characters, Daytona's ids are UUIDs, and nothing longer is looked up.
const maxIDLen = 128

// parseLabel reads "<port>-<id>": a port 1-65535 written without leading
// zeros, a dash, and an id of letters, digits, '_', '.' and '-' that starts
// with a letter or digit.
func parseLabel(label string) (port int, id string, ok bool) {
	digits, id, found := strings.Cut(label, "-")
	if !found || len(digits) == 0 || len(digits) > 5 || digits[0] == '0' {
		return 0, "", false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, "", false
		}
	}
	port, err := strconv.Atoi(digits)
	if err != nil || port < 1 || port > 65535 || !validID(id) {
		return 0, "", false
	}
	return port, id, true
}

func validID(id string) bool {
	if len(id) == 0 || len(id) > maxIDLen || !isAlnum(id[0]) {
		return false
	}
	for i := 1; i < len(id); i++ {
		if c := id[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// hostname returns the host of a Host header without its port and trailing
// dot, lowercased.
func hostname(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// anyDomain is the Domain that routes by the first label of any host.
const anyDomain = "*"

// parseHost routes a request by its Host, "<port>-<id>.<domain>[:port]", as
// Daytona's proxy does. The id is lowercase: browsers lowercase host names.
func parseHost(host, domain string) (route, bool) {
	h := hostname(host)
	var label string
	var ok bool
	if domain == anyDomain {
		label, _, ok = strings.Cut(h, ".")
		ok = ok && !strings.HasSuffix(h, ".")
	} else {
		label, ok = strings.CutSuffix(h, "."+domain)
	}
	if !ok || strings.Contains(label, ".") {
		return route{}, false
	}
	port, id, ok := parseLabel(label)
	if !ok {
		return route{}, false
	}
	return route{port: port, id: id}, true
}

// parsePath routes a request by the first segment of its escaped path,
// "/<port>-<id>" followed by "/" or nothing. rest is what follows the
// segment ("" when nothing does).
func parsePath(escapedPath string) (r route, rest string, ok bool) {
	p, found := strings.CutPrefix(escapedPath, "/")
	if !found {
		return route{}, "", false
	}
	label := p
	if i := strings.IndexByte(p, '/'); i >= 0 {
		label, rest = p[:i], p[i:]
	}
	port, id, ok := parseLabel(label)
	if !ok {
		return route{}, "", false
	}
	return route{port: port, id: id, prefix: "/" + label}, rest, true
}

// isOwnHost reports whether a Host names the relay itself (its domain,
// localhost or a loopback address, by netguard's rules) rather than
// something that rebinds to it. With anyDomain, every host that routes to
// no sandbox is the relay's own: its server's Host guard has already said
// which it answers.
func isOwnHost(host, domain string) bool {
	if domain == anyDomain {
		return true
	}
	if c := netguard.Classify(host); c == netguard.Localhost || c == netguard.LoopbackIP {
		return true
	}
	return hostname(host) == domain
}
