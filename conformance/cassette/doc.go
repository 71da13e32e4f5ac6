// Package cassette records the HTTP exchanges of a conformance run against a
// real backend and replays them with no network, in the manner of
// go-cloud's -record flag.
//
// A cassette is a file of JSON lines. The first line is the Manifest: the
// format and its version, what was recorded, the counts, and the SHA-256 of
// every line after it. Each following line is one Frame: a request and
// either its response or the transport error it ended in.
//
// What a recording writes is normalised, so that a cassette holds no secret
// and reads the same from one recording to the next: the Authorization
// header, API keys and the values of every env map a request sends are
// scrubbed wherever they appear; UUIDs become stable placeholders in order of
// appearance; timestamps are rebased onto a fixed epoch, keeping their order
// and their distances; the backend's address and the run id become fixed
// placeholders. Replay scrubs the live requests the same way and compares
// them with the recorded ones byte for byte.
//
// A Replayer fails closed: a request that differs from the next recorded
// one, one too many, one left unmade at the end, or a file whose hash or
// counts do not match fails the test.
package cassette
