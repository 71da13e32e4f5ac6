package secrets

import (
	"fmt"
	"net"
	"regexp"
	"strings"
)

// The SDK documents a host as a hostname or a "*." wildcard, without a
// port; a label is what DNS allows in a hostname.
var label = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

const maxHostLen = 253

// normalizeHosts checks a secret's allowed hosts and returns them
// lower-cased, without a trailing dot and without duplicates, in the
// order given.
func normalizeHosts(hosts []string) ([]string, error) {
	out := make([]string, 0, len(hosts))
	seen := map[string]bool{}
	for _, h := range hosts {
		n, err := normalizeHost(h)
		if err != nil {
			return nil, err
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}

func normalizeHost(h string) (string, error) {
	n := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
	name := strings.TrimPrefix(n, "*.")
	if n == "" || len(n) > maxHostLen || strings.Contains(name, "*") {
		return "", fmt.Errorf("%w: host %q is not a hostname or a *. wildcard", ErrInvalid, h)
	}
	for _, l := range strings.Split(name, ".") {
		if !label.MatchString(l) {
			return "", fmt.Errorf("%w: host %q is not a hostname or a *. wildcard (ports are not supported)", ErrInvalid, h)
		}
	}
	return n, nil
}

// hostOf is the name a request or CONNECT is for, lower-cased and
// without port or trailing dot, which is what allowed hosts match.
func hostOf(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// allows says whether a secret with these allowed hosts may be sent to
// host. No hosts means unrestricted, as the SDK documents; "*.x.com"
// matches any name under x.com, at any depth, but not x.com itself.
func allows(hosts []string, host string) bool {
	if len(hosts) == 0 {
		return true
	}
	for _, h := range hosts {
		if suffix, ok := strings.CutPrefix(h, "*"); ok {
			if strings.HasSuffix(host, suffix) && len(host) > len(suffix) {
				return true
			}
		} else if h == host {
			return true
		}
	}
	return false
}
