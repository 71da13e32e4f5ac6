package daemon

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/wire"
)

// The create body a host sends Daytona and the daemon alike: the daemon
// takes it whole, names what it ignored, and keeps one identity.
func TestCreateTakesTheHostsBody(t *testing.T) {
	ts, _ := newTestServer(t, "")
	tests := []struct {
		name        string
		body        string
		wantStatus  int
		wantID      string // "" for a minted one
		wantWarning string
		wantInBody  string
	}{
		{"Daytona's fields", `{"name":"s1","public":false,"autoDeleteInterval":30,"autoArchiveInterval":60,"target":"eu","cpu":2,"memory":4,"disk":10,"gpu":0}`,
			http.StatusCreated, "s1", `299 sandplane "accepted and ignored: autoArchiveInterval, target, cpu, memory, disk"`, ""},
		{"public, honoured", `{"name":"s2","public":true}`, http.StatusCreated, "s2", "", ""},
		{"nothing to ignore", `{"name":"s3","autoStopInterval":0}`, http.StatusCreated, "s3", "", ""},
		{"an id alone", `{"id":"s4"}`, http.StatusCreated, "s4", "", ""},
		{"id and name the same", `{"id":"s5","name":"s5"}`, http.StatusCreated, "s5", "", ""},
		{"neither", `{}`, http.StatusCreated, "", "", ""},
		{"id and name differ", `{"id":"s6","name":"s7"}`, http.StatusBadRequest, "", "", `a sandbox's id is its name`},
		{"a typo", `{"name":"s8","autoDeleteIntervall":30}`, http.StatusBadRequest, "", "", `property \"autoDeleteIntervall\" is unsupported`},
		{"a name no preview host can hold", `{"name":"My_Box"}`, http.StatusBadRequest, "", "", `part of the preview host`},
		{"autoDeleteInterval below -1", `{"name":"s9","autoDeleteInterval":-2}`, http.StatusBadRequest, "", "", `autoDeleteInterval`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := do(t, ts, "POST", "/v1/sandboxes", tt.body)
			require.Equal(t, tt.wantStatus, got.status, got.body)
			assert.Equal(t, tt.wantWarning, got.header.Get("Warning"))
			assert.Contains(t, got.body, tt.wantInBody)
			if got.status != http.StatusCreated {
				assert.Equal(t, provider.InvalidArgument, errorCode(t, got))
				return
			}
			var sb provider.Sandbox
			require.NoError(t, json.Unmarshal([]byte(got.body), &sb))
			assert.Equal(t, sb.ID, sb.Name, "one identity")
			if tt.wantID != "" {
				assert.Equal(t, tt.wantID, sb.ID)
			} else {
				assert.Regexp(t, `^[0-9a-f-]{36}$`, sb.ID, "a minted id, which is a DNS label too")
			}
			assert.Nil(t, sb.SessionID)
			assert.Contains(t, got.body, `"sessionId":null`, "the wire type is string | null")
		})
	}
}

func TestSessions(t *testing.T) {
	ts, _ := newTestServer(t, "")
	for _, body := range []string{
		`{"name":"a","sessionId":"sess-1","labels":{"team":"x"}}`,
		`{"name":"b","sessionId":"sess-2","labels":{"team":"x"}}`,
		`{"name":"c"}`,
	} {
		got := do(t, ts, "POST", "/v1/sandboxes", body)
		require.Equal(t, http.StatusCreated, got.status, got.body)
	}
	got := do(t, ts, "GET", "/v1/sandboxes/a", "")
	require.Equal(t, http.StatusOK, got.status, got.body)
	assert.Contains(t, got.body, `"sessionId":"sess-1"`)

	names := func(query string) []string {
		t.Helper()
		got := do(t, ts, "GET", "/v1/sandboxes"+query, "")
		require.Equal(t, http.StatusOK, got.status, got.body)
		var list wire.SandboxList
		require.NoError(t, json.Unmarshal([]byte(got.body), &list))
		out := []string{}
		for _, s := range list.Items {
			out = append(out, s.Name)
		}
		return out
	}
	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{"a", "b", "c"}},
		{"?sessionId=sess-1", []string{"a"}},
		{"?sessionId=sess-2&label.team=x", []string{"b"}},
		{"?sessionId=sess-3", []string{}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, names(tt.query), tt.query)
	}
	for _, query := range []string{"?sessionId=", "?sessionId=a&sessionId=b", "?session=a"} {
		got := do(t, ts, "GET", "/v1/sandboxes"+query, "")
		assert.Equal(t, http.StatusBadRequest, got.status, query)
		assert.Equal(t, provider.InvalidArgument, errorCode(t, got), query)
	}
	got = do(t, ts, "POST", "/v1/sandboxes", `{"name":"d","sessionId":"has space"}`)
	assert.Equal(t, http.StatusBadRequest, got.status, got.body)
	assert.Contains(t, got.body, "sessionId")
}
