package relay

import (
	"errors"
	"io"
)

// countingBody counts the bytes read through a request or response body.
// It implements no ReaderFrom or WriterTo, so copies go through Read.
type countingBody struct {
	io.ReadCloser
	c *conn
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.add(n)
	return n, err
}

// countingConn counts both directions of an upgraded connection, which the
// ReverseProxy reads from and writes to as the response body.
type countingConn struct {
	io.ReadWriteCloser
	c *conn
}

func (b *countingConn) Read(p []byte) (int, error) {
	n, err := b.ReadWriteCloser.Read(p)
	b.c.add(n)
	return n, err
}

// Write counts p as it hands it on, not once the write returns: by then
// the upstream may have answered and the client seen the answer, and a
// heartbeat between the two would count this exchange's bytes in the next
// interval, as if the connection had been busy while it idled. p was read
// from the client whole, so it is traffic either way.
func (b *countingConn) Write(p []byte) (int, error) {
	b.c.add(len(p))
	return b.ReadWriteCloser.Write(p)
}

// CloseWrite passes a client's half-close on to the upstream, as the
// ReverseProxy does for an upgraded body that can; without it the proxy
// would end both directions at the client's EOF, and lose what the
// upstream still had to send.
func (b *countingConn) CloseWrite() error {
	if cw, ok := b.ReadWriteCloser.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported // the proxy then ends both directions, as before
}
