// Package serve runs an HTTP server on a listener until a context ends,
// then shuts it down gracefully: the loop the daemon, the simulator and
// `sandplane relay` share, written once so that each stops the same way.
//
// Shutting down, in order: the listener closes, so new connections are
// refused; with WithCancelRequests the requests' contexts end, so that
// streams (event feeds) finish instead of holding the grace period; the
// requests in flight get the grace period to finish; what is left then is
// closed (open streams and WebSockets end there).
package serve
