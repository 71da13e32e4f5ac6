package secrets

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider/clock/clocktest"
)

const testValue = "sk-live-do-not-print-7f3a"

func newTestStore() (*Store, *clocktest.Fake) {
	clk := clocktest.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	return NewStore(clk), clk
}

func TestCreateValidates(t *testing.T) {
	long := strings.Repeat("a", maxNameLen+1)
	tests := []struct {
		name  string
		spec  Spec
		want  error
		hosts []string
	}{
		{"plain", Spec{Name: "MY_API_KEY", Value: NewValue("v")}, nil, []string{}},
		{"hyphen and digits", Spec{Name: "_a-1", Value: NewValue("v")}, nil, []string{}},
		{"hosts normalized", Spec{Name: "k", Value: NewValue("v"), Hosts: []string{"API.Example.com.", "*.example.com", "api.example.com"}}, nil, []string{"api.example.com", "*.example.com"}},
		{"leading digit", Spec{Name: "1KEY", Value: NewValue("v")}, ErrInvalid, nil},
		{"dot in name", Spec{Name: "a.b", Value: NewValue("v")}, ErrInvalid, nil},
		{"empty name", Spec{Name: "", Value: NewValue("v")}, ErrInvalid, nil},
		{"long name", Spec{Name: long, Value: NewValue("v")}, ErrInvalid, nil},
		{"empty value", Spec{Name: "k"}, ErrInvalid, nil},
		{"host with port", Spec{Name: "k", Value: NewValue("v"), Hosts: []string{"api.example.com:443"}}, ErrInvalid, nil},
		{"host with scheme", Spec{Name: "k", Value: NewValue("v"), Hosts: []string{"https://api.example.com"}}, ErrInvalid, nil},
		{"inner wildcard", Spec{Name: "k", Value: NewValue("v"), Hosts: []string{"api.*.com"}}, ErrInvalid, nil},
		{"bare wildcard", Spec{Name: "k", Value: NewValue("v"), Hosts: []string{"*"}}, ErrInvalid, nil},
		{"empty host", Spec{Name: "k", Value: NewValue("v"), Hosts: []string{""}}, ErrInvalid, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestStore()
			got, err := s.Create("org", tt.spec)
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want)
				assert.Equal(t, http.StatusBadRequest, HTTPStatus(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.hosts, got.Hosts)
			assert.Regexp(t, `^dtn_secret_[0-9a-f]{32}$`, got.Placeholder)
			assert.Len(t, got.Placeholder, PlaceholderLen)
		})
	}
}

func TestCRUD(t *testing.T) {
	s, clk := newTestStore()
	a, err := s.Create("org", Spec{Name: "A", Value: NewValue(testValue), Hosts: []string{"a.test"}})
	require.NoError(t, err)

	_, err = s.Create("org", Spec{Name: "A", Value: NewValue("x")})
	require.ErrorIs(t, err, ErrConflict)
	assert.Equal(t, http.StatusConflict, HTTPStatus(err))

	_, err = s.Create("other-org", Spec{Name: "A", Value: NewValue("x")})
	require.NoError(t, err, "names are unique within an organization only")

	_, err = s.Get("other-org", a.ID)
	require.ErrorIs(t, err, ErrNotFound, "an organization does not see another's secrets")
	assert.Equal(t, http.StatusNotFound, HTTPStatus(err))

	clk.Advance(time.Minute)
	b, err := s.Create("org", Spec{Name: "B", Value: NewValue("x")})
	require.NoError(t, err)
	assert.NotEqual(t, a.Placeholder, b.Placeholder)
	assert.Equal(t, []string{"A", "B"}, names(s.List("org")))

	desc, hosts := "new", []string{"*.b.test"}
	clk.Advance(time.Minute)
	up, err := s.Update("org", a.ID, Patch{Description: &desc, Hosts: &hosts})
	require.NoError(t, err)
	assert.Equal(t, "new", up.Description)
	assert.Equal(t, hosts, up.Hosts)
	assert.Equal(t, a.Placeholder, up.Placeholder, "the placeholder outlives an update")
	assert.True(t, up.UpdatedAt.After(a.UpdatedAt))
	assert.Equal(t, a.CreatedAt, up.CreatedAt)

	bad := []string{"x:1"}
	_, err = s.Update("org", a.ID, Patch{Hosts: &bad})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = s.Update("org", "missing", Patch{})
	require.ErrorIs(t, err, ErrNotFound)

	require.NoError(t, s.Delete("org", a.ID))
	require.ErrorIs(t, s.Delete("org", a.ID), ErrNotFound)
	assert.Equal(t, []string{"B"}, names(s.List("org")))
}

func TestMount(t *testing.T) {
	s, _ := newTestStore()
	a, err := s.Create("org", Spec{Name: "A", Value: NewValue(testValue)})
	require.NoError(t, err)

	require.ErrorIs(t, s.Mount("org", "sb", map[string]string{"KEY": "missing"}), ErrNotFound)
	require.ErrorIs(t, s.Mount("org", "sb", map[string]string{"BAD-ENV": "A"}), ErrInvalid)
	require.ErrorIs(t, s.Mount("other-org", "sb", map[string]string{"KEY": "A"}), ErrNotFound)
	assert.Empty(t, s.Env("sb"), "a failed mount changes nothing")

	require.NoError(t, s.Mount("org", "sb", map[string]string{"KEY": "A", "ALSO": "A"}))
	assert.Equal(t, map[string]string{"KEY": a.Placeholder, "ALSO": a.Placeholder}, s.Env("sb"))
	assert.Equal(t, map[string]string{"KEY": "A", "ALSO": "A"}, s.Mounts("sb"))

	require.NoError(t, s.Mount("org", "sb", map[string]string{}))
	assert.Empty(t, s.Env("sb"), "an empty set detaches them all")

	require.NoError(t, s.Mount("org", "sb", map[string]string{"KEY": "A"}))
	require.NoError(t, s.Delete("org", a.ID))
	assert.Empty(t, s.Env("sb"), "a deleted secret is mounted no more")
	assert.Empty(t, s.substitutions("sb", "any.test"))
}

func TestHostMatching(t *testing.T) {
	tests := []struct {
		hosts []string
		host  string
		want  bool
	}{
		{nil, "anything.test", true},
		{[]string{"api.example.com"}, "api.example.com", true},
		{[]string{"api.example.com"}, "example.com", false},
		{[]string{"api.example.com"}, "evil-api.example.com", false},
		{[]string{"*.example.com"}, "api.example.com", true},
		{[]string{"*.example.com"}, "a.b.example.com", true},
		{[]string{"*.example.com"}, "example.com", false},
		{[]string{"*.example.com"}, "badexample.com", false},
		{[]string{"a.test", "b.test"}, "b.test", true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.hosts, tt.host), func(t *testing.T) {
			assert.Equal(t, tt.want, allows(tt.hosts, tt.host))
		})
	}
}

// Every way a value might be printed shows [REDACTED], the value held
// directly, behind a pointer, or in an unexported field of another type.
func TestValueNeverPrints(t *testing.T) {
	v := NewValue(testValue)
	spec := Spec{Name: "A", Value: v}
	nested := stored{value: v}
	patch := Patch{Value: &v}

	var printed []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X"} {
		for _, x := range []any{v, &v, spec, &spec, nested, &nested, patch, []Value{v}, map[string]Value{"k": v}} {
			printed = append(printed, fmt.Sprintf(verb, x))
		}
	}
	for _, x := range []any{v, spec, patch, map[string]Value{"k": v}} {
		b, err := json.Marshal(x)
		require.NoError(t, err)
		printed = append(printed, string(b))
	}
	var logs bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&logs, nil), slog.NewJSONHandler(&logs, nil)} {
		slog.New(h).Info("secret", "value", v, "spec", spec, "nested", nested, "patch", patch)
	}
	printed = append(printed, logs.String(), v.String(), v.GoString())

	for _, p := range printed {
		assert.NotContains(t, p, testValue)
		assert.NotContains(t, p, fmt.Sprintf("%x", testValue))
	}
	assert.Equal(t, testValue, v.reveal(), "substitution still gets it")
}

func names(list []Secret) []string {
	out := make([]string, 0, len(list))
	for _, s := range list {
		out = append(out, s.Name)
	}
	return out
}
