package faults

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var ops = Ops{"*": true, "toolbox": true, "preview": true, "getSandbox": true, "createSandbox": true}

func everyOrg(string) bool { return true }

// TestMatchConsumesInOrder plays requests against one scripted fault.
func TestMatchConsumesInOrder(t *testing.T) {
	type req struct {
		op, org string
		ids     []string
	}
	get := req{op: "getSandbox", org: "o", ids: []string{"a", "box"}}
	for _, tc := range []struct {
		name  string
		fault Fault
		reqs  []req
		want  []bool // whether each request gets the fault
	}{
		{name: "every time", fault: Fault{Op: "getSandbox", Status: 500}, reqs: []req{get, get, get}, want: []bool{true, true, true}},
		{name: "after and times", fault: Fault{Op: "getSandbox", Status: 500, After: 1, Times: 2}, reqs: []req{get, get, get, get}, want: []bool{false, true, true, false}},
		{name: "another op", fault: Fault{Op: "createSandbox", Status: 500}, reqs: []req{get}, want: []bool{false}},
		{name: "star", fault: Fault{Op: "*", Status: 500}, reqs: []req{get, {op: "toolbox", org: "o"}}, want: []bool{true, true}},
		{name: "by name", fault: Fault{Op: "getSandbox", Sandbox: "box", Status: 500}, reqs: []req{get, {op: "getSandbox", org: "o", ids: []string{"b"}}}, want: []bool{true, false}},
		{name: "by organization", fault: Fault{Op: "getSandbox", Org: "p", Status: 500}, reqs: []req{get, {op: "getSandbox", org: "p"}}, want: []bool{false, true}},
		{name: "an empty id names nothing", fault: Fault{Op: "getSandbox", Sandbox: "a", Status: 500}, reqs: []req{{op: "getSandbox", org: "o", ids: []string{""}}}, want: []bool{false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSet()
			added := s.Add(tc.fault)
			for i, r := range tc.reqs {
				ft, ok := s.Match(r.op, r.org, r.ids...)
				if ok != tc.want[i] {
					t.Fatalf("request %d: matched %v, want %v", i+1, ok, tc.want[i])
				}
				if ok && ft.ID != added.ID {
					t.Fatalf("request %d: fault %q, want %q", i+1, ft.ID, added.ID)
				}
			}
			if tc.fault.Times > 0 && s.Any() {
				t.Error("a used-up fault is still armed")
			}
		})
	}
}

// TestClearAndSnapshotKeepToTheirOrganizations: a call of one organization
// neither sees nor clears another's faults, nor the global ones.
func TestClearAndSnapshotKeepToTheirOrganizations(t *testing.T) {
	s := NewSet()
	s.Add(Fault{Op: "getSandbox", Org: "o", Status: 500})
	s.Add(Fault{Op: "getSandbox", Org: "p", Status: 500})
	s.Add(Fault{Op: "getSandbox", Status: 500})
	s.SetRandom("o", &Random{Rate: 1})
	ofO := func(org string) bool { return org == "o" }
	if got := s.Snapshot(ofO); len(got) != 1 || got[0].Org != "o" {
		t.Fatalf("o sees %+v", got)
	}
	s.Clear(ofO)
	if got := s.Snapshot(everyOrg); len(got) != 2 {
		t.Fatalf("after o cleared: %+v", got)
	}
	if _, ok := s.Match("createSandbox", "o"); ok {
		t.Error("o's random faults outlived its clear")
	}
	s.Clear(everyOrg)
	if s.Any() {
		t.Error("armed with nothing set")
	}
}

// Every op a fault may name fires as a random fault's, "*" included.
func TestRandomFaultsFireForEveryOpTheyName(t *testing.T) {
	for _, tc := range []struct {
		ops  []string
		op   string
		want bool
	}{
		{nil, "getSandbox", true},
		{nil, "toolbox", false},
		{[]string{"getSandbox"}, "getSandbox", true},
		{[]string{"*"}, "getSandbox", true},
		{[]string{"*"}, "toolbox", true},
		{[]string{"toolbox", "getSandbox"}, "getSandbox", true},
		{[]string{"createSandbox"}, "getSandbox", false},
	} {
		r := &randomFaults{Random: Random{Rate: 1, Ops: tc.ops}, rng: rand.New(rand.NewPCG(1, 2))}
		if _, ok := r.draw(tc.op); ok != tc.want {
			t.Errorf("ops %v, %s: drawn %v, want %v", tc.ops, tc.op, ok, tc.want)
		}
	}
}

// TestCheckSaysWhatIsWrong: a fault that could never fire is refused, in
// words that point at the fix.
func TestCheckSaysWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		fault Fault
		want  string // in the error; "" for none
	}{
		{Fault{Op: "getSandbox", Status: 500}, ""},
		{Fault{Op: "getSandbox", Delay: Duration(time.Second)}, ""},
		{Fault{Status: 500}, "needs an op"},
		{Fault{Op: "getsandbox", Status: 500}, "did you mean getSandbox"},
		{Fault{Op: "nope", Status: 500}, "not an operation"},
		{Fault{Op: "getSandbox", Status: 200}, "not an error status"},
		{Fault{Op: "getSandbox"}, "does nothing"},
		{Fault{Op: "getSandbox", Status: 500, Times: -1}, "cannot be negative"},
	} {
		err := tc.fault.Check(ops)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.fault, err, tc.want)
		}
	}
	if err := (&Random{Rate: 2}).Check(ops); err == nil {
		t.Error("a rate of 2 passes")
	}
}

func TestDurationJSON(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: `"1.5s"`, want: 1500 * time.Millisecond},
		{in: `250`, want: 250 * time.Millisecond},
		{in: `"soon"`, bad: true},
		{in: `true`, bad: true},
	} {
		var d Duration
		err := json.Unmarshal([]byte(tc.in), &d)
		if tc.bad != (err != nil) || !tc.bad && time.Duration(d) != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.in, time.Duration(d), err, tc.want)
		}
	}
}
