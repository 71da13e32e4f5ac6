// Package launcher brings a workload up on a driver, the one way every
// sandbox of this module starts: take a port (a PortRange coordinated
// between daemons, or FreePorts), or one per port the workload declares in
// the sandbox, each told to it as PORT_<port>, complete and check the spec, start it,
// record its handle at once, and wait until it serves (an HTTP answer, the
// default of a sandbox; for a workload that speaks something else a TCP
// connect or the driver's Prober), with the end of its output when it does
// not. On failure nothing of it runs and its port is free again.
//
// The daemon's manager launches through it (local/manager, on a PortRange),
// and so does the simulator's runtime backend (FreePorts,
// ReadyHTTP("/version"), its own state directories through Spec.Dir), which
// words a *NotReadyError as the sandbox's errorReason.
package launcher
