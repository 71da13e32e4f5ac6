package secrets

import (
	"fmt"
	"log/slog"
)

// redacted is what every printing of a Value shows instead of the value.
const redacted = "[REDACTED]"

// Value is a secret's plaintext. Its only reader is the proxy's
// substitution path; everything that prints, logs or encodes one sees
// redacted. The plaintext is held by a closure, not a field: a Value
// nested in an unexported field of another struct is printed by fmt's
// reflection without Value's methods, and even through a pointer, but
// reflection shows a func as its address only.
type Value struct{ get func() string }

// NewValue wraps a plaintext the API received.
func NewValue(s string) Value { return Value{func() string { return s }} }

// reveal is the one way back to the plaintext, for substitution only.
func (v Value) reveal() string {
	if v.get == nil {
		return ""
	}
	return v.get()
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
