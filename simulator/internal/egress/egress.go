package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"os"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// table is the name of the table this package owns in a namespace.
const table = "sandplane_egress"

// Limit lets the network namespace at nsPath (/proc/PID/ns/net) open
// connections only to the addresses in allow, and over loopback; what it
// was allowed before is replaced. An empty allow leaves it loopback only.
func Limit(nsPath string, allow []netip.Prefix) error {
	return apply(nsPath, func(c *nftables.Conn, t *nftables.Table) {
		c.DelTable(t)
		c.AddTable(t)
		drop := nftables.ChainPolicyDrop
		out := c.AddChain(&nftables.Chain{
			Name: "output", Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &drop,
		})
		rules := [][]expr.Any{viaLoopback(), replies()}
		for _, p := range allow {
			rules = append(rules, to(p))
		}
		for _, r := range rules {
			c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: append(r, &expr.Verdict{Kind: expr.VerdictAccept})})
		}
	})
}

// Lift takes away what Limit set in the namespace at nsPath, if anything.
func Lift(nsPath string) error {
	return apply(nsPath, func(c *nftables.Conn, t *nftables.Table) { c.DelTable(t) })
}

// apply runs one batch in the namespace at nsPath: change adds its
// messages after one that makes sure the table exists, so that deleting
// it never fails for want of it.
func apply(nsPath string, change func(*nftables.Conn, *nftables.Table)) error {
	ns, err := os.Open(nsPath)
	if err != nil {
		return fmt.Errorf("open the network namespace: %w", err)
	}
	defer ns.Close()
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

// replies matches packets of connections already under way or related to
// one: those made to the namespace, and those it was allowed to open.
func replies() []expr.Any {
	return []expr.Any{
		&expr.Ct{Key: expr.CtKeySTATE, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
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
