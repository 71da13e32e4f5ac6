package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sandplane/sandplane/provider"
)

func TestMinuteMismatchIsNamed(t *testing.T) {
	tests := []struct {
		name    string
		harness time.Duration
		minute  string
		want    []string // in the message; none: no mismatch
	}{
		{"the same shrunk minute", 200 * time.Millisecond, "200ms", nil},
		{"a real minute, reported", time.Minute, "1m0s", nil},
		{"a backend that reports none runs on real minutes", time.Minute, "", nil},
		{"a shrunk harness on a real backend", 600 * time.Millisecond, "1m0s", []string{"harness's interval minute is 600ms", "provider's is 1m0s"}},
		{"a shrunk harness on a backend that reports none", 600 * time.Millisecond, "", []string{"600ms", "provider's is 1m0s"}},
		{"another shrunk minute", 600 * time.Millisecond, "200ms", []string{"600ms", "200ms"}},
		{"a minute that is no duration", time.Minute, "soon", []string{`"soon"`, "not a positive duration"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := minuteMismatch(tt.harness, &provider.Info{Minute: tt.minute})
			if tt.want == nil {
				assert.NoError(t, err)
				return
			}
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}
