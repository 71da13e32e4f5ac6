package netguard

import (
	"net"
	"net/netip"
)

// ListenLoopback reports whether addr, a host:port to listen on, is on
// loopback: an IP address of loopback (see the package's rules; no zone)
// or exactly the name localhost, which the system's resolver maps to
// loopback. Unlike a Host, a listen address is resolved by the system and
// not by a browser, so no other spelling of localhost is taken. The
// wildcard (":4025", "0.0.0.0:4025", "[::]:4025") and every other name are
// not loopback. err is net.SplitHostPort's, when addr is not host:port.
func ListenLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "localhost" {
		return true, nil
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.IsLoopback(), nil
}
