package secrets

import (
	"fmt"
	"log/slog"
)

// redacted is what every printing of a Value shows instead of the value.
const redacted = "[REDACTED]"

// Value is a secret's plaintext. Its only reader is the proxy's
// substitution path; everything that prints, logs or encodes one sees
// redacted. The plaintext sits behind a pointer so that a Value nested
// in an unexported field of another struct, which fmt prints by
// reflection without calling Value's methods, shows an address and not
// the string.
type Value struct{ b *box }

type box struct{ s string }

// NewValue wraps a plaintext the API received.
func NewValue(s string) Value { return Value{&box{s}} }

// reveal is the one way back to the plaintext, for substitution only.
func (v Value) reveal() string {
	if v.b == nil {
		return ""
	}
	return v.b.s
}

// Len is the plaintext's length in bytes, for validation.
func (v Value) Len() int { return len(v.reveal()) }

func (Value) String() string   { return redacted }
func (Value) GoString() string { return redacted }

// Format covers every verb, %x and %q included, which would otherwise
// print a Value's field by reflection.
func (Value) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

func (Value) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
func (Value) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (Value) LogValue() slog.Value         { return slog.StringValue(redacted) }
