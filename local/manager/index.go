package manager

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/sandplane/sandplane/provider"
)

// index is the registry in memory: sandboxes by id, by name, and in list
// order (oldest first, then by id), each with its public view already made
// and encoded, so that a read copies what an update prepared and costs no
// system call. It is guarded by Manager.mu.
type index struct {
	byID   map[string]*entry
	byName map[string]*entry
	// order holds every entry sorted by (CreatedAt, ID), which never change.
	order []*entry
	// gen changes whenever a view does or an entry comes or goes; list is
	// the encoded list of every sandbox at generation listGen.
	gen     uint64
	list    []byte
	listGen uint64
	// unsettled counts the entries whose exitSeen is set.
	unsettled int
}

func newIndex() index {
	return index{byID: map[string]*entry{}, byName: map[string]*entry{}}
}

// has reports whether e is the registered sandbox of its id.
func (x *index) has(e *entry) bool { return x.byID[e.rec.ID] == e }

// add registers e.
func (x *index) add(e *entry) {
	x.byID[e.rec.ID] = e
	x.byName[e.rec.Name] = e
	i, _ := slices.BinarySearchFunc(x.order, e, compareEntries)
	x.order = slices.Insert(x.order, i, e)
	x.gen++
}

// remove takes e out of the registry; it does nothing if e is not in it.
func (x *index) remove(e *entry) {
	if !x.has(e) {
		return
	}
	delete(x.byID, e.rec.ID)
	if x.byName[e.rec.Name] == e {
		delete(x.byName, e.rec.Name)
	}
	if i, ok := slices.BinarySearchFunc(x.order, e, compareEntries); ok && x.order[i] == e {
		x.order = slices.Delete(x.order, i, i+1)
	} else if i := slices.Index(x.order, e); i >= 0 {
		x.order = slices.Delete(x.order, i, i+1) // two entries with one key
	}
	if e.exitSeen != nil {
		x.unsettled--
	}
	x.gen++
}

// lookup finds a sandbox by id, then by name.
func (x *index) lookup(idOrName string) (*entry, bool) {
	if e, ok := x.byID[idOrName]; ok {
		return e, true
	}
	e, ok := x.byName[idOrName]
	return e, ok
}

// conflicts returns the registered sandboxes whose id or name equals the
// id or the name of e, since lookups accept both.
func (x *index) conflicts(e *entry) []*entry {
	var out []*entry
	for _, o := range []*entry{x.byID[e.rec.ID], x.byName[e.rec.Name], x.byID[e.rec.Name], x.byName[e.rec.ID]} {
		if o != nil && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

func compareEntries(a, b *entry) int {
	if c := a.rec.CreatedAt.Compare(b.rec.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.rec.ID, b.rec.ID)
}

// install makes r e's record, with its view and that view's encoding.
func (m *Manager) install(e *entry, r *record) {
	view := m.info(r)
	js, err := json.Marshal(view)
	if err != nil {
		// Strings, numbers, times and a map of strings: Marshal cannot fail.
		panic(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e.rec, e.view, e.viewJSON = r, view, js
	m.reg.gen++
}

// newEntry returns the entry of a sandbox recorded as rec, not yet
// registered.
func (m *Manager) newEntry(rec *record) *entry {
	e := &entry{op: make(opLock, 1)}
	m.install(e, rec)
	return e
}

// viewOf returns e's public view. Labels are e's own: callers that hand
// the view out copy them.
func (m *Manager) viewOf(e *entry) provider.Sandbox {
	m.mu.Lock()
	defer m.mu.Unlock()
	return e.view
}

// encodedList returns the JSON array of the views of the sandboxes f
// picks, oldest first. The list of every sandbox is kept
// until a view changes, so that listing an unchanged registry copies one
// buffer.
func (m *Manager) encodedList(f Filter) []byte {
	m.mu.Lock()
	if f.IsZero() && m.reg.listGen == m.reg.gen && m.reg.list != nil {
		out := m.reg.list
		m.mu.Unlock()
		return out
	}
	gen := m.reg.gen
	parts := make([][]byte, 0, len(m.reg.order))
	size := 2
	for _, e := range m.reg.order {
		if f.Match(e.view) {
			parts = append(parts, e.viewJSON)
			size += len(e.viewJSON) + 1
		}
	}
	m.mu.Unlock()
	var b bytes.Buffer
	b.Grow(size)
	b.WriteByte('[')
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(p)
	}
	b.WriteByte(']')
	out := b.Bytes()
	if f.IsZero() {
		m.mu.Lock()
		if m.reg.gen == gen {
			m.reg.list, m.reg.listGen = out, gen
		}
		m.mu.Unlock()
	}
	return out
}
