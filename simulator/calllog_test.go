package simulator

import (
	"net/http"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// within reports whether s's bytes lie inside the backing array of outer.
func within(s, outer string) bool {
	if len(s) == 0 || len(outer) == 0 {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(outer)))
	return p >= lo && p < lo+uintptr(len(outer))
}

// TestCallOwnsItsStrings checks that a call-log entry keeps its values but
// not the request line they were sliced from: the log outlives requests by
// thousands of calls.
func TestCallOwnsItsStrings(t *testing.T) {
	const id = "7f3c1e2a-0b4d-4c6e-8f10-123456789abc"
	for _, tc := range []struct {
		name, line     string // the request line, as net/http slices it
		method, path   string
		sandboxID      string
		idInsideTheLog bool // the id is found in the logged path
	}{
		{name: "delete by id", line: "DELETE /api/sandbox/" + id + " HTTP/1.1", method: "DELETE", path: "/api/sandbox/" + id, sandboxID: id, idInsideTheLog: true},
		{name: "create", line: "POST /api/sandbox HTTP/1.1", method: "POST", path: "/api/sandbox", sandboxID: id},
		{name: "no sandbox", line: "GET /api/snapshots HTTP/1.1", method: "GET", path: "/api/snapshots"},
		{name: "unknown method", line: "BREW /api/pot HTTP/1.1", method: "BREW", path: "/api/pot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := string([]byte(tc.line)) // a heap copy, as a request's
			c := Call{Method: line[:len(tc.method)], Path: line[len(tc.method)+1 : len(tc.method)+1+len(tc.path)]}
			if tc.sandboxID != "" {
				c.SandboxID = string([]byte(tc.sandboxID))
				if tc.idInsideTheLog {
					c.SandboxID = c.Path[len(c.Path)-len(id):]
				}
			}
			input := c
			got := c.owned()

			assert.Equal(t, tc.method, got.Method)
			assert.Equal(t, tc.path, got.Path)
			assert.Equal(t, tc.sandboxID, got.SandboxID)
			for name, s := range map[string]string{"method": got.Method, "path": got.Path, "sandboxId": got.SandboxID} {
				assert.False(t, within(s, line), "the logged %s keeps the request line alive", name)
			}
			if tc.sandboxID != "" {
				assert.False(t, within(got.SandboxID, input.SandboxID), "the logged id is the caller's string")
				if tc.idInsideTheLog {
					assert.True(t, within(got.SandboxID, got.Path), "the id is a slice of the logged path")
				} else {
					end := unsafe.Add(unsafe.Pointer(unsafe.StringData(got.Path)), len(got.Path))
					assert.Equal(t, end, unsafe.Pointer(unsafe.StringData(got.SandboxID)), "the id follows the path in one allocation")
				}
			}
			if tc.method != "BREW" {
				assert.Same(t, unsafe.StringData(knownMethod(tc.method)), unsafe.StringData(got.Method), "a known method is net/http's constant")
			}
		})
	}
	assert.Equal(t, http.MethodDelete, knownMethod("DELETE"))
}
