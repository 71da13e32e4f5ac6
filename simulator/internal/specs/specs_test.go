package specs

import (
	"crypto/sha1" //nolint:gosec // git's blob name, not a security check
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The embedded primary document is byte for byte the blob clients/SOURCE
// names, so a hand edit of the copy fails here.
func TestAPIIsTheBlobSourceNames(t *testing.T) {
	h := sha1.New() //nolint:gosec // see above
	fmt.Fprintf(h, "blob %d\x00", len(API))
	h.Write(API)
	got := hex.EncodeToString(h.Sum(nil))
	want := ""
	for _, line := range strings.Split(Source, "\n") {
		if v, ok := strings.CutPrefix(line, "blob: "); ok {
			want = v
		}
	}
	require.Equal(t, want, got, "clients/daytona-api.yaml is not the git blob clients/SOURCE names")
	assert.Contains(t, Source, "tag: "+LatestVersion()+"\n", "clients/SOURCE and clients/VERSION disagree")
}
