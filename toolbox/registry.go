package toolbox

import (
	"errors"
	"net/http"
	"sync"
)

// errClosed is what a registry answers once the toolbox is closing: the
// daemon's 410, so that a caller can return it as it is.
var errClosed = &apiError{status: http.StatusGone, code: "GONE", msg: "toolbox is shutting down"}

// errMissing is what a registry answers for a key that holds nothing; its
// owner says what was not found, in its own words.
var errMissing = errors.New("not registered")

// registry holds the live objects of one kind (session shells, PTYs,
// interpreter contexts, language servers) by key, under one lock, until
// the toolbox closes.
// It never calls into its values: ending one is the caller's job, done
// once the value has left the registry and outside its lock, since it may
// wait out a hang-up's grace.
type registry[K comparable, V any] struct {
	mu     sync.Mutex
	m      map[K]V
	closed bool
}

func newRegistry[K comparable, V any]() *registry[K, V] {
	return &registry[K, V]{m: map[K]V{}}
}

// add stores under k the value that admit makes, and returns it. Once the
// registry is closed it fails with errClosed and admit is not called.
// Otherwise admit runs under the lock, told what k holds (if taken) and
// how many values are held, so that its checks and the insert they allow
// are one step; it returns the value to hold under k (the old one, to keep
// it), or the error that refuses it. admit must not call back into the
// registry.
func (r *registry[K, V]) add(k K, admit func(old V, taken bool, n int) (V, error)) (V, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		var zero V
		return zero, errClosed
	}
	old, taken := r.m[k]
	v, err := admit(old, taken, len(r.m))
	if err != nil {
		return v, err
	}
	r.m[k] = v
	return v, nil
}

// get returns the value under k: errClosed once closed, errMissing when
// there is none.
func (r *registry[K, V]) get(k K) (V, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[k]
	switch {
	case r.closed:
		return v, errClosed
	case !ok:
		return v, errMissing
	}
	return v, nil
}

// getOrAdd returns the value under k, which mk makes, under the lock, on
// first use; errClosed once closed. It is for values that exist without
// being asked for (the default interpreter context), so no limit applies.
func (r *registry[K, V]) getOrAdd(k K, mk func() V) (V, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		var zero V
		return zero, errClosed
	}
	v, ok := r.m[k]
	if !ok {
		v = mk()
		r.m[k] = v
	}
	return v, nil
}

// remove takes the value under k out and returns it; false when there was
// none.
func (r *registry[K, V]) remove(k K) (V, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[k]
	delete(r.m, k)
	return v, ok
}

// values returns what is held now, in no order.
func (r *registry[K, V]) values() []V {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]V, 0, len(r.m))
	for _, v := range r.m {
		out = append(out, v)
	}
	return out
}

// close refuses every later add and returns what was held, which the
// caller ends.
func (r *registry[K, V]) close() []V {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	out := make([]V, 0, len(r.m))
	for _, v := range r.m {
		out = append(out, v)
	}
	clear(r.m)
	return out
}
