// Package egress confines the connections a network namespace may open to
// a list of address blocks, as Daytona's networkAllowList does for a
// sandbox: new connections out to any other address are dropped, while
// loopback and the replies to connections made to the namespace (the
// toolbox answering its proxy) pass.
//
// The rules are one nftables table in the namespace itself, replaced
// whole in one atomic batch, so that a namespace is never seen half
// configured. Nothing inside a container without CAP_NET_ADMIN (which
// docker does not grant by default) can change them, and they end with
// the namespace: a container that restarts gets a new one, to be limited
// again. They filter what the namespace's IP stack sends: a process with
// CAP_NET_RAW could write packets around them (a packet socket skips the
// hooks), so whatever they confine must run without it.
//
// Loopback passes, and with it a resolver on loopback, such as docker's
// embedded DNS at 127.0.0.11 on user-defined networks: names are looked up
// by the engine, which is a channel out that these rules leave open.
//
// Setting them needs CAP_NET_ADMIN over the namespace and, to enter it,
// CAP_SYS_ADMIN: in practice root on the machine the namespace lives on.
package egress
