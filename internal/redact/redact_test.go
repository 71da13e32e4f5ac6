package redact_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sandplane/sandplane/internal/redact"
)

func TestEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		in   string
		want string
	}{
		{"no env", nil, "the key is hunter2", "the key is hunter2"},
		{"every occurrence", map[string]string{"KEY": "hunter2"}, "the key is hunter2, hunter2", "the key is [REDACTED], [REDACTED]"},
		{"values under four bytes are no secrets", map[string]string{"DEBUG": "1", "B": "on", "ON": "true"}, "DEBUG=1 B=on ON=true", "DEBUG=1 B=on ON=[REDACTED]"},
		{"a value inside another is hidden whole", map[string]string{"A": "hunter", "B": "hunter2x"}, "hunter2x and hunter", "[REDACTED] and [REDACTED]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, redact.Env(tt.env)(tt.in))
		})
	}
}
