package simulator

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOrgNamesShareOneString checks that every request with a key gets the
// organization orgOf derives, as one shared string while the map has room,
// and that keys beyond its bound are still answered right without growing
// it.
func TestOrgNamesShareOneString(t *testing.T) {
	n := newOrgNames()
	first := n.of("key-a")
	second := n.of("key-a")
	assert.Equal(t, orgOf("key-a"), first)
	assert.Same(t, unsafe.StringData(first), unsafe.StringData(second), "one string per organization")
	assert.NotEqual(t, first, n.of("key-b"), "another key is another organization")

	for i := range maxOrgNames + 10 {
		key := fmt.Sprintf("key-%d", i)
		require.Equal(t, orgOf(key), n.of(key))
	}
	assert.Len(t, n.byID, maxOrgNames, "the map stays bounded whatever keys arrive")
	assert.Same(t, unsafe.StringData(first), unsafe.StringData(n.of("key-a")), "a remembered key keeps its string")
}
