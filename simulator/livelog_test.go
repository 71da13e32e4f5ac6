package simulator

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A follower of the build logs gets each write as it is made, and its
// stream ends when the build does; a plain read gets what is there.
func TestLiveLogFollow(t *testing.T) {
	l := newLiveLog()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveLogs(w, r, l, "")
	}))
	t.Cleanup(srv.Close)
	_, _ = io.WriteString(l, "Step 1/2 : FROM base\n")

	resp, err := http.Get(srv.URL + "?follow=true")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	lines := bufio.NewReader(resp.Body)
	line, err := lines.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "Step 1/2 : FROM base\n", line, "what was written before")

	_, _ = io.WriteString(l, "Step 2/2 : RUN make\n")
	line, err = lines.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "Step 2/2 : RUN make\n", line, "a write reaches the follower while the build runs")

	plain, err := http.Get(srv.URL)
	require.NoError(t, err)
	b, err := io.ReadAll(plain.Body)
	plain.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, "Step 1/2 : FROM base\nStep 2/2 : RUN make\n", string(b), "without follow, what is there")

	_, _ = io.WriteString(l, "Successfully built\n")
	l.finish()
	rest, err := io.ReadAll(lines)
	require.NoError(t, err, "the stream ends with the build")
	assert.Equal(t, "Successfully built\n", string(rest))
	_, _ = io.WriteString(l, "late\n")
	assert.NotContains(t, l.String(), "late", "nothing is added once finished")
}
