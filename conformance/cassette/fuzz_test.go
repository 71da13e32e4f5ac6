package cassette

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzDecode feeds Decode frame lines under a manifest whose hash matches
// them, so that the fuzzer gets past the hash check and into the frames: a
// cassette is read from a file anyone can edit, and a recording of a
// misbehaving backend holds whatever it answered. The manifest is of
// version 1, which carries no statistics for the fuzzer to guess; what
// Decode accepts is then checked under a version 2 manifest with the
// statistics Decode filled in. Decode must never panic, and what it
// accepts must be a cassette that encodes to the same frames, counts and
// payload bytes, and whose encoding is a fixed point.
func FuzzDecode(f *testing.F) {
	good, err := Encode(Manifest{Provider: "sim", Test: "t", Minute: "1s"}, sampleFrames())
	require.NoError(f, err)
	_, body, _ := bytes.Cut(good, []byte("\n"))
	f.Add(body, 2, 1)
	f.Add(body, 2, 0)
	f.Add([]byte(""), 0, 0)
	f.Add([]byte("{}\n"), 1, 0)
	f.Add([]byte(`{"seq":1,"request":{"method":"GET","url":"u"},"response":{"status":200},"error":{"kind":"dial"}}`+"\n"), 1, 1)
	f.Add([]byte(`{"seq":1,"request":{},"response":{"status":200},"extra":1}`+"\n"), 1, 0)
	f.Add([]byte(`{"seq":1,"request":{"method":"GET","url":"http://api.invalid/_preview/3000-scrubbed-token-1/x"},"response":{"status":200,"body":"base64:AAE="}}`+"\n"), 1, 0)
	f.Add([]byte(`{"seq":1,"request":{"method":"GET","url":"u"},"response":{"status":200,"body":"{\"token\":\"abcdef123456\"}"}}`+"\n"), 1, 0)
	f.Fuzz(func(t *testing.T, body []byte, frames, errs int) {
		got, decoded, err := Decode(withManifest(t, Manifest{Format: Format, Version: 1, Frames: frames, Errors: errs}, body))
		if err != nil {
			return
		}
		require.Len(t, decoded, got.Frames)
		v2 := got
		v2.Version = Version
		m2, redecoded, err := Decode(withManifest(t, v2, body))
		require.NoError(t, err, "a version 1 cassette Decode accepts reads as version 2 with the statistics it filled in")
		require.Equal(t, v2, m2)
		require.Equal(t, decoded, redecoded)

		again, err := Encode(got, decoded)
		require.NoError(t, err, "what Decode accepts, Encode writes")
		m3, redecoded, err := Decode(again)
		require.NoError(t, err, "and reads back")
		require.Equal(t, decoded, redecoded)
		// The stored sizes are of the lines as written, which Encode may
		// write otherwise than the input did; the rest is the stream's.
		require.Equal(t, [3]int64{int64(v2.Frames), int64(v2.Errors), v2.PayloadBytes}, [3]int64{int64(m3.Frames), int64(m3.Errors), m3.PayloadBytes})
		thrice, err := Encode(m3, redecoded)
		require.NoError(t, err)
		require.Equal(t, again, thrice, "what Encode writes, it writes again the same")
	})
}

// withManifest puts m, its hash set to body's, over body.
func withManifest(t *testing.T, m Manifest, body []byte) []byte {
	t.Helper()
	sum := sha256.Sum256(body)
	m.SHA256 = hex.EncodeToString(sum[:])
	head, err := json.Marshal(m)
	require.NoError(t, err)
	return append(append(head, '\n'), body...)
}
