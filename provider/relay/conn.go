package relay

import "io"

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

func (b *countingConn) Write(p []byte) (int, error) {
	n, err := b.ReadWriteCloser.Write(p)
	b.c.add(n)
	return n, err
}
