// Package wire holds the JSON bodies of the toolbox API: the requests the
// toolbox server (package toolbox) reads and the answers it writes, which
// toolbox/client sends and decodes. Field names and JSON tags are those of
// Daytona's toolbox daemon (v0.190.0, plus what later releases added, each
// marked where it is declared), so that a body either side writes is what
// the official SDKs read.
//
// The package imports nothing but the standard library: a client links
// these types without the server that answers them, and a test in
// internal/depgraph keeps it so.
package wire
