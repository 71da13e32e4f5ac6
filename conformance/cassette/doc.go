// Package cassette records the HTTP exchanges of a conformance run against a
// real backend and replays them with no network, in the manner of
// go-cloud's -record flag.
//
// A cassette is a file of JSON lines: a protocol stream. The first line is
// the Manifest: the format and its version, what was recorded, and the
// stream's statistics (frame and error counts, decoded payload bytes,
// stored bytes, the largest frame and its seq, stored bytes per frame
// kind) with the SHA-256 of every line after it. Each following line is one
// Frame: a request and either its response or the transport error it ended
// in. A version 1 manifest, which has no statistics, is still read.
//
// A cassette has limits: no request or response body above MaxPayload (8
// MiB) decoded, no tape above MaxTape (256 MiB). A Recorder fails the
// request that would break one, and Encode and Decode refuse a cassette
// that does, naming the frame and the limit.
//
// What a recording writes is normalised, so that a cassette holds no secret
// and reads the same from one recording to the next. Secrets both sides
// know (the Authorization credential, API keys, the values of every env
// map a request sends) become [SCRUBBED] wherever they appear, in a
// recording and in a replay alike. Credentials the backend hands out
// (preview, toolbox, auth and SSH tokens in JSON, a signed URL's signature
// parameters, credential headers) become numbered placeholders of their
// kind, scrubbed-token-1, scrubbed-signature-1, scrubbed-header-1, the same
// one wherever the same value comes back, so that a replay that sends one
// back sends what the cassette holds. Paths under the home directory of
// the machine become ${REPLAY_HOME}, in a recording and a replay alike.
// UUIDs become stable placeholders in order of appearance; timestamps are
// rebased onto a fixed epoch, keeping their order and their distances; the
// backend's address and the run id become fixed placeholders. Replay
// scrubs the live requests the same way and compares them with the
// recorded ones byte for byte.
//
// A recording fails closed: a frame that still holds a credential of a
// shape the normalizer knows, or any secret or token it scrubbed, is an
// error of the Recorder (Err) naming the frame and the field, and Encode
// and Decode refuse such a frame too (see Leaks).
//
// A Replayer fails closed: a request that differs from the next recorded
// one, one too many, one left unmade at the end (Finish, run from the
// test's Cleanup, names them), or a file whose hash, counts or statistics
// do not match fails the test.
package cassette
