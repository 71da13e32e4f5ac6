package toolbox

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/toolbox/wire"
)

func TestWriteJSON(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		v          any
		wantStatus int
		wantBody   string // a substring
	}{
		{"a value", http.StatusCreated, map[string]int{"n": 1}, http.StatusCreated, `{"n":1}`},
		{"a value JSON cannot hold", http.StatusOK, math.NaN(), http.StatusInternalServerError, "could not encode its answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			writeJSON(rec, tt.status, tt.v)
			assert.Equal(t, tt.wantStatus, rec.Code)
			assert.Equal(t, "application/json; charset=utf-8", rec.Header().Get("Content-Type"))
			assert.Contains(t, rec.Body.String(), tt.wantBody)
			if tt.wantStatus == http.StatusInternalServerError {
				var e wire.ErrorResponse
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), "Daytona's error shape")
				assert.Equal(t, http.StatusInternalServerError, e.StatusCode)
				assert.Equal(t, wire.ErrorCode(http.StatusInternalServerError), e.Code)
			}
		})
	}
}
