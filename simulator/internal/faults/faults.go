package faults

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fault scripts the outcome of the requests it matches. The zero fields do
// nothing, so a fault can combine a delay with a status, or a vanish with a
// normal answer.
type Fault struct {
	// ID is assigned when the fault is added.
	ID string `json:"id,omitempty"`
	// Org restricts the fault to the requests of one organization; empty
	// matches every organization's. The admin API sets it from the call's
	// organization.
	Org string `json:"org,omitempty"`
	// Op is the operationId to match ("createSandbox", "startSandbox", ...),
	// "toolbox" for toolbox requests, "preview" for preview traffic, "*"
	// for all of those, or OpWebhook for webhook deliveries, which only a
	// fault naming it reaches.
	Op string `json:"op"`
	// Sandbox restricts the fault to one sandbox, by id or name.
	Sandbox string `json:"sandbox,omitempty"`
	// After lets this many matching requests through untouched first.
	After int `json:"after,omitempty"`
	// Times is how many requests the fault applies to; 0 means all.
	Times int `json:"times,omitempty"`
	// Delay holds the request this long, on the simulator's clock, before
	// anything else happens.
	Delay Duration `json:"delay,omitempty"`
	// Status answers with this status and Daytona's error body instead of
	// handling the request. 429 adds the rate-limit headers.
	Status  int    `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	// RetryAfter is the 429's Retry-After in seconds (default 1).
	RetryAfter int `json:"retryAfter,omitempty"`
	// FailStart makes the sandbox's next transition towards started (the
	// create, a start, a restore) end in state error with this errorReason.
	FailStart   string `json:"failStart,omitempty"`
	Recoverable bool   `json:"recoverable,omitempty"`
	// Vanish makes the sandbox disappear, as if deleted out of band: before
	// the request is handled, or for createSandbox right after it answers.
	Vanish bool `json:"vanish,omitempty"`
	// Drop loses a webhook delivery before it reaches the receiver, which
	// then gets it again on the retry schedule (OpWebhook only).
	Drop bool `json:"drop,omitempty"`
	// Duplicate delivers a webhook twice with one svix-id (OpWebhook only).
	Duplicate bool `json:"duplicate,omitempty"`

	seen, applied int
}

// OpWebhook is the Op of faults on webhook deliveries. "*" does not cover
// it: a fault meant for requests must not start losing a host's webhooks.
const OpWebhook = "webhook"

// Random injects faults at random, reproducibly for a given seed.
type Random struct {
	Seed uint64 `json:"seed"`
	// Rate is the probability that a matching request gets a fault.
	Rate float64 `json:"rate"`
	// Ops limits the faults to these operations; empty means every API
	// operation, and "*" every operation, toolbox and preview included.
	Ops []string `json:"ops,omitempty"`
	// Outcomes are the faults to pick from (Op and counters are ignored).
	// Default: statuses 500, 503 and 429.
	Outcomes []Fault `json:"outcomes,omitempty"`
}

// Duration is a time.Duration that reads and writes JSON as "1.5s"; a bare
// number means milliseconds.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("duration must be a string like \"1.5s\" or milliseconds")
	}
	*d = Duration(ms * float64(time.Millisecond))
	return nil
}

// Check says what is wrong with f, in words for whoever wrote it: a fault
// that names none of ops, or that would do nothing, never fires, and a test
// that relies on it passes for the wrong reason.
func (f *Fault) Check(ops Ops) error {
	if f.Op == "" {
		return errors.New("a fault needs an op: an operationId of Daytona's API (such as getSandbox or createSandbox), toolbox, preview or *")
	}
	if err := ops.check(f.Op); err != nil {
		return err
	}
	if f.After < 0 || f.Times < 0 || f.Delay < 0 || f.RetryAfter < 0 {
		return errors.New("after, times, delay and retryAfter cannot be negative")
	}
	if f.Op == OpWebhook {
		return f.checkWebhookOutcome()
	}
	if f.Drop || f.Duplicate {
		return errors.New("drop and duplicate act on webhook deliveries: give them op " + OpWebhook)
	}
	return f.checkOutcome()
}

// checkWebhookOutcome says what is wrong with what a webhook fault does.
func (f *Fault) checkWebhookOutcome() error {
	if f.Status != 0 || f.FailStart != "" || f.Vanish {
		return errors.New("a webhook fault drops, duplicates or delays a delivery: give drop, duplicate or delay, not status, failStart or vanish")
	}
	if !f.Drop && !f.Duplicate && f.Delay == 0 {
		return errors.New("the fault does nothing: give it drop, duplicate or a delay")
	}
	return nil
}

// checkOutcome says what is wrong with what f does.
func (f *Fault) checkOutcome() error {
	if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
		return fmt.Errorf("status %d is not an error status: give one from 400 to 599", f.Status)
	}
	if f.Status == 0 && f.Delay == 0 && f.FailStart == "" && !f.Vanish {
		return errors.New("the fault does nothing: give it a status, a delay, failStart or vanish")
	}
	return nil
}

// Check says what is wrong with r, whose Ops must be among ops.
func (r *Random) Check(ops Ops) error {
	if r.Rate < 0 || r.Rate > 1 {
		return fmt.Errorf("rate %v is not a probability: give one from 0 to 1", r.Rate)
	}
	for _, op := range r.Ops {
		if op == OpWebhook {
			return errors.New("random faults do not reach webhook deliveries: script them with a fault of op " + OpWebhook)
		}
		if err := ops.check(op); err != nil {
			return err
		}
	}
	for i := range r.Outcomes {
		if err := r.Outcomes[i].checkOutcome(); err != nil {
			return fmt.Errorf("outcome %d: %w", i+1, err)
		}
	}
	return nil
}

// Ops are the ops a fault may name: the API's operationIds, "toolbox",
// "preview", and "*" for every one.
type Ops map[string]bool

// check says why op is not one a fault can match, naming the one meant
// when only its case differs.
func (ops Ops) check(op string) error {
	if ops[op] {
		return nil
	}
	for known := range ops {
		if strings.EqualFold(known, op) {
			return fmt.Errorf("op %q is not an operation of this simulator: did you mean %s?", op, known)
		}
	}
	return fmt.Errorf("op %q is not an operation of this simulator: use an operationId of Daytona's API (such as getSandbox or createSandbox), toolbox, preview or *", op)
}

// Set is the faults in force: the scripted ones in the order they were
// added, and the random ones by organization. It is safe for concurrent
// use.
type Set struct {
	// armed is nonzero while any fault is set, so that the common case
	// costs one atomic load.
	armed  atomic.Int32
	mu     sync.Mutex
	list   []*Fault
	nextID int
	// random holds the random faults by organization; "" applies to every
	// organization.
	random map[string]*randomFaults
}

// randomFaults is one organization's random faults with their own source,
// so that one organization's traffic does not shift another's draws.
type randomFaults struct {
	Random
	rng *rand.Rand
}

// NewSet returns an empty set.
func NewSet() *Set {
	return &Set{random: map[string]*randomFaults{}}
}

// Add adds ft with an ID of its own, and returns it.
func (f *Set) Add(ft Fault) Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	ft.ID = strconv.Itoa(f.nextID)
	ft.seen, ft.applied = 0, 0
	f.list = append(f.list, &ft)
	f.rearmLocked()
	return ft
}

// Snapshot returns the scripted faults of the organizations owns accepts
// ("" is a fault for every organization).
func (f *Set) Snapshot(owns func(org string) bool) []Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Fault, 0, len(f.list))
	for _, ft := range f.list {
		if owns(ft.Org) {
			out = append(out, *ft)
		}
	}
	return out
}

// Clear removes the scripted and random faults of the organizations owns
// accepts.
func (f *Set) Clear(owns func(org string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	kept := f.list[:0]
	for _, ft := range f.list {
		if !owns(ft.Org) {
			kept = append(kept, ft)
		}
	}
	clear(f.list[len(kept):])
	f.list = kept
	for org := range f.random {
		if owns(org) {
			delete(f.random, org)
		}
	}
	f.rearmLocked()
}

func (f *Set) rearmLocked() {
	if len(f.list) > 0 || len(f.random) > 0 {
		f.armed.Store(1)
	} else {
		f.armed.Store(0)
	}
}

// Any reports whether any fault is set: one atomic load, so that a
// simulator without faults pays nothing more per request.
func (f *Set) Any() bool { return f.armed.Load() != 0 }

// SetRandom sets the random faults of org ("" for every organization), or
// turns them off with nil.
func (f *Set) SetRandom(org string, r *Random) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r == nil {
		delete(f.random, org)
	} else {
		f.random[org] = &randomFaults{Random: *r, rng: rand.New(rand.NewPCG(r.Seed, r.Seed+1))}
	}
	f.rearmLocked()
}

// Match returns the fault for a request of org, if one applies, and
// consumes it. ids are the names the request's sandbox goes by (what the
// path said, and the resolved id and name).
func (f *Set) Match(op, org string, ids ...string) (Fault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, ft := range f.list {
		if ft.Op != op && (ft.Op != "*" || op == OpWebhook) {
			continue
		}
		if ft.Org != "" && ft.Org != org {
			continue
		}
		if ft.Sandbox != "" && !contains(ids, ft.Sandbox) {
			continue
		}
		ft.seen++
		if ft.seen <= ft.After {
			continue
		}
		ft.applied++
		out := *ft
		if ft.Times > 0 && ft.applied >= ft.Times {
			f.list = append(f.list[:i:i], f.list[i+1:]...)
			f.rearmLocked()
		}
		return out, true
	}
	// An organization's own random faults replace the ones for everyone.
	r := f.random[org]
	if r == nil {
		r = f.random[""]
	}
	if r != nil && op != OpWebhook {
		return r.draw(op)
	}
	return Fault{}, false
}

// draw decides whether op gets a random fault, and which.
func (r *randomFaults) draw(op string) (Fault, bool) {
	if r.Rate <= 0 || !(len(r.Ops) == 0 && op != "toolbox" && op != "preview" || contains(r.Ops, op) || contains(r.Ops, "*")) {
		return Fault{}, false
	}
	if r.rng.Float64() >= r.Rate {
		return Fault{}, false
	}
	outcomes := r.Outcomes
	if len(outcomes) == 0 {
		outcomes = []Fault{{Status: 500}, {Status: 503}, {Status: 429}}
	}
	out := outcomes[r.rng.IntN(len(outcomes))]
	out.ID = "random"
	out.Op = op
	return out, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x != "" && x == s {
			return true
		}
	}
	return false
}
