package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"os"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

const (
	// table is the name of the table this package owns in a namespace.
	table = "sandplane_egress"
	// ctDirReply is conntrack's IP_CT_DIR_REPLY: a packet that answers.
	ctDirReply = 1
)

// Limit lets the network namespace ns (an open /proc/PID/ns/net or the
// file an engine keeps it by) send only to the addresses in allow: every
// packet out must go over loopback, answer a connection made to the
// namespace, find its neighbours (IPv6), or be for allow. What it was
// allowed before is replaced, and a connection it opened to an address no
// longer allowed goes no further. An empty allow leaves it loopback only.
func Limit(ns *os.File, allow []netip.Prefix) error {
	return apply(ns, func(c *nftables.Conn, t *nftables.Table) {
		c.DelTable(t)
		c.AddTable(t)
		drop := nftables.ChainPolicyDrop
		out := c.AddChain(&nftables.Chain{
			Name: "output", Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &drop,
		})
		rules := [][]expr.Any{viaLoopback(), replies(), neighbourDiscovery()}
		for _, p := range allow {
			rules = append(rules, to(p))
		}
		for _, r := range rules {
			c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: append(r, &expr.Verdict{Kind: expr.VerdictAccept})})
		}
	})
}

// Lift takes away what Limit set in the namespace ns, if anything.
func Lift(ns *os.File) error {
	return apply(ns, func(c *nftables.Conn, t *nftables.Table) { c.DelTable(t) })
}

// apply runs one batch in the namespace ns: change adds its messages after
// one that makes sure the table exists, so that deleting it never fails
// for want of it.
func apply(ns *os.File, change func(*nftables.Conn, *nftables.Table)) error {
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Fd())))
	if err != nil {
		return fmt.Errorf("connect to nftables in the network namespace: %w", err)
	}
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: table}
	c.AddTable(t)
	change(c, t)
	if err := c.Flush(); err != nil {
		if errors.Is(err, unix.EPERM) {
			return fmt.Errorf("set the namespace's firewall rules: %w (it takes root on the machine the namespace is on)", err)
		}
		return fmt.Errorf("set the namespace's firewall rules: %w", err)
	}
	return nil
}

// viaLoopback matches packets out through lo.
func viaLoopback() []expr.Any {
	name := make([]byte, unix.IFNAMSIZ)
	copy(name, "lo")
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: name},
	}
}

// replies matches packets that answer a connection made to the namespace
// (the toolbox answering its proxy): the reply direction of a tracked
// connection. The namespace's own connections go out in the original
// direction, so each packet of theirs must be for an allowed address, and
// stops being let through when its address is no longer allowed.
func replies() []expr.Any {
	return []expr.Any{
		&expr.Ct{Key: expr.CtKeyDIRECTION, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{ctDirReply}},
	}
}

// neighbourDiscovery matches IPv6's router and neighbour solicitations and
// advertisements (ICMPv6 types 133 to 136), which carry no connection
// state and without which no IPv6 address, allowed or not, is reached.
func neighbourDiscovery() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV6}},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_ICMPV6}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: []byte{133}, ToData: []byte{136}},
	}
}

// to matches packets whose destination is in p.
func to(p netip.Prefix) []expr.Any {
	p = p.Masked()
	// Where each header holds the destination address.
	proto, offset := byte(unix.NFPROTO_IPV4), uint32(16)
	if p.Addr().Is6() {
		proto, offset = unix.NFPROTO_IPV6, 24
	}
	addr := p.Addr().AsSlice()
	mask := make([]byte, len(addr))
	for i := range p.Bits() {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: uint32(len(addr))},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: uint32(len(addr)), Mask: mask, Xor: make([]byte, len(addr))},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: addr},
	}
}
