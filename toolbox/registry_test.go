package toolbox

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refuseFull admits up to limit values and refuses a key that is taken.
func refuseFull(v string, limit int) func(string, bool, int) (string, error) {
	return func(_ string, taken bool, n int) (string, error) {
		switch {
		case taken:
			return "", errors.New("taken")
		case n >= limit:
			return "", errors.New("full")
		}
		return v, nil
	}
}

func TestRegistry(t *testing.T) {
	type op struct {
		do      string // add, keep (add that keeps a value held), get, getOrAdd, remove, close
		key     string
		val     string
		wantVal string
		wantErr string // "" none; "closed", "missing", or admit's error
	}
	tests := []struct {
		name string
		ops  []op
		want []string // values() at the end
	}{
		{"add then get", []op{
			{do: "add", key: "a", val: "A", wantVal: "A"},
			{do: "get", key: "a", wantVal: "A"},
		}, []string{"A"}},
		{"admit may keep what is held", []op{
			{do: "keep", key: "a", val: "A", wantVal: "A"},
			{do: "keep", key: "a", val: "B", wantVal: "A"},
		}, []string{"A"}},
		{"get of nothing", []op{
			{do: "get", key: "a", wantErr: "missing"},
		}, nil},
		{"a taken key is admit's to refuse", []op{
			{do: "add", key: "a", val: "A"},
			{do: "add", key: "a", val: "B", wantErr: "taken"},
			{do: "get", key: "a", wantVal: "A"},
		}, []string{"A"}},
		{"admit sees how many are held", []op{
			{do: "add", key: "a", val: "A"},
			{do: "add", key: "b", val: "B"},
			{do: "add", key: "c", val: "C", wantErr: "full"},
		}, []string{"A", "B"}},
		{"remove frees the key and a place", []op{
			{do: "add", key: "a", val: "A"},
			{do: "add", key: "b", val: "B"},
			{do: "remove", key: "a", wantVal: "A"},
			{do: "remove", key: "a", wantErr: "missing"},
			{do: "add", key: "c", val: "C"},
		}, []string{"B", "C"}},
		{"getOrAdd makes once, past the limit", []op{
			{do: "add", key: "a", val: "A"},
			{do: "add", key: "b", val: "B"},
			{do: "getOrAdd", key: "d", val: "D", wantVal: "D"},
			{do: "getOrAdd", key: "d", val: "E", wantVal: "D"},
		}, []string{"A", "B", "D"}},
		{"close refuses adds and empties", []op{
			{do: "add", key: "a", val: "A"},
			{do: "close", wantVal: "A"},
			{do: "add", key: "b", val: "B", wantErr: "closed"},
			{do: "get", key: "a", wantErr: "closed"},
			{do: "getOrAdd", key: "d", val: "D", wantErr: "closed"},
			{do: "remove", key: "a", wantErr: "missing"},
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRegistry[string, string]()
			for i, o := range tt.ops {
				var got string
				var err error
				switch o.do {
				case "add":
					got, err = r.add(o.key, refuseFull(o.val, 2))
				case "keep":
					got, err = r.add(o.key, func(old string, taken bool, _ int) (string, error) {
						if taken {
							return old, nil
						}
						return o.val, nil
					})
				case "get":
					got, err = r.get(o.key)
				case "getOrAdd":
					got, err = r.getOrAdd(o.key, func() string { return o.val })
				case "remove":
					var ok bool
					if got, ok = r.remove(o.key); !ok {
						err = errMissing
					}
				case "close":
					got = strings.Join(r.close(), ",")
				}
				switch o.wantErr {
				case "":
					require.NoError(t, err, "op %d %s", i, o.do)
				case "closed":
					require.ErrorIs(t, err, errClosed, "op %d %s", i, o.do)
				case "missing":
					require.ErrorIs(t, err, errMissing, "op %d %s", i, o.do)
				default:
					require.EqualError(t, err, o.wantErr, "op %d %s", i, o.do)
				}
				if o.wantVal != "" {
					assert.Equal(t, o.wantVal, got, "op %d %s", i, o.do)
				}
			}
			assert.ElementsMatch(t, tt.want, r.values())
		})
	}
}

// TestRegistryAddIsOneStep: admit's check and the insert it allows happen
// under one lock, so racing adds never pass the limit.
func TestRegistryAddIsOneStep(t *testing.T) {
	r := newRegistry[int, int]()
	const limit = 5
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			_, _ = r.add(i, func(_ int, _ bool, n int) (int, error) {
				if n >= limit {
					return 0, errors.New("full")
				}
				return i, nil
			})
		})
	}
	wg.Wait()
	assert.Len(t, r.values(), limit)
}
