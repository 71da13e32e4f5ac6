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
// misbehaving backend holds whatever it answered. Decode must never panic,
// and what it accepts must be a cassette that encodes back to itself.
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
	f.Fuzz(func(t *testing.T, body []byte, frames, errs int) {
		m := Manifest{Format: Format, Version: Version, Frames: frames, Errors: errs}
		sum := sha256.Sum256(body)
		m.SHA256 = hex.EncodeToString(sum[:])
		head, err := json.Marshal(m)
		require.NoError(t, err)

		got, decoded, err := Decode(append(append(head, '\n'), body...))
		if err != nil {
			return
		}
		require.Len(t, decoded, got.Frames)
		again, err := Encode(got, decoded)
		require.NoError(t, err, "what Decode accepts, Encode writes")
		m2, redecoded, err := Decode(again)
		require.NoError(t, err, "and reads back")
		require.Equal(t, got.Frames, m2.Frames)
		require.Equal(t, got.Errors, m2.Errors)
		require.Equal(t, decoded, redecoded)
	})
}
